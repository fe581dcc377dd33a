// Device code for the layer-norm family (LayerNorm, SkipLayerNorm, RMSNorm,
// EmbedLayerNorm). Per-row math: see plugins/norm/norm.h and embed.h. Five
// kernels, all float32 math:
//
//   norm_warp_kernel     one warp per row, WARPS rows per CTA, ITEMS 16-byte vectors
//                        per lane in registers, shuffle reductions only (short rows).
//   norm_row_kernel      one CTA per row, one 16-byte vector per thread (BLOCK >=
//                        cols / VEC, any whole number of warps), every input of the
//                        row (and bias, gamma, beta) loaded up front: short rows on
//                        latency-bound grids (BERT SkipLayerNorm, hidden 768).
//   norm_block_kernel    one CTA per row, ITEMS 16-byte vectors per thread in
//                        registers, block all-reduce through a tiny shared array.
//   norm_generic_kernel  one CTA per row, scalar loads (any alignment, any cols);
//                        the row is cached as float in dynamic shared memory when
//                        CACHE, else re-read from global memory on every pass.
//   embed_norm_kernel    EmbedLayerNorm: the generic kernel's row body over rows
//                        gathered from embedding tables by index.
//
// Optional inputs/outputs and the norm kind are runtime branches on values that
// are uniform across the CTA, so they never diverge and never multiply the
// instantiation count. Rows are visited grid-stride with 64-bit indices.
#pragma once

#include <cstdint>

#include "plugins/common/cuda_utils.cuh"

namespace trt_fastops::norm {

template <typename T>
struct NormArgs {
  const T* x;
  const T* skip;  // null: no skip
  const T* bias;  // null: no bias
  const T* gamma;
  const T* beta;  // null: no beta
  T* y;
  T* sum_out;       // null: not wanted
  float* mean_out;  // null: not wanted
  float* rstd_out;  // null: not wanted
  int64_t rows;
  int64_t cols;
  int64_t skip_rows;
  float epsilon;
  float inv_cols;  // 1 / cols, rounded once on the host
  bool rms;        // mean is 0 (RMSNorm)
  bool gamma_scalar;
  bool beta_scalar;
};

// ---------------------------------------------------------------------------
// Register-resident rows (paths A and B).

// Elements of a row (nvec vectors of VEC) that warp `warp` holds when THREADS
// threads own vectors tid + i * THREADS, i < ITEMS.
template <int VEC, int ITEMS, int THREADS>
__device__ __forceinline__ int warp_elements(int warp, int nvec) {
  int n = 0;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int left = nvec - (warp * kWarpSize + i * THREADS);
    n += left <= 0 ? 0 : left >= kWarpSize ? kWarpSize : left;
  }
  return n * VEC;
}

// Normalises one row held in registers. THREADS threads share the row (one
// warp, or the whole CTA); thread `tid` owns vectors tid, tid + THREADS, ...,
// ITEMS of them (some past the end of a short row). `scratch` and `phase` are
// the CTA path's two alternating shared arrays for block reductions (see
// block_all_reduce_sum); the warp path passes null and never touches them.
//
// The load/convert phase is straight-line code: a vector past the row end (or
// a missing skip / bias) loads as zeros instead of branching, so the compiler
// issues every load of the row before the first arithmetic and keeps only the
// raw packs and the float row live (no per-item branches to schedule around).
//
// EARLY (short grids, one row per warp or CTA and few of them): bias, gamma and
// beta are loaded together with the row instead of after the statistics, so a
// row costs one memory round trip instead of three; it needs ~3 * ITEMS more
// packs of registers, which only bandwidth-bound (long) grids can't spare.
template <typename T, int ITEMS, int THREADS, bool EARLY = false>
__device__ __forceinline__ void norm_row_in_registers(const NormArgs<T>& a, int64_t row, int tid,
                                                      float2 (*scratch)[THREADS / kWarpSize],
                                                      int& phase) {
  constexpr int VEC = Pack<T>::N;
  const int nvec = static_cast<int>(a.cols / VEC);
  const int64_t base = row * a.cols;
  const bool has_skip = a.skip != nullptr;
  const bool has_bias = a.bias != nullptr;
  const T* skip_row =
      has_skip ? a.skip + (row < a.skip_rows ? row : row % a.skip_rows) * a.cols : a.x;
  // Per-column parameters are re-derived per row from opaque pointers: hoisting
  // ITEMS addresses each out of the row loop would pin ~2 * 3 * ITEMS registers.
  const T* gamma = opaque_ptr(a.gamma);
  const T* beta = opaque_ptr(a.beta);
  const T* bias = opaque_ptr(a.bias);

  Pack<T> xr[ITEMS];
  Pack<T> kr[ITEMS];
  // EARLY only: per-column parameters, loaded with the row.
  Pack<T> br[EARLY ? ITEMS : 1], gr[EARLY ? ITEMS : 1], er[EARLY ? ITEMS : 1];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int v = tid + i * THREADS;
    const bool in_row = v < nvec;
    xr[i] = load_pack_if(in_row, a.x + base + int64_t(v) * VEC);
    kr[i] = load_pack_if(in_row && has_skip, skip_row + int64_t(v) * VEC);
    if constexpr (EARLY) {
      br[i] = load_pack_if(in_row && has_bias, bias + int64_t(v) * VEC);
      gr[i] = load_pack_if(in_row && !a.gamma_scalar, gamma + int64_t(v) * VEC);
      er[i] = load_pack_if(in_row && beta != nullptr && !a.beta_scalar, beta + int64_t(v) * VEC);
    }
  }
  float s[ITEMS][VEC];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    float t[VEC];
    pack_to_float(xr[i], s[i]);
    pack_to_float(kr[i], t);
#pragma unroll
    for (int j = 0; j < VEC; ++j) s[i][j] += t[j];
  }
  if (has_bias) {  // [cols], shared by all rows: L1/L2 hits, loaded after the row (unless EARLY)
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int v = tid + i * THREADS;
      float t[VEC];
      if constexpr (EARLY) {
        pack_to_float(br[i], t);
      } else {
        pack_to_float(load_pack_if(v < nvec, bias + int64_t(v) * VEC), t);
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) s[i][j] += t[j];
    }
  }

  // Statistics. RMSNorm: one all-reduce of sum(s^2). LayerNorm, one warp per
  // row: exact two-pass (mean, then squared deviations), shuffles only.
  // LayerNorm, one CTA per row: each warp does the exact two-pass on its own
  // part, then one block exchange combines the warps' (sum, M2) pairs with
  // M2 = sum_w [M2_w + n_w (mean_w - mean)^2] (Chan et al.): as exact as two
  // passes, but one barrier per row instead of two.
  float mean = 0.f;
  float m2;
  if (a.rms) {
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) q += s[i][j] * s[i][j];  // entries past the end are 0
    }
    if constexpr (THREADS == kWarpSize) {
      m2 = warp_all_reduce_sum(q);
    } else {
      m2 = block_all_reduce_sum<THREADS>(q, reinterpret_cast<float*>(scratch[phase]));
      phase ^= 1;
    }
  } else {
    float t = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) t += s[i][j];
    }
    const float warp_sum = warp_all_reduce_sum(t);
    const int warp = tid / kWarpSize;
    const float warp_n = float(warp_elements<VEC, ITEMS, THREADS>(warp, nvec));
    const float warp_mean = THREADS == kWarpSize ? warp_sum * a.inv_cols
                                                 : (warp_n > 0.f ? warp_sum / warp_n : 0.f);
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const bool in_row = tid + i * THREADS < nvec;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float d = in_row ? s[i][j] - warp_mean : 0.f;
        q += d * d;
      }
    }
    const float warp_m2 = warp_all_reduce_sum(q);
    if constexpr (THREADS == kWarpSize) {
      mean = warp_mean;
      m2 = warp_m2;
    } else {
      block_combine_moments<THREADS>(
          warp_sum, warp_m2, scratch[phase],
          [nvec](int w) { return float(warp_elements<VEC, ITEMS, THREADS>(w, nvec)); }, a.inv_cols,
          mean, m2);
      phase ^= 1;
    }
  }
  const float rstd = rsqrtf(m2 * a.inv_cols + a.epsilon);

  if (tid == 0) {
    if (a.mean_out != nullptr) a.mean_out[row] = mean;
    if (a.rstd_out != nullptr) a.rstd_out[row] = rstd;
  }

  const float g0 = a.gamma_scalar ? to_float(gamma[0]) : 0.f;
  const bool beta_vector = beta != nullptr && !a.beta_scalar;
  const float b0 = (beta != nullptr && a.beta_scalar) ? to_float(beta[0]) : 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int v = tid + i * THREADS;
    if (v >= nvec) continue;
    const int64_t col = int64_t(v) * VEC;
    if (a.sum_out != nullptr) store_pack(a.sum_out + base + col, float_to_pack<T>(s[i]));
    float g[VEC];
    float b[VEC];
    if (a.gamma_scalar) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) g[j] = g0;
    } else if constexpr (EARLY) {
      pack_to_float(gr[i], g);
    } else {
      pack_to_float(load_pack_ordered(gamma + col), g);
    }
    if (beta_vector) {
      if constexpr (EARLY) {
        pack_to_float(er[i], b);
      } else {
        pack_to_float(load_pack_ordered(beta + col), b);
      }
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) b[j] = b0;
    }
    float o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = (s[i][j] - mean) * rstd * g[j] + b[j];
    store_pack(a.y + base + col, float_to_pack<T>(o));
  }
}

// Launch bounds: CTAs per SM that fit when each thread may use `regs`
// registers. Budgets, measured with ptxas for sm_90 for F = ITEMS * VEC floats
// of row per thread (F <= 32): 64 registers for the block path (1024 threads
// per SM, no spills); 64 for the warp path up to F = 16 and 72 at F = 32 (at 64
// it spills a few bytes).
constexpr int norm_min_blocks(int threads, int regs) {
  const int blocks = 65536 / (threads * regs);
  return blocks < 1 ? 1 : blocks;
}
constexpr int warp_path_regs(int floats, bool early = false) {
  return early ? 128 : floats <= 16 ? 64 : floats <= 32 ? 72 : 128;
}
constexpr int block_path_regs(int floats) { return floats <= 32 ? 64 : 128; }
// Resident CTAs per SM of the architecture being compiled (ptxas ignores, with
// a warning, a launch bound asking for more): 16 on sm_86/87, 24 on sm_89, 32
// on sm_80 and sm_90.
constexpr int max_ctas_per_sm() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870)
  return 16;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 890
  return 24;
#else
  return 32;
#endif
}

// Row path: CTAs per SM at `regs` registers per thread, counted per SM
// sub-partition (4 of them, 16K registers each, whole warps) as ptxas does, so
// the bound yields exactly `regs` (at 96 threads, 65536 / (96 * 40) would ask
// for 17 CTAs and get 32 registers).
constexpr int row_min_blocks(int threads, int regs) {
  const int blocks = 4 * (16384 / (kWarpSize * regs)) / (threads / kWarpSize);
  return blocks < 1 ? 1 : blocks > max_ctas_per_sm() ? max_ctas_per_sm() : blocks;
}
// Row path budget (ptxas, sm_90a): one vector of each of x, skip, bias, gamma
// and beta in flight is 20 registers; unbounded ptxas takes 56-62 and at 32
// it spills, at 40 it does not. 40 gives 16 CTAs of 96 threads per SM (48 warps;
// 48 registers would give 13).
constexpr int kRowPathRegs = 40;

// Path A: a warp per row (cols <= 32 * ITEMS * VEC), WARPS rows per CTA.
template <typename T, int ITEMS, int WARPS, bool EARLY = false>
__global__ void __launch_bounds__(WARPS* kWarpSize,
                                  norm_min_blocks(WARPS* kWarpSize, warp_path_regs(ITEMS* Pack<T>::N, EARLY)))
    norm_warp_kernel(const NormArgs<T> a) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t stride = int64_t(gridDim.x) * WARPS;
  int phase = 0;  // unused: no shared memory on this path
  for (int64_t row = int64_t(blockIdx.x) * WARPS + threadIdx.x / kWarpSize; row < a.rows;
       row += stride) {
    norm_row_in_registers<T, ITEMS, kWarpSize, EARLY>(a, row, lane, nullptr, phase);
  }
}

// Path B: a CTA per row (cols <= BLOCK * ITEMS * VEC).
template <typename T, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK, norm_min_blocks(BLOCK, block_path_regs(ITEMS* Pack<T>::N)))
    norm_block_kernel(const NormArgs<T> a) {
  __shared__ float2 scratch[2][BLOCK / kWarpSize];  // alternating per reduction, see cuda_utils
  int phase = 0;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    norm_row_in_registers<T, ITEMS, BLOCK>(a, row, threadIdx.x, scratch, phase);
  }
}

// Row path: a CTA per row (cols <= BLOCK * VEC), one 16-byte vector per thread.
// Latency-bound grids (a few rows per SM, inputs fresh in L2) spend their time in
// one row's dependent chain, so it is split over cols / VEC threads (3 warps at
// 768 halves) instead of one warp, and bias / gamma / beta are loaded with the
// row: one memory round trip, one barrier per row.
// Same math as norm_row_in_registers (per-warp exact two-pass, Chan combine),
// written for one vector so the whole row fits ~40 registers.
template <typename T, int BLOCK>
__device__ __forceinline__ void norm_row_one_vector(const NormArgs<T>& a, int64_t row,
                                                    float2 (*scratch)[BLOCK / kWarpSize], int& phase) {
  constexpr int VEC = Pack<T>::N;
  const int tid = threadIdx.x;
  const int nvec = static_cast<int>(a.cols / VEC);
  const bool in_row = tid < nvec;
  const int col = tid * VEC;
  const int64_t base = row * a.cols;
  const bool has_skip = a.skip != nullptr;
  const T* skip_row =
      has_skip ? a.skip + (row < a.skip_rows ? row : row % a.skip_rows) * a.cols : a.x;
  const bool beta_vector = a.beta != nullptr && !a.beta_scalar;
  // Opaque, so the per-thread parameter addresses are not hoisted out of the
  // row loop (6 more registers for the whole kernel; see opaque_ptr).
  const T* bias = opaque_ptr(a.bias);
  const T* gamma = opaque_ptr(a.gamma);
  const T* beta = opaque_ptr(a.beta);

  // Every load of the row up front (zeros for an absent input or past the end).
  const Pack<T> xr = load_pack_if(in_row, a.x + base + col);
  const Pack<T> kr = load_pack_if(in_row && has_skip, skip_row + col);
  const Pack<T> br = load_pack_if(in_row && bias != nullptr, bias + col);
  const Pack<T> gr = load_pack_if(in_row && !a.gamma_scalar, gamma + col);
  const Pack<T> er = load_pack_if(in_row && beta_vector, beta + col);
  float s[VEC];
  float t[VEC];
  pack_to_float(xr, s);
  pack_to_float(kr, t);
#pragma unroll
  for (int j = 0; j < VEC; ++j) s[j] += t[j];
  pack_to_float(br, t);  // adding zeros without bias: same values
#pragma unroll
  for (int j = 0; j < VEC; ++j) s[j] += t[j];

  float mean = 0.f;
  float m2;
  if (a.rms) {
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < VEC; ++j) q += s[j] * s[j];  // 0 past the end
    m2 = block_all_reduce_sum<BLOCK>(q, reinterpret_cast<float*>(scratch[phase]));
    phase ^= 1;
  } else {
    float u = 0.f;
#pragma unroll
    for (int j = 0; j < VEC; ++j) u += s[j];
    const float warp_sum = warp_all_reduce_sum(u);
    // Elements of warp w: VEC per thread below nvec.
    auto warp_count = [nvec](int w) {
      const int left = nvec - w * kWarpSize;
      return float(VEC * (left <= 0 ? 0 : left >= kWarpSize ? kWarpSize : left));
    };
    const float warp_n = warp_count(tid / kWarpSize);
    const float warp_mean = BLOCK == kWarpSize ? warp_sum * a.inv_cols
                                               : (warp_n > 0.f ? warp_sum / warp_n : 0.f);
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float d = in_row ? s[j] - warp_mean : 0.f;
      q += d * d;
    }
    const float warp_m2 = warp_all_reduce_sum(q);
    if constexpr (BLOCK == kWarpSize) {
      mean = warp_mean;
      m2 = warp_m2;
    } else {
      block_combine_moments<BLOCK>(warp_sum, warp_m2, scratch[phase], warp_count, a.inv_cols, mean, m2);
      phase ^= 1;
    }
  }
  const float rstd = rsqrtf(m2 * a.inv_cols + a.epsilon);
  if (tid == 0) {
    if (a.mean_out != nullptr) a.mean_out[row] = mean;
    if (a.rstd_out != nullptr) a.rstd_out[row] = rstd;
  }
  if (!in_row) return;
  if (a.sum_out != nullptr) store_pack(a.sum_out + base + col, float_to_pack<T>(s));
  float g[VEC];
  float b[VEC];
  if (a.gamma_scalar) {
    const float g0 = to_float(gamma[0]);
#pragma unroll
    for (int j = 0; j < VEC; ++j) g[j] = g0;
  } else {
    pack_to_float(gr, g);
  }
  if (beta_vector) {
    pack_to_float(er, b);
  } else {
    const float b0 = beta != nullptr ? to_float(beta[0]) : 0.f;
#pragma unroll
    for (int j = 0; j < VEC; ++j) b[j] = b0;
  }
  float o[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) o[j] = (s[j] - mean) * rstd * g[j] + b[j];
  store_pack(a.y + base + col, float_to_pack<T>(o));
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, row_min_blocks(BLOCK, kRowPathRegs))
    norm_row_kernel(const NormArgs<T> a) {
  __shared__ float2 scratch[2][BLOCK / kWarpSize];  // alternating per reduction, see cuda_utils
  int phase = 0;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    norm_row_one_vector<T, BLOCK>(a, row, scratch, phase);
  }
}

// ---------------------------------------------------------------------------
// Path C: any alignment, any cols. Scalar, coalesced loads: each step a thread
// issues UNROLL loads (16 bytes) at c0 + k * BLOCK before using any of them,
// addressed from one per-row pointer plus compile-time offsets. Each thread
// only ever reads back the cache entries it wrote itself, so the shared-memory
// row cache needs no barrier.

// Row pointers of one row of path C (skip / bias null when absent).
template <typename T>
struct GenericRow {
  const T* x;
  const T* skip;
  const T* bias;

  __device__ __forceinline__ float load_sum(int64_t c) const {
    float v = to_float(__ldg(x + c));
    if (skip != nullptr) v += to_float(__ldg(skip + c));
    if (bias != nullptr) v += to_float(__ldg(bias + c));
    return v;
  }
};

// Path C's CTA size (norm_generic_kernel and embed_norm_kernel alike): 128 threads up to 4096
// cols (more CTAs per SM), else 512; and the grid cap (more rows go grid-stride).
constexpr int kGenericSmallBlock = 128;
constexpr int kGenericSmallMaxCols = 4096;
constexpr int kGenericBlock = 512;
constexpr int64_t kNormMaxGrid = int64_t(1) << 16;
constexpr int generic_block_dim(int64_t cols) {
  return cols <= kGenericSmallMaxCols ? kGenericSmallBlock : kGenericBlock;
}
inline unsigned norm_grid_for(int64_t ctas) {
  return static_cast<unsigned>(ctas < kNormMaxGrid ? ctas : kNormMaxGrid);
}

// One row of path C, its inputs read through `in`: the body of norm_generic_kernel and of
// embed_norm_kernel (whose rows are gathered by index). `row` indexes y / sum_out / the
// statistics; row_cache holds cols floats when CACHE.
template <typename T, int BLOCK, bool CACHE>
__device__ __forceinline__ void generic_row(const NormArgs<T>& a, int64_t row, const GenericRow<T>& in,
                                            float* row_cache, float (*scratch)[BLOCK / kWarpSize], int& phase) {
  constexpr int UNROLL = 16 / sizeof(T);  // 4 floats, 8 halves (H100 sweep: best of 4, 8, 16)
  constexpr int STEP = BLOCK * UNROLL;
  auto reduce = [&](float v) {
    const float r = block_all_reduce_sum<BLOCK>(v, scratch[phase]);
    phase ^= 1;
    return r;
  };
  const int64_t cols = a.cols;
  const int tid = threadIdx.x;
  const int64_t base = row * cols;
  // s for columns c0 + k * BLOCK, k < UNROLL (0 past the row end).
  auto load_step = [&](int64_t c0, float (&v)[UNROLL]) {
    const int64_t left = cols - c0;
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) v[k] = k * BLOCK < left ? in.load_sum(c0 + k * BLOCK) : 0.f;
  };
  // One pass over this thread's columns, UNROLL loads (`load`) in flight per step:
  // f(in_row, c, s) per column slot, in_row false past the row end (s is 0 there).
  auto each_column = [&](auto&& load, auto&& f) {
    for (int64_t c0 = tid; c0 < cols; c0 += STEP) {
      float v[UNROLL];
      load(c0, v);
      const int64_t left = cols - c0;
#pragma unroll
      for (int k = 0; k < UNROLL; ++k) f(k * BLOCK < left, c0 + k * BLOCK, v[k]);
    }
  };

  // Pass 1: s = x + skip + bias; cache it; sum it (LayerNorm).
  float mean = 0.f;
  if (CACHE || !a.rms) {
    float t = 0.f;
    each_column(load_step, [&](bool in_row, int64_t c, float x) {
      if (CACHE && in_row) row_cache[c] = x;
      t += x;
    });
    if (!a.rms) mean = reduce(t) * a.inv_cols;
  }

  // s again for passes 2 and 3: from the cache, or re-read from global memory.
  auto reload_step = [&](int64_t c0, float (&v)[UNROLL]) {
    if constexpr (CACHE) {
      const int64_t left = cols - c0;
#pragma unroll
      for (int k = 0; k < UNROLL; ++k) v[k] = k * BLOCK < left ? row_cache[c0 + k * BLOCK] : 0.f;
    } else {
      load_step(c0, v);
    }
  };

  // Pass 2: sum of squared deviations.
  float q = 0.f;
  each_column(reload_step, [&](bool in_row, int64_t, float x) {
    const float d = in_row ? x - mean : 0.f;
    q += d * d;
  });
  const float rstd = rsqrtf(reduce(q) * a.inv_cols + a.epsilon);
  if (tid == 0) {
    if (a.mean_out != nullptr) a.mean_out[row] = mean;
    if (a.rstd_out != nullptr) a.rstd_out[row] = rstd;
  }

  // Pass 3: outputs.
  const float g0 = a.gamma_scalar ? to_float(a.gamma[0]) : 0.f;
  const float b0 = (a.beta != nullptr && a.beta_scalar) ? to_float(a.beta[0]) : 0.f;
  const bool beta_vector = a.beta != nullptr && !a.beta_scalar;
  T* y = a.y + base;
  T* sum_out = a.sum_out != nullptr ? a.sum_out + base : nullptr;
  each_column(reload_step, [&](bool in_row, int64_t c, float x) {
    if (!in_row) return;
    const float g = a.gamma_scalar ? g0 : to_float(__ldg(a.gamma + c));
    const float b = beta_vector ? to_float(__ldg(a.beta + c)) : b0;
    if (sum_out != nullptr) sum_out[c] = from_float<T>(x);
    y[c] = from_float<T>((x - mean) * rstd * g + b);
  });
}

template <typename T, int BLOCK, bool CACHE>
__global__ void __launch_bounds__(BLOCK, norm_min_blocks(BLOCK, 64)) norm_generic_kernel(const NormArgs<T> a) {
  extern __shared__ float row_cache[];  // [cols] when CACHE
  __shared__ float scratch[2][BLOCK / kWarpSize];
  int phase = 0;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const GenericRow<T> in{a.x + row * a.cols, a.skip != nullptr ? a.skip + (row % a.skip_rows) * a.cols : nullptr,
                           a.bias};
    generic_row<T, BLOCK, CACHE>(a, row, in, row_cache, scratch, phase);
  }
}

// ---------------------------------------------------------------------------
// EmbedLayerNorm (embed.h): path C over rows gathered by index. Token t = (b, s) sums
// word[ids[t]] + position[pos(t)] (+ segment[seg[t]]) through GenericRow's three row
// pointers, then normalises it as generic_row does. Every thread reads the token's indices
// itself (broadcast loads of one address), so an invalid index is seen by the whole CTA at
// once and its row becomes NaN without a barrier.

struct EmbedIndices {
  const void* ids;
  const void* segment_ids;   // null: no segment
  const void* position_ids;  // null: position = s
  bool ids64, segment64, position64;
  int64_t seq;                 // S: token t sits at s = t % S
  int64_t position_id_rows;    // 1 (broadcast over the batch) or the batch
  int64_t word_rows, position_rows, segment_rows;  // rows of each table
};

__device__ __forceinline__ int64_t load_index(const void* p, bool is64, int64_t i) {
  return is64 ? __ldg(static_cast<const long long*>(p) + i) : int64_t(__ldg(static_cast<const int*>(p) + i));
}

// ONNX Gather's reading of an index into `rows` rows (negative counts from the end); -1 if out of range.
__device__ __forceinline__ int64_t table_row(int64_t i, int64_t rows) {
  if (i < 0) i += rows;
  return (i >= 0 && i < rows) ? i : -1;
}

template <typename T, int BLOCK, bool CACHE>
__global__ void __launch_bounds__(BLOCK, norm_min_blocks(BLOCK, 64))
    embed_norm_kernel(const NormArgs<T> a, const T* word, const T* position, const T* segment,
                      const EmbedIndices ix) {
  extern __shared__ float row_cache[];  // [cols] when CACHE
  __shared__ float scratch[2][BLOCK / kWarpSize];
  int phase = 0;
  for (int64_t t = blockIdx.x; t < a.rows; t += gridDim.x) {
    const int64_t s = t % ix.seq;
    const int64_t w = table_row(load_index(ix.ids, ix.ids64, t), ix.word_rows);
    const int64_t p =
        ix.position_ids == nullptr
            ? table_row(s, ix.position_rows)
            : table_row(load_index(ix.position_ids, ix.position64, ix.position_id_rows == 1 ? s : t),
                        ix.position_rows);
    const int64_t g = ix.segment_ids == nullptr ? 0 : table_row(load_index(ix.segment_ids, ix.segment64, t),
                                                                 ix.segment_rows);
    if (w < 0 || p < 0 || g < 0) {  // uniform over the CTA: the row says so loudly
      for (int64_t c = threadIdx.x; c < a.cols; c += BLOCK) a.y[t * a.cols + c] = from_float<T>(__int_as_float(0x7fc00000));
      continue;
    }
    const GenericRow<T> in{word + w * a.cols, position + p * a.cols,
                           ix.segment_ids != nullptr ? segment + g * a.cols : nullptr};
    generic_row<T, BLOCK, CACHE>(a, t, in, row_cache, scratch, phase);
  }
}

}  // namespace trt_fastops::norm
