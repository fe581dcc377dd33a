// Device code of trt_fastops' own convolution (the fallback for everything
// cuDNN refuses, and the whole implementation where cuDNN is missing).
// Framework-free; the host side is conv_fallback.cu.
//
// Every convolution is an implicit GEMM per group g:
//   C[m, j] = sum_k A[m, k] * B[k, j]
//   m = (image, output position)          M = batch * prod(out)
//   j = output channel within the group   N = kg = c_out / group
//   k = tap * cg + input channel          K = cg * prod(kernel), cg = c_in / group
// Taps are the outer part of k, so decoding a k row of an A tile (tap and
// channel) is shared by all the positions of that row, and the per-element
// work is an add, a bounds check and a load (see load_a_tile).
//   Conv:          A[m, k] = x[image, g*cg + c, o*stride - pad + tap*dilation]
//   ConvTranspose: A[m, k] = x[image, g*cg + c, p] where o + pad - tap*dilation = p*stride
//                  (the gather form of the scatter ONNX defines; other taps are 0)
// and zero outside the input. B is the weight, repacked per call by
// conv_pack_weights_kernel into a zero-padded tile-friendly layout (workspace),
// except where w already has that layout (1x1 Conv, no padding needed: read in place).
// y = act(C + bias) in float32, rounded once to T.
//
// Kernels:
//   conv_gemm_mma_kernel<T = half|bf16, TRANSPOSE, BN>  tensor cores (mma.sync m16n8k16,
//       float32 accumulation), CTA tile 128 x BN x 32, 8 warps, two-stage pipeline:
//       A gathered into registers one tile ahead, B by cp.async. Any cg; needs
//       only the packed weights as workspace.
//   conv_gemm_async_kernel<T, TRANSPOSE, BN, A_MODE>  the same GEMM with A and B
//       both by 16-byte cp.async, four stages, one barrier per k tile: A from a
//       channels-last copy of x (conv_to_nhwc_kernel, in the workspace) when
//       cg % 8 == 0, or straight from x for 1x1 / stride 1 / unpadded convs;
//       split-K with conv_splitk_finalize_kernel where the grid is small.
//   conv_gemm_simt_kernel<TRANSPOSE>  float32 by FFMA (no TF32), CTA tile 128 x 64 x 16.
//   conv_direct_kernel<T, TRANSPOSE>  one thread per output element: few output
//       channels per group, no k at all (c_in == 0), huge group counts, and the
//       depthwise convolutions conv_depthwise_kernel (conv_depthwise.cuh) cannot tile.
//   conv_bias_act_kernel<T>           bias + activation in place (after a cuDNN
//       convolution that could not fuse them).
//   conv_gpu_wait_kernel              one thread spinning on the global timer
//       (the cuDNN autotuner queues its timed runs behind it).
// Indices into tensors are 64-bit; spatial offsets inside one channel plane
// are 32-bit (the launcher refuses planes of 2^31 elements or more).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "plugins/common/cuda_utils.cuh"
#include "plugins/common/mma.cuh"
#include "plugins/conv/conv_activation.cuh"
#include "plugins/conv/conv_geometry.h"

namespace trt_fastops::conv {

template <typename T>
struct ConvArgs {
  ConvGeometry g;
  const T* x;
  const T* w;     // weights as ONNX gives them
  const T* wp;    // packed weights (GEMM kernels)
  const T* bias;  // [c_out] or null
  T* y;
};

// Input position along one dim for output position o and tap offset t*dilation,
// or -1 when that tap reads nothing. base is o*stride - pad (Conv) or o + pad
// (ConvTranspose), see the row setup of each kernel.
template <bool TRANSPOSE>
__device__ __forceinline__ int input_pos(int base, int tap_off, int in, const FastDiv& stride_div, int stride) {
  if constexpr (!TRANSPOSE) {
    const int i = base + tap_off;
    return (unsigned)i < (unsigned)in ? i : -1;
  } else {
    const int t = base - tap_off;
    if (t < 0) return -1;
    const int q = static_cast<int>(stride_div.div(static_cast<uint32_t>(t)));
    return (t - q * stride == 0 && q < in) ? q : -1;
  }
}

// Image of GEMM row m = image * out_sp + position: a multiply-shift while m
// fits FastDiv's range (64-bit division is a long subroutine on the GPU).
__device__ __forceinline__ int64_t image_of(const ConvGeometry& g, int64_t m) {
  return m < (int64_t(1) << 31) ? int64_t(g.div_osp.div(static_cast<uint32_t>(m))) : m / g.out_sp;
}

template <bool TRANSPOSE>
__device__ __forceinline__ int row_base(int o, int stride, int pad) {
  return TRANSPOSE ? o + pad : o * stride - pad;
}

// Output row m (< 2^63) of the GEMM: its image, and per spatial dim the base
// position row_base gives (o*stride - pad, or o + pad for ConvTranspose).
template <bool TRANSPOSE>
__device__ __forceinline__ int64_t decode_row(const ConvGeometry& g, int64_t m, int& bd, int& bh, int& bw) {
  const int64_t image = image_of(g, m);
  const int pos = static_cast<int>(m - image * g.out_sp);
  const int ow = pos % g.out[2];
  const int t = pos / g.out[2];
  const int oh = t % g.out[1];
  const int od = t / g.out[1];
  bd = row_base<TRANSPOSE>(od, g.stride[0], g.pad[0]);
  bh = row_base<TRANSPOSE>(oh, g.stride[1], g.pad[1]);
  bw = row_base<TRANSPOSE>(ow, g.stride[2], g.pad[2]);
  return image;
}

// GEMM depth k = tap * cg + c: the input channel and the tap's dilated
// offsets along [d, h, w].
struct KTap {
  int c;
  int off[3];
};
__device__ __forceinline__ KTap decode_k(const ConvGeometry& g, int k) {
  const int tap = static_cast<int>(g.div_cg.div(static_cast<uint32_t>(k)));
  const int q = static_cast<int>(g.div_kw.div(static_cast<uint32_t>(tap)));
  const int kd = static_cast<int>(g.div_kh.div(static_cast<uint32_t>(q)));
  KTap t;
  t.c = k - tap * g.cg;
  t.off[0] = kd * g.dilation[0];
  t.off[1] = (q - kd * g.kernel[1]) * g.dilation[1];
  t.off[2] = (tap - q * g.kernel[2]) * g.dilation[2];
  return t;
}

// ---------------------------------------------------------------------------
// Weight packing. Packed layouts (zero beyond kg / kgemm):
//   K_MAJOR (tensor-core kernels): wp[g][j < kg_pad][k < kgemm_pad]
//   else    (float32 kernel):      wp[g][k < kgemm_pad][j < kg_pad]
// with k = tap * cg + c. Source layouts: Conv w[g*kg + j][c][tap],
// ConvTranspose w[g*cg + c][j][tap].

// Weight of packed element (group grp, output channel j, depth k) or 0 beyond kg / kgemm.
template <typename T, bool TRANSPOSE>
__device__ __forceinline__ T packed_weight(const ConvGeometry& g, const T* __restrict__ w, int64_t grp, int j, int k) {
  if (j >= g.kg || k >= g.kgemm) return from_float<T>(0.f);
  const int tap = static_cast<int>(g.div_cg.div(static_cast<uint32_t>(k)));
  const int c = k - tap * g.cg;
  const int64_t src = TRANSPOSE ? ((grp * g.cg + c) * g.kg + j) * g.ks + tap : ((grp * g.kg + j) * g.cg + c) * g.ks + tap;
  return w[src];
}

// K_MAJOR: packed rows (grp, j) along grid.y, k along x (no 64-bit division
// per element: this runs on every call, before the GEMM). Else one flat
// grid-stride loop.
template <typename T, bool TRANSPOSE, bool K_MAJOR>
__global__ void __launch_bounds__(256) conv_pack_weights_kernel(ConvGeometry g, const T* __restrict__ w,
                                                                T* __restrict__ wp) {
  if constexpr (K_MAJOR) {
    const int64_t rows = int64_t(g.group) * g.kg_pad;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
      const int64_t grp = row / g.kg_pad;
      const int j = static_cast<int>(row - grp * g.kg_pad);
      T* dst = wp + row * g.kgemm_pad;
      for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < g.kgemm_pad; k += gridDim.x * blockDim.x)
        dst[k] = packed_weight<T, TRANSPOSE>(g, w, grp, j, k);
    }
  } else {
    const int64_t total = int64_t(g.group) * g.kg_pad * g.kgemm_pad;
    for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
         idx += int64_t(gridDim.x) * blockDim.x) {
      const int j = static_cast<int>(idx % g.kg_pad);
      const int64_t t = idx / g.kg_pad;
      wp[idx] = packed_weight<T, TRANSPOSE>(g, w, t / g.kgemm_pad, j, static_cast<int>(t % g.kgemm_pad));
    }
  }
}

// ---------------------------------------------------------------------------
// Direct kernel: one thread per output element of an image (channel, position),
// position fastest so neighbouring threads read neighbouring inputs and share
// the weights of one channel; images along grid.y. The launcher guarantees
// c_out * out_sp < 2^31 (32-bit index and FastDiv decode within an image).

template <typename T, bool TRANSPOSE>
__global__ void __launch_bounds__(256, 4) conv_direct_kernel(ConvArgs<T> a) {
  const ConvGeometry& g = a.g;
  const int64_t per_image = int64_t(g.c_out) * g.out_sp;
  for (int64_t image = blockIdx.y; image < g.batch; image += gridDim.y) {
    const T* x_image = a.x + image * g.c_in * g.in_sp;
    T* y_image = a.y + image * per_image;
    for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < per_image;
         idx += int64_t(gridDim.x) * blockDim.x) {
      const uint32_t i32 = static_cast<uint32_t>(idx);
      const int co = static_cast<int>(g.div_osp.div(i32));
      const int pos = static_cast<int>(i32) - co * static_cast<int>(g.out_sp);
      const int q = static_cast<int>(g.div_ow.div(static_cast<uint32_t>(pos)));
      const int ow = pos - q * g.out[2];
      const int od = static_cast<int>(g.div_oh.div(static_cast<uint32_t>(q)));
      const int oh = q - od * g.out[1];
      const int grp = co / g.kg;
      const int j = co - grp * g.kg;
      const int bd = row_base<TRANSPOSE>(od, g.stride[0], g.pad[0]);
      const int bh = row_base<TRANSPOSE>(oh, g.stride[1], g.pad[1]);
      const int bw = row_base<TRANSPOSE>(ow, g.stride[2], g.pad[2]);
      const T* xg = x_image + int64_t(grp) * g.cg * g.in_sp;
      // Weight of (c, tap) = w[wbase + c * wc + tap]: Conv w[co][c][tap], ConvTranspose w[g*cg + c][j][tap].
      const int64_t wbase = TRANSPOSE ? (int64_t(grp) * g.cg * g.kg + j) * g.ks : int64_t(co) * g.cg * g.ks;
      const int64_t wc = TRANSPOSE ? int64_t(g.kg) * g.ks : g.ks;
      float acc = 0.f;
      int tap = 0;
      for (int kd = 0; kd < g.kernel[0]; ++kd) {
        const int id = input_pos<TRANSPOSE>(bd, kd * g.dilation[0], g.in[0], g.div_sd, g.stride[0]);
        for (int kh = 0; kh < g.kernel[1]; ++kh) {
          const int ih = input_pos<TRANSPOSE>(bh, kh * g.dilation[1], g.in[1], g.div_sh, g.stride[1]);
          for (int kw = 0; kw < g.kernel[2]; ++kw, ++tap) {
            const int iw = input_pos<TRANSPOSE>(bw, kw * g.dilation[2], g.in[2], g.div_sw, g.stride[2]);
            if ((id | ih | iw) < 0) continue;
            const T* xp = xg + (id * g.in[1] + ih) * g.in[2] + iw;
            const T* wt = a.w + wbase + tap;
            for (int c = 0; c < g.cg; ++c) {
              acc = fmaf(to_float(__ldg(xp + c * g.in_sp)), to_float(__ldg(wt + c * wc)), acc);
            }
          }
        }
      }
      if (a.bias != nullptr) acc += to_float(__ldg(a.bias + co));
      y_image[idx] = from_float<T>(apply_activation(acc, g.activation));
    }
  }
}

// ---------------------------------------------------------------------------
// In-place bias + activation over y [planes = batch * c_out][out_sp]: planes
// along grid.y (grid-stride), positions along x. VEC: whole 16-byte packs
// (out_sp a multiple of the pack and y 16-byte aligned), else scalars.

template <typename T, bool VEC>
__global__ void __launch_bounds__(256) conv_bias_act_kernel(T* y, const T* bias, int64_t planes, int64_t out_sp,
                                                            int c_out, int activation) {
  constexpr int N = VEC ? Pack<T>::N : 1;
  const int64_t units = out_sp / N;  // packs (or elements) per plane
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const float b = bias != nullptr ? to_float(__ldg(bias + plane % c_out)) : 0.f;
    T* row = y + plane * out_sp;
    for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += int64_t(gridDim.x) * blockDim.x) {
      if constexpr (VEC) {
        float v[Pack<T>::N];
        pack_to_float(load_pack_ordered(row + u * N), v);
#pragma unroll
        for (int e = 0; e < Pack<T>::N; ++e) v[e] = apply_activation(v[e] + b, activation);
        store_pack(row + u * N, float_to_pack<T>(v));
      } else {
        row[u] = from_float<T>(apply_activation(to_float(row[u]) + b, activation));
      }
    }
  }
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void conv_gpu_wait_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) __nanosleep(1000);
}

// ---------------------------------------------------------------------------
// Shared pieces of the GEMM kernels.

constexpr int GEMM_THREADS = 256;
constexpr int GEMM_WARPS = GEMM_THREADS / 32;
constexpr int GEMM_BM = 128;  // output positions per CTA
constexpr int A_ROWS = GEMM_BM / 32;  // m rows per thread in the A gather (lane + 32 * i)

// Where the A rows of one thread start: for m = m0 + lane + 32 * i.
struct ARows {
  int64_t xoff[A_ROWS];  // x offset of (image, first channel of the group)
  int bd[A_ROWS], bh[A_ROWS], bw[A_ROWS];
  bool valid[A_ROWS];
};

template <bool TRANSPOSE>
__device__ __forceinline__ void setup_a_rows(const ConvGeometry& g, int64_t m0, int lane, int grp, ARows& r) {
#pragma unroll
  for (int i = 0; i < A_ROWS; ++i) {
    const int64_t m = m0 + lane + 32 * i;
    r.valid[i] = m < g.m_total;
    const int64_t mm = r.valid[i] ? m : 0;
    const int64_t image = decode_row<TRANSPOSE>(g, mm, r.bd[i], r.bh[i], r.bw[i]);
    r.xoff[i] = (image * g.c_in + int64_t(grp) * g.cg) * g.in_sp;
  }
}

// Gathers the A tile rows krow = warp + 8 * j (j < KROWS) of k tile kt into
// registers: v[j][i] for m row i. Elements outside the input (or beyond K / M)
// are zero. Raw element bits (uint16_t for 16-bit types, float for float32).
template <typename E, bool TRANSPOSE, int KROWS, int BK>
__device__ __forceinline__ void load_a_tile(const ConvGeometry& g, const E* __restrict__ x, const ARows& r,
                                            int kt, int warp, E (&v)[KROWS][A_ROWS]) {
#pragma unroll
  for (int j = 0; j < KROWS; ++j) {
    const int k = kt * BK + warp + GEMM_WARPS * j;
    const bool kvalid = k < g.kgemm;
    const KTap tp = decode_k(g, k);
    const int64_t coff = int64_t(tp.c) * g.in_sp;
#pragma unroll
    for (int i = 0; i < A_ROWS; ++i) {
      const int id = input_pos<TRANSPOSE>(r.bd[i], tp.off[0], g.in[0], g.div_sd, g.stride[0]);
      const int ih = input_pos<TRANSPOSE>(r.bh[i], tp.off[1], g.in[1], g.div_sh, g.stride[1]);
      const int iw = input_pos<TRANSPOSE>(r.bw[i], tp.off[2], g.in[2], g.div_sw, g.stride[2]);
      const bool ok = kvalid && r.valid[i] && (id | ih | iw) >= 0;
      const E* p = x + r.xoff[i] + coff + (id * g.in[1] + ih) * g.in[2] + iw;
      v[j][i] = ok ? __ldg(p) : E(0);
    }
  }
}

// Writes the CTA's C tile (staged in shared memory as cs[n][m], row stride
// CS_STRIDE elements, already biased, activated and rounded) to y with the
// warps over channels and the lanes over consecutive output positions.
template <typename T, int BN, int CS_STRIDE>
__device__ __forceinline__ void store_c_tile(const ConvGeometry& g, const T* cs, T* __restrict__ y, int64_t m0,
                                             int n0, int grp, int warp, int lane) {
  int64_t ybase[A_ROWS];
  bool valid[A_ROWS];
#pragma unroll
  for (int i = 0; i < A_ROWS; ++i) {
    const int64_t m = m0 + lane + 32 * i;
    valid[i] = m < g.m_total;
    const int64_t mm = valid[i] ? m : 0;
    const int64_t image = image_of(g, mm);
    ybase[i] = image * g.c_out * g.out_sp + (mm - image * g.out_sp);
  }
  for (int row = warp; row < BN; row += GEMM_WARPS) {
    const int j = n0 + row;
    if (j >= g.kg) break;  // rows only grow: warp-uniform exit
    const int64_t choff = (int64_t(grp) * g.kg + j) * g.out_sp;
#pragma unroll
    for (int i = 0; i < A_ROWS; ++i) {
      if (valid[i]) y[ybase[i] + choff] = cs[row * CS_STRIDE + lane + 32 * i];
    }
  }
}

// ---------------------------------------------------------------------------
// Tensor-core implicit GEMM (16-bit types).
//
// Shared memory per stage: As[k][m] (m contiguous, row stride 128 + 8 so the
// eight rows one ldmatrix reads fall in distinct banks) and Bs[n][k] (k
// contiguous, row stride 32 + 8 for the same reason). A fragments come from
// As with ldmatrix.trans, B fragments from Bs with ldmatrix: exactly the
// m16n8k16 register layouts. Warps: BN = 128 -> 2 (m) x 4 (n), warp tile 64 x 32;
// BN = 64 -> 4 x 2, warp tile 32 x 32. After the K loop the tile goes through
// shared memory (cs[n][m]) so that y is written along positions.

constexpr int MMA_BK = 32;
constexpr int MMA_AS_STRIDE = GEMM_BM + 8;
constexpr int MMA_BS_STRIDE = MMA_BK + 8;
constexpr int MMA_CS_STRIDE = GEMM_BM + 8;

template <int BN>
struct MmaSmem {
  static constexpr int A_STAGE = MMA_BK * MMA_AS_STRIDE;  // elements
  static constexpr int B_STAGE = BN * MMA_BS_STRIDE;
  static constexpr int PIPE_BYTES = 2 * (A_STAGE + B_STAGE) * 2;
  static constexpr int C_BYTES = BN * MMA_CS_STRIDE * 2;
  static constexpr int BYTES = PIPE_BYTES > C_BYTES ? PIPE_BYTES : C_BYTES;
};

// One k16 step of a warp's 32-column slice: B fragments from Bs[n][k] (rows of
// B_STRIDE elements) by ldmatrix, then acc[mt][nt] += af[mt] x B (m16n8k16).
template <typename T, int MT, int B_STRIDE>
__device__ __forceinline__ void mma_warp_k16(float (&acc)[MT][4][4], const uint32_t (&af)[MT][4],
                                             const uint16_t* b_st, int warp_n, int kk, int lane) {
  const int lq = lane >> 3;  // ldmatrix: which 8x8 matrix this lane addresses
  const int lr = lane & 7;   // and which of its rows
  uint32_t bf[4][2];
#pragma unroll
  for (int np = 0; np < 2; ++np) {
    // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
    const int n = warp_n * 32 + np * 16 + lr + (lq >> 1) * 8;
    const int k = kk + (lq & 1) * 8;
    uint32_t r[4];
    ldmatrix_x4(r, b_st + n * B_STRIDE + k);
    bf[2 * np][0] = r[0];
    bf[2 * np][1] = r[1];
    bf[2 * np + 1][0] = r[2];
    bf[2 * np + 1][1] = r[3];
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) mma_16816<T>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
}

// Writes a warp's accumulators (warp tile WM x 32 of the CTA's 128 x BN tile)
// to shared memory as cs[n][m] (rows of STRIDE elements): cs = f(value, nt, e)
// for the n8 tile nt and column e of the thread's pair.
template <int MT, int WM, int STRIDE, typename E, typename F>
__device__ __forceinline__ void stage_acc(const float (&acc)[MT][4][4], E* cs, int warp, int lane, F&& f) {
  constexpr int WARPS_M = GEMM_BM / WM;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;
  const int gid = lane >> 2;  // row group of the accumulator layout
  const int tig = lane & 3;   // thread in group
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          cs[(warp_n * 32 + nt * 8 + tig * 2 + e) * STRIDE + warp_m * WM + mt * 16 + gid + h * 8] =
              f(acc[mt][nt][h * 2 + e], nt, e);
}

// Epilogue of the tensor-core kernels: acc (the m16n8k16 accumulators of a
// warp tile WM x 32 at (warp_m, warp_n)) + bias, activation in float32, one
// rounding, staged as cs[n][m] in shared memory (the caller is done with it),
// then written along output positions. Synchronises the CTA.
template <typename T, int BN, int MT, int WM>
__device__ __forceinline__ void store_mma_tile(const ConvArgs<T>& a, const float (&acc)[MT][4][4], T* cs,
                                               int64_t m0, int n0, int grp, int warp, int lane) {
  const ConvGeometry& g = a.g;
  const int warp_n = warp / (GEMM_BM / WM);
  const int tig = lane & 3;  // thread in group: its columns are tig * 2 + e
  float b[4][2];
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = n0 + warp_n * 32 + nt * 8 + tig * 2 + e;
      b[nt][e] = a.bias != nullptr && j < g.kg ? to_float(__ldg(a.bias + int64_t(grp) * g.kg + j)) : 0.f;
    }
  with_activation(g.activation, [&](auto ACT) {
    stage_acc<MT, WM, MMA_CS_STRIDE>(acc, cs, warp, lane, [&](float v, int nt, int e) {
      return from_float<T>(activation_of<ACT.value>(v + b[nt][e]));
    });
  });
  __syncthreads();
  store_c_tile<T, BN, MMA_CS_STRIDE>(g, cs, a.y, m0, n0, grp, warp, lane);
}

template <typename T, bool TRANSPOSE, int BN>
__global__ void __launch_bounds__(GEMM_THREADS, BN == 128 ? 1 : 2) conv_gemm_mma_kernel(ConvArgs<T> a) {
  static_assert(sizeof(T) == 2, "tensor-core path is for 16-bit types");
  static_assert(BN == 64 || BN == 128, "BN is 64 or 128");
  constexpr int BK = MMA_BK;
  constexpr int KROWS = BK / GEMM_WARPS;  // A k rows per thread
  constexpr int WARPS_N = BN / 32;
  constexpr int WARPS_M = GEMM_WARPS / WARPS_N;
  constexpr int WM = GEMM_BM / WARPS_M;  // 64 or 32
  constexpr int MT = WM / 16;            // m16 tiles per warp
  constexpr int NT = 4;                  // n8 tiles per warp (warp tile 32 wide)
  constexpr int B_CHUNKS = BN * BK * 2 / 16 / GEMM_THREADS;  // 16-byte copies per thread
  using Smem = MmaSmem<BN>;

  __shared__ __align__(16) unsigned char smem[Smem::BYTES];
  uint16_t* as = reinterpret_cast<uint16_t*>(smem);
  uint16_t* bs = as + 2 * Smem::A_STAGE;

  const ConvGeometry& g = a.g;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;
  const int grp = blockIdx.z;
  const int64_t m0 = int64_t(blockIdx.x) * GEMM_BM;
  const int n0 = blockIdx.y * BN;
  const uint16_t* x = reinterpret_cast<const uint16_t*>(a.x);
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(a.wp) + (int64_t(grp) * g.kg_pad + n0) * g.kgemm_pad;

  ARows rows;
  setup_a_rows<TRANSPOSE>(g, m0, lane, grp, rows);

  float acc[MT][NT][4] = {};

  uint16_t av[KROWS][A_ROWS];
  auto store_a = [&](int stage) {
    uint16_t* dst = as + stage * Smem::A_STAGE;
#pragma unroll
    for (int j = 0; j < KROWS; ++j)
#pragma unroll
      for (int i = 0; i < A_ROWS; ++i) dst[(warp + GEMM_WARPS * j) * MMA_AS_STRIDE + lane + 32 * i] = av[j][i];
  };
  // cp.async moves 16 bytes: only ever from the packed weights, which live in
  // the workspace (16-byte aligned, checked by the launcher) at offsets that
  // are multiples of BK elements, into shared rows of MMA_BS_STRIDE elements.
  static_assert((BK * 2) % 16 == 0 && (MMA_BS_STRIDE * 2) % 16 == 0 && (Smem::A_STAGE * 2 * 2) % 16 == 0,
                "cp.async source / destination offsets must stay 16-byte aligned");
  auto issue_b = [&](int kt, int stage) {
    uint16_t* dst = bs + stage * Smem::B_STAGE;
#pragma unroll
    for (int q = 0; q < B_CHUNKS; ++q) {
      const int chunk = tid + q * GEMM_THREADS;
      const int row = chunk / (BK / 8);
      const int col = (chunk % (BK / 8)) * 8;
      cp_async_16(dst + row * MMA_BS_STRIDE + col, wp + int64_t(row) * g.kgemm_pad + kt * BK + col);
    }
    cp_async_commit();
  };

  const int ktiles = (g.kgemm + BK - 1) / BK;
  if (ktiles > 0) {
    load_a_tile<uint16_t, TRANSPOSE, KROWS, BK>(g, x, rows, 0, warp, av);
    issue_b(0, 0);
    store_a(0);
    cp_async_wait_all();
    __syncthreads();
  }

  // ldmatrix lane roles: lane / 8 picks one of the four 8x8 matrices, lane % 8 its row.
  const int lq = lane >> 3;
  const int lr = lane & 7;
  for (int kt = 0; kt < ktiles; ++kt) {
    const int stage = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {
      load_a_tile<uint16_t, TRANSPOSE, KROWS, BK>(g, x, rows, kt + 1, warp, av);
      issue_b(kt + 1, stage ^ 1);
    }
    const uint16_t* a_st = as + stage * Smem::A_STAGE;
    const uint16_t* b_st = bs + stage * Smem::B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
        const int k = kk + lr + (lq >> 1) * 8;
        const int m = warp_m * WM + mt * 16 + (lq & 1) * 8;
        ldmatrix_x4_trans(af[mt], a_st + k * MMA_AS_STRIDE + m);
      }
      mma_warp_k16<T, MT, MMA_BS_STRIDE>(acc, af, b_st, warp_n, kk, lane);
    }
    if (more) {
      store_a(stage ^ 1);
      cp_async_wait_all();
    }
    __syncthreads();
  }

  store_mma_tile<T, BN, MT, WM>(a, acc, reinterpret_cast<T*>(smem), m0, n0, grp, warp, lane);
}

// ---------------------------------------------------------------------------
// Pipelined implicit GEMM (16-bit types): A and B both arrive by 16-byte
// cp.async (zero-filled outside the input) in an ASYNC_STAGES-deep pipeline
// with one barrier per k tile; fragments by ldmatrix. Two ways to read A:
//   A_CHANNELS_LAST  x copied to channels-last first (conv_to_nhwc_kernel, into
//       the workspace) when cg % 8 == 0: the 8 consecutive k of one chunk (same
//       tap, channels c..c+7) are 16 contiguous bytes of one input pixel.
//       As[m][k], rows of 32 + 8 elements.
//   A_POINTWISE  1x1 kernel, stride 1, no padding, out_sp % 8 == 0, x 16-byte
//       aligned: A[m][k] = x[image][k][pos] read straight from NCHW, 8
//       consecutive positions of one channel per chunk (no copy of x).
//       As[k][m], rows of 128 + 8 elements, fragments by ldmatrix.trans.
// The row paddings put the eight rows one ldmatrix reads in distinct banks.
// Split-K (grid.z = group * splits, for grids too small to fill the GPU):
// each split sums its share of the k tiles into float32 partials [split][c_out][m]
// and conv_splitk_finalize_kernel adds them up, with bias and activation.

// x [batch][c][sp] -> xt [batch][sp][c], 32 x 32 tiles through shared memory
// (both sides coalesced); all three grid dims stride (sizes may exceed them).
template <typename E>
__global__ void __launch_bounds__(256) conv_to_nhwc_kernel(const E* __restrict__ x, E* __restrict__ xt, int c,
                                                           int64_t sp, int64_t batch) {
  __shared__ E tile[32][33];
  const int tx = threadIdx.x & 31;
  const int ty = threadIdx.x >> 5;
  const int64_t s_tiles = (sp + 31) / 32;
  const int c_tiles = (c + 31) / 32;
  for (int64_t image = blockIdx.z; image < batch; image += gridDim.z) {
    const E* xi = x + image * c * sp;
    E* ti = xt + image * c * sp;
    for (int ct = blockIdx.y; ct < c_tiles; ct += gridDim.y) {
      for (int64_t st = blockIdx.x; st < s_tiles; st += gridDim.x) {
        const int c0 = ct * 32;
        const int64_t s0 = st * 32;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int cc = c0 + ty + 8 * i;
          const int64_t s = s0 + tx;
          if (cc < c && s < sp) tile[ty + 8 * i][tx] = xi[int64_t(cc) * sp + s];
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t s = s0 + ty + 8 * i;
          const int cc = c0 + tx;
          if (cc < c && s < sp) ti[s * c + cc] = tile[tx][ty + 8 * i];
        }
        __syncthreads();
      }
    }
  }
}

enum : int { A_CHANNELS_LAST = 0, A_POINTWISE = 1 };

constexpr int ASYNC_BK = 32;
constexpr int ASYNC_STAGES = 4;
constexpr int ASYNC_KSTRIDE = ASYNC_BK + 8;   // [m][k] / [n][k] rows
constexpr int ASYNC_MSTRIDE = GEMM_BM + 8;    // [k][m] rows (A_POINTWISE)
constexpr int SPLIT_CS_STRIDE = GEMM_BM + 4;  // float32 staging of a split's partial tile

template <int BN, int A_MODE>
struct AsyncSmem {
  static constexpr int A_STAGE = A_MODE == A_POINTWISE ? ASYNC_BK * ASYNC_MSTRIDE : GEMM_BM * ASYNC_KSTRIDE;
  static constexpr int B_STAGE = BN * ASYNC_KSTRIDE;  // elements
  static constexpr int PIPE_BYTES = ASYNC_STAGES * (A_STAGE + B_STAGE) * 2;
  static constexpr int C_BYTES = BN * SPLIT_CS_STRIDE * 4;  // >= the 16-bit staging of store_mma_tile
  static constexpr int BYTES = PIPE_BYTES > C_BYTES ? PIPE_BYTES : C_BYTES;
};

struct SplitArgs {
  float* partial = nullptr;  // [splits][c_out][m_total], null: no split (y written directly)
  int kt_per_split = 0;      // k tiles per split (the last may get fewer)
};

template <typename T, bool TRANSPOSE, int BN, int A_MODE>
__global__ void __launch_bounds__(GEMM_THREADS, 2)
    conv_gemm_async_kernel(ConvArgs<T> a, const T* __restrict__ xa, SplitArgs split) {
  static_assert(sizeof(T) == 2, "tensor-core path is for 16-bit types");
  static_assert(BN == 64 || BN == 128, "BN is 64 or 128");
  static_assert(A_MODE == A_CHANNELS_LAST || !TRANSPOSE, "pointwise A is for Conv only");
  constexpr int BK = ASYNC_BK;
  constexpr int STAGES = ASYNC_STAGES;
  constexpr int K_CHUNKS = BK / 8;                         // 16-byte chunks per [.][k] row
  constexpr int M_CHUNKS = GEMM_BM / 8;                    // 16-byte chunks per [k][m] row
  constexpr int A_CHUNKS = GEMM_BM * BK / 8 / GEMM_THREADS;  // per thread
  constexpr int B_CHUNKS = BN * K_CHUNKS / GEMM_THREADS;
  constexpr int WARPS_N = BN / 32;
  constexpr int WARPS_M = GEMM_WARPS / WARPS_N;
  constexpr int WM = GEMM_BM / WARPS_M;
  constexpr int MT = WM / 16;
  constexpr int NT = 4;
  using Smem = AsyncSmem<BN, A_MODE>;
  static_assert((ASYNC_KSTRIDE * 2) % 16 == 0 && (ASYNC_MSTRIDE * 2) % 16 == 0 && (Smem::A_STAGE * 2) % 16 == 0 &&
                    (Smem::B_STAGE * 2) % 16 == 0,
                "cp.async destinations must stay 16-byte aligned");

  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* as = reinterpret_cast<uint16_t*>(smem);
  uint16_t* bs = as + STAGES * Smem::A_STAGE;

  const ConvGeometry& g = a.g;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;
  const int splits = gridDim.z / g.group;
  const int grp = blockIdx.z / splits;
  const int split_id = blockIdx.z - grp * splits;
  const int64_t m0 = int64_t(blockIdx.x) * GEMM_BM;
  const int n0 = blockIdx.y * BN;
  const uint16_t* x = reinterpret_cast<const uint16_t*>(xa);
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(a.wp) + (int64_t(grp) * g.kg_pad + n0) * g.kgemm_pad;

  // A chunks of this thread. Channels-last: k columns kc*8.. of rows arow + 64 i.
  // Pointwise: positions mc*8.. of k rows krow + 16 i (one image: out_sp % 8 == 0).
  constexpr int A_STEP = A_MODE == A_POINTWISE ? GEMM_THREADS / M_CHUNKS : GEMM_THREADS / K_CHUNKS;
  const int kc = tid % K_CHUNKS;
  const int arow = tid / K_CHUNKS;
  const int mc = tid % M_CHUNKS;
  const int krow = tid / M_CHUNKS;
  int64_t pix[A_CHUNKS];  // channels-last: first pixel of the row's image; pointwise: x offset of (image, group, pos)
  int bd[A_CHUNKS], bh[A_CHUNKS], bw[A_CHUNKS];
  bool mvalid[A_CHUNKS];
  if constexpr (A_MODE == A_POINTWISE) {
    const int64_t m = m0 + mc * 8;
    const bool valid = m < g.m_total;  // all 8 or none: m_total is a multiple of 8
    const int64_t mm = valid ? m : 0;
    const int64_t image = image_of(g, mm);
    pix[0] = (image * g.c_in + int64_t(grp) * g.cg) * g.in_sp + (mm - image * g.out_sp);
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) mvalid[i] = valid;
  } else {
#pragma unroll
    for (int i = 0; i < A_CHUNKS; ++i) {
      const int64_t m = m0 + arow + A_STEP * i;
      mvalid[i] = m < g.m_total;
      const int64_t mm = mvalid[i] ? m : 0;
      pix[i] = decode_row<TRANSPOSE>(g, mm, bd[i], bh[i], bw[i]) * g.in_sp;
    }
  }
  const int64_t group_c = int64_t(grp) * g.cg;

  auto load_tile = [&](int kt, int stage) {
    uint16_t* a_stage = as + stage * Smem::A_STAGE;
    if constexpr (A_MODE == A_POINTWISE) {
#pragma unroll
      for (int i = 0; i < A_CHUNKS; ++i) {
        const int k = kt * BK + krow + A_STEP * i;  // = input channel within the group
        const bool ok = mvalid[i] && k < g.kgemm;
        cp_async_16_zfill(a_stage + (krow + A_STEP * i) * ASYNC_MSTRIDE + mc * 8,
                          ok ? x + pix[0] + int64_t(k) * g.in_sp : x, ok);
      }
    } else {
      const int k = kt * BK + kc * 8;
      const bool kvalid = k < g.kgemm;
      const KTap tp = decode_k(g, k);
      const int c = tp.c;
#pragma unroll
      for (int i = 0; i < A_CHUNKS; ++i) {
        const int id = input_pos<TRANSPOSE>(bd[i], tp.off[0], g.in[0], g.div_sd, g.stride[0]);
        const int ih = input_pos<TRANSPOSE>(bh[i], tp.off[1], g.in[1], g.div_sh, g.stride[1]);
        const int iw = input_pos<TRANSPOSE>(bw[i], tp.off[2], g.in[2], g.div_sw, g.stride[2]);
        const bool ok = kvalid && mvalid[i] && (id | ih | iw) >= 0;
        const int64_t pixel = pix[i] + (int64_t(id) * g.in[1] + ih) * g.in[2] + iw;
        cp_async_16_zfill(a_stage + (arow + A_STEP * i) * ASYNC_KSTRIDE + kc * 8,
                          ok ? x + pixel * g.c_in + group_c + c : x, ok);
      }
    }
    uint16_t* b_stage = bs + stage * Smem::B_STAGE;
#pragma unroll
    for (int qq = 0; qq < B_CHUNKS; ++qq) {
      const int chunk = tid + qq * GEMM_THREADS;
      const int row = chunk / K_CHUNKS;
      const int col = (chunk % K_CHUNKS) * 8;
      cp_async_16(b_stage + row * ASYNC_KSTRIDE + col, wp + int64_t(row) * g.kgemm_pad + kt * BK + col);
    }
  };

  float acc[MT][NT][4] = {};

  const int ktiles = (g.kgemm + BK - 1) / BK;
  const int kt_begin = split.partial != nullptr ? split_id * split.kt_per_split : 0;
  const int kt_end = split.partial != nullptr ? min(ktiles, kt_begin + split.kt_per_split) : ktiles;
  const int count = kt_end - kt_begin;
  // One commit group per k tile (empty past the end) so wait<STAGES - 2>
  // always means "tile i has landed".
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < count) load_tile(kt_begin + s, s);
    cp_async_commit();
  }
  const int lq = lane >> 3;  // ldmatrix: which 8x8 matrix this lane addresses
  const int lr = lane & 7;   // and which of its rows
  for (int i = 0; i < count; ++i) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile i visible to all; every warp is done with tile i - 1's stage
    const int next = i + STAGES - 1;
    if (next < count) load_tile(kt_begin + next, next % STAGES);
    cp_async_commit();
    const uint16_t* a_st = as + (i % STAGES) * Smem::A_STAGE;
    const uint16_t* b_st = bs + (i % STAGES) * Smem::B_STAGE;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      uint32_t af[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        // matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
        if constexpr (A_MODE == A_POINTWISE) {
          const int k = kk + lr + (lq >> 1) * 8;
          const int m = warp_m * WM + mt * 16 + (lq & 1) * 8;
          ldmatrix_x4_trans(af[mt], a_st + k * ASYNC_MSTRIDE + m);
        } else {
          const int m = warp_m * WM + mt * 16 + lr + (lq & 1) * 8;
          const int k = kk + (lq >> 1) * 8;
          ldmatrix_x4(af[mt], a_st + m * ASYNC_KSTRIDE + k);
        }
      }
      mma_warp_k16<T, MT, ASYNC_KSTRIDE>(acc, af, b_st, warp_n, kk, lane);
    }
  }
  cp_async_wait_all();
  __syncthreads();  // the pipeline's shared memory becomes the epilogue's
  if (split.partial == nullptr) {
    store_mma_tile<T, BN, MT, WM>(a, acc, reinterpret_cast<T*>(smem), m0, n0, grp, warp, lane);
    return;
  }
  // Split: the raw float32 sums, staged as cs[n][m] and written along m.
  float* cs = reinterpret_cast<float*>(smem);
  stage_acc<MT, WM, SPLIT_CS_STRIDE>(acc, cs, warp, lane, [](float v, int, int) { return v; });
  __syncthreads();
  float* out = split.partial + (int64_t(split_id) * g.c_out + int64_t(grp) * g.kg) * g.m_total;
  for (int row = warp; row < BN; row += GEMM_WARPS) {
    const int j = n0 + row;
    if (j >= g.kg) break;  // rows only grow: warp-uniform exit
#pragma unroll
    for (int i = 0; i < GEMM_BM / 32; ++i) {
      const int64_t m = m0 + lane + 32 * i;
      if (m < g.m_total) out[int64_t(j) * g.m_total + m] = cs[row * SPLIT_CS_STRIDE + lane + 32 * i];
    }
  }
}

// y[image][co][pos] = act(sum over splits of partial[s][co][m] + bias[co]),
// m = image * out_sp + pos: channels along grid.y (grid-stride), m along x.
template <typename T>
__global__ void __launch_bounds__(256) conv_splitk_finalize_kernel(ConvGeometry g, const float* __restrict__ partial,
                                                                    int splits, const T* __restrict__ bias,
                                                                    T* __restrict__ y) {
  for (int64_t co = blockIdx.y; co < g.c_out; co += gridDim.y) {
    const float b = bias != nullptr ? to_float(__ldg(bias + co)) : 0.f;
    for (int64_t m = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; m < g.m_total;
         m += int64_t(gridDim.x) * blockDim.x) {
      float v = b;
      for (int s = 0; s < splits; ++s) v += __ldg(partial + (int64_t(s) * g.c_out + co) * g.m_total + m);
      const int64_t image = image_of(g, m);
      y[(image * g.c_out + co) * g.out_sp + (m - image * g.out_sp)] = from_float<T>(apply_activation(v, g.activation));
    }
  }
}

// ---------------------------------------------------------------------------
// Float32 implicit GEMM by FFMA. 16 x 16 threads; thread (tx, ty) owns
// m = {tx*4 .. tx*4+3, 64 + tx*4 .. 64 + tx*4+3} and n = ty*4 .. ty*4+3.
// As[k][m] and Bs[k][n] rows are read as float4 (broadcast across the
// threads sharing them); packed weights are n-contiguous for this kernel.

constexpr int SIMT_BN = 64;
constexpr int SIMT_BK = 16;
constexpr int SIMT_CS_STRIDE = GEMM_BM + 4;

struct SimtSmem {
  static constexpr int A_STAGE = SIMT_BK * GEMM_BM;  // floats
  static constexpr int B_STAGE = SIMT_BK * SIMT_BN;
  static constexpr int PIPE_BYTES = 2 * (A_STAGE + B_STAGE) * 4;
  static constexpr int C_BYTES = SIMT_BN * SIMT_CS_STRIDE * 4;
  static constexpr int BYTES = PIPE_BYTES > C_BYTES ? PIPE_BYTES : C_BYTES;
};

template <bool TRANSPOSE>
__global__ void __launch_bounds__(GEMM_THREADS, 2) conv_gemm_simt_kernel(ConvArgs<float> a) {
  constexpr int BK = SIMT_BK;
  constexpr int BN = SIMT_BN;
  constexpr int KROWS = BK / GEMM_WARPS;
  static_assert(BK * BN / 4 == GEMM_THREADS, "one 16-byte B copy per thread");

  __shared__ __align__(16) float smem[SimtSmem::BYTES / 4];
  float* as = smem;
  float* bs = smem + 2 * SimtSmem::A_STAGE;

  const ConvGeometry& g = a.g;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int tx = tid & 15;
  const int ty = tid >> 4;
  const int grp = blockIdx.z;
  const int64_t m0 = int64_t(blockIdx.x) * GEMM_BM;
  const int n0 = blockIdx.y * BN;
  const float* wp = a.wp + int64_t(grp) * g.kgemm_pad * g.kg_pad + n0;

  ARows rows;
  setup_a_rows<TRANSPOSE>(g, m0, lane, grp, rows);

  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  float av[KROWS][A_ROWS];
  auto store_a = [&](int stage) {
    float* dst = as + stage * SimtSmem::A_STAGE;
#pragma unroll
    for (int j = 0; j < KROWS; ++j)
#pragma unroll
      for (int i = 0; i < A_ROWS; ++i) dst[(warp + GEMM_WARPS * j) * GEMM_BM + lane + 32 * i] = av[j][i];
  };
  // cp.async only from the packed weights in the (16-byte aligned) workspace:
  // rows of kg_pad (a multiple of BN) floats, columns in steps of 4 floats.
  static_assert((BN * 4) % 16 == 0 && (SimtSmem::A_STAGE * 2 * 4) % 16 == 0,
                "cp.async source / destination offsets must stay 16-byte aligned");
  const int b_row = tid / (BN / 4);
  const int b_col = (tid % (BN / 4)) * 4;
  auto issue_b = [&](int kt, int stage) {
    float* dst = bs + stage * SimtSmem::B_STAGE;
    cp_async_16(dst + b_row * BN + b_col, wp + (int64_t(kt) * BK + b_row) * g.kg_pad + b_col);
    cp_async_commit();
  };

  const int ktiles = (g.kgemm + BK - 1) / BK;
  if (ktiles > 0) {
    load_a_tile<float, TRANSPOSE, KROWS, BK>(g, a.x, rows, 0, warp, av);
    issue_b(0, 0);
    store_a(0);
    cp_async_wait_all();
    __syncthreads();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    const int stage = kt & 1;
    const bool more = kt + 1 < ktiles;
    if (more) {
      load_a_tile<float, TRANSPOSE, KROWS, BK>(g, a.x, rows, kt + 1, warp, av);
      issue_b(kt + 1, stage ^ 1);
    }
    const float* a_st = as + stage * SimtSmem::A_STAGE;
    const float* b_st = bs + stage * SimtSmem::B_STAGE;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(a_st + k * GEMM_BM + tx * 4);
      const float4 a1 = *reinterpret_cast<const float4*>(a_st + k * GEMM_BM + 64 + tx * 4);
      const float4 b = *reinterpret_cast<const float4*>(b_st + k * BN + ty * 4);
      const float am[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float bn[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(am[i], bn[j], acc[i][j]);
    }
    if (more) {
      store_a(stage ^ 1);
      cp_async_wait_all();
    }
    __syncthreads();
  }

  float* cs = smem;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int n_local = ty * 4 + j;
    const int jj = n0 + n_local;
    float b = 0.f;
    if (a.bias != nullptr && jj < g.kg) b = __ldg(a.bias + int64_t(grp) * g.kg + jj);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = apply_activation(acc[i][j] + b, g.activation);
    *reinterpret_cast<float4*>(cs + n_local * SIMT_CS_STRIDE + tx * 4) = make_float4(v[0], v[1], v[2], v[3]);
    *reinterpret_cast<float4*>(cs + n_local * SIMT_CS_STRIDE + 64 + tx * 4) = make_float4(v[4], v[5], v[6], v[7]);
  }
  __syncthreads();
  store_c_tile<float, BN, SIMT_CS_STRIDE>(g, cs, a.y, m0, n0, grp, warp, lane);
}

}  // namespace trt_fastops::conv
