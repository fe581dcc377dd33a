// Flash-attention forward for sm_90a: wgmma (warpgroup MMA) instead of
// mma.sync. Device code only; the host side is attention_hopper.cu.
//
// A CTA is two warpgroups (256 threads) owning 128 query rows, 64 per
// warpgroup. Tiles live in shared memory in the canonical 128-byte-swizzled
// wgmma layout ([D / 64][rows][64], 16-byte chunks XORed with row % 8):
//   S = Q K^T   wgmma m64nBNk16, A = Q and B = K straight from shared memory (K-major)
//   O += P V    wgmma m64nDk16, A = P from registers (the S accumulators re-packed),
//               B = V from shared memory read MN-major (transposed by the descriptor)
// The tensor cores read operands from shared memory themselves, so the
// shared-memory bandwidth that bounds the mma.sync kernel (every warp pulling
// its own K/V fragments through ldmatrix) is no longer the limit. K/V tiles
// are double-buffered: block j+1 streams in (cp.async) while block j computes.
// Scores, masks, the online softmax and the epilogue are the sm80 kernel's
// (attention_kernels.cuh): wgmma accumulators have the m16n8 fragment layout.
#pragma once

#include <cstdint>

#include "plugins/attention/attention_kernels.cuh"
#include "plugins/attention/wgmma.cuh"
#include "plugins/common/hopper.cuh"

namespace trt_fastops::attention {

// MIN_BLOCKS: CTAs per SM to fit (caps registers at 65536 / (256 * MIN_BLOCKS)).
template <int D, int BN, int MIN_BLOCKS>
struct HopperConfig {
  static constexpr const char* NAME = "flash_fwd_wgmma";
  static constexpr int HEAD_DIM = D, BLOCK_M = 128, BLOCK_N = BN, NUM_WARPS = 8, BLOCKS_PER_SM = MIN_BLOCKS;
  static constexpr int THREADS = 256;
  static constexpr bool PERSISTENT = false;  // one CTA per tile
  static constexpr bool Q_BY_TMA = false;    // Q rows come by cp.async from row m0 on (no rows before 0)
  static constexpr bool GRID_DEPENDENCY = true;  // waits for the grid ahead (grid_dependency_wait)
  static constexpr int TILE_Q = BLOCK_M * D, TILE_KV = BN * D;  // elements
  // Q + two stages of K and V, plus slack to align the tiles to 1024 bytes
  // (the 128-byte swizzle repeats every 8 rows of 128 bytes).
  static constexpr int SMEM_BYTES = (TILE_Q + 4 * TILE_KV) * 2 + 1024;
  static_assert(D % 64 == 0 && BN % 16 == 0, "wgmma tiles");
};

// Element offset of (row, col) in a 128-byte-swizzled [ROWS, D] tile.
template <int ROWS>
__device__ __forceinline__ int sw128_offset(int row, int col) {
  const int c = col & 63;
  return (col >> 6) * ROWS * 64 + row * 64 + ((((c >> 3) ^ row) & 7) << 3) + (c & 7);
}

// cp.async of a [ROWS, D] tile into the swizzled layout; rows >= rows_valid
// and dims >= dims_valid become zeros (dims_valid is a multiple of 8 here).
template <typename T, int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile_sw128(T* smem, const T* __restrict__ src, int64_t row_stride,
                                                int rows_valid, int dims_valid, int tid) {
  constexpr int CHUNKS = D / 8;
  static_assert(THREADS % CHUNKS == 0 && (ROWS * CHUNKS) % THREADS == 0, "tile chunks split evenly");
  constexpr int ROW_STEP = THREADS / CHUNKS;  // a multiple of 8: the swizzle is the same every pass
  const int c = tid % CHUNKS;
  int r = tid / CHUNKS;
  const T* g = src + r * row_stride + c * 8;
  const int64_t g_step = ROW_STEP * row_stride;
  T* dst = smem + sw128_offset<ROWS>(r, c * 8);
  const bool col_ok = c * 8 < dims_valid;
#pragma unroll
  for (int it = 0; it < ROWS / ROW_STEP; ++it) {
    const bool ok = r < rows_valid && col_ok;
    cp_async_16_zfill(dst, ok ? g : src, ok);
    r += ROW_STEP;
    g += g_step;
    dst += ROW_STEP * 64;
  }
}

// Shared-memory matrix descriptor of a 128-byte-swizzled tile: start address,
// leading byte offset (K-major: unused, 16; MN-major: bytes between 64-wide
// column atoms), stride byte offset 1024 (between groups of 8 rows).
__device__ __forceinline__ uint64_t sw128_desc(const void* p, uint32_t lbo_bytes) {
  const uint32_t addr = smem_addr(p);
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// desc moved on by `bytes` of shared memory (a multiple of 16): only the start
// address field changes, and it cannot carry out of its 14 bits because shared
// addresses stay below 256 KB (CUTLASS's descriptor iterator does the same).
// Spares ptxas rebuilding every descriptor in the block loop.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xffffffff00000000ull) | uint32_t(uint32_t(desc) + (bytes >> 4));
}

// desc_advance that also takes `bytes` off the leading byte offset, so the next
// atom along N stays where it was (it must stay at or past the new start).
__device__ __forceinline__ uint64_t desc_advance_lbo(uint64_t desc, uint32_t bytes) {
  return (desc & 0xffffffff00000000ull) | uint32_t(uint32_t(desc) + (bytes >> 4) - ((bytes >> 4) << 16));
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// cp.async wrote through the generic proxy; wgmma reads through the async proxy.
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

// Keeps the compiler from moving reads of wgmma accumulators above the wait.
template <int N>
__device__ __forceinline__ void pin_registers(float (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(r[i][e])::"memory");
}

template <typename T, typename CFG, bool MASKED>
__global__ void __launch_bounds__(CFG::THREADS, CFG::BLOCKS_PER_SM) flash_fwd_hopper_kernel(const FlashArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = CFG::HEAD_DIM, BM = CFG::BLOCK_M, BN = CFG::BLOCK_N, THREADS = CFG::THREADS;
  constexpr int NT = BN / 8, DT = D / 8;

  extern __shared__ unsigned char smem_raw[];
  T* s_q = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* s_kv = s_q + CFG::TILE_Q;  // stage i: K at s_kv + 2i * TILE_KV, V right after

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int wg = warp >> 2;       // warpgroup: query rows 64 * wg ...
  const int warp_row0 = warp * 16;  // this warp's 16 accumulator rows within the tile
  // Launched with programmatic stream serialization (launch_kernel): wait for the grid ahead.
  grid_dependency_wait();
  launch_dependents();
  const BlockWork w = block_work<BM, BN, MASKED>(a, blockIdx.x);

  const T* q = static_cast<const T*>(a.q) + w.b * a.q_sb + w.h * a.q_sh + int64_t(w.m0) * a.q_ss;
  const T* k = static_cast<const T*>(a.k) + w.b * a.k_sb + w.kvh * a.k_sh;
  const T* v = static_cast<const T*>(a.v) + w.b * a.v_sb + w.kvh * a.v_sh;
  auto load_kv = [&](int nb) {
    T* s_k = s_kv + (nb & 1) * 2 * CFG::TILE_KV;
    const int n0 = nb * BN;
    load_tile_sw128<T, D, BN, THREADS>(s_k, k + int64_t(n0) * a.k_ss, a.k_ss, a.kv_len - n0, a.head_dim, tid);
    load_tile_sw128<T, D, BN, THREADS>(s_k + CFG::TILE_KV, v + int64_t(n0) * a.v_ss, a.v_ss, a.kv_len - n0,
                                       a.v_head_dim, tid);
  };

  load_tile_sw128<T, D, BM, THREADS>(s_q, q, a.q_ss, a.q_len - w.m0, a.head_dim, tid);
  if (w.n_blocks > 0) load_kv(0);
  cp_async_commit();

  float o[1][DT][4];
  float row_max[1][2] = {{NEG_INF, NEG_INF}}, row_sum[1][2] = {{0.f, 0.f}};
#pragma unroll
  for (int dt = 0; dt < DT; ++dt) o[0][dt][0] = o[0][dt][1] = o[0][dt][2] = o[0][dt][3] = 0.f;

  for (int nb = 0; nb < w.n_blocks; ++nb) {
    const T* s_k = s_kv + (nb & 1) * 2 * CFG::TILE_KV;
    const T* s_v = s_k + CFG::TILE_KV;
    cp_async_wait_all();
    fence_async_smem();
    __syncthreads();  // stage nb visible to the tensor cores; every warpgroup is done with stage nb - 1
    if (nb + 1 < w.n_blocks) {
      load_kv(nb + 1);
      cp_async_commit();
    }

    // S = Q K^T over this warpgroup's 64 rows.
    float s[1][NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) s[0][nt][0] = s[0][nt][1] = s[0][nt][2] = s[0][nt][3] = 0.f;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t desc_q = sw128_desc(s_q + (kk >> 2) * BM * 64 + wg * 64 * 64 + (kk & 3) * 16, 16);
      const uint64_t desc_k = sw128_desc(s_k + (kk >> 2) * BN * 64 + (kk & 3) * 16, 16);
      Wgmma<BN, T>::ss(s[0], desc_q, desc_k, 1);
    }
    wgmma_commit();
    wgmma_wait_all();
    pin_registers<NT>(s[0]);

    prepare_scores<1, NT, MASKED>(s, a, w, w.m0 + warp_row0, nb * BN, g, t);
    online_softmax<1, NT, DT>(s, o, row_max, row_sum, w.exp_scale);
    uint32_t ap[NT / 2][1][4];
    pack_p<T, 1, NT>(s, ap);

    // O += P V: 16 keys per step; V's 64-wide column atoms are BN * 128 bytes apart.
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      Wgmma<D, T>::rs(o[0], ap[ks][0], sw128_desc(s_v + ks * 16 * 64, BN * 128));
    }
    wgmma_commit();
    wgmma_wait_all();
    pin_registers<DT>(o[0]);
  }
  cp_async_wait_all();
  __syncthreads();  // Q reads (and any unfinished Q copies) done before rows are reused for staging

  store_output<T, 1, DT, true>(a, w, o, row_max, row_sum, warp_row0, g, t, lane,
                               [&](int row, int col) { return s_q + sw128_offset<BM>(row, col); });
#endif
}

}  // namespace trt_fastops::attention
