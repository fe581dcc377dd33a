// Small device helpers shared by the kernels: float conversions, 16-byte
// vector packs, warp and block reductions. Device code only, no framework.
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace trt_fastops {

constexpr int kWarpSize = 32;

// Host and device: is p a multiple of `bytes` (a power of two)?
__host__ __device__ inline bool is_aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

// The same pointer, but opaque to the optimiser: stops it from hoisting address
// arithmetic out of a loop (and keeping it in registers) where recomputing it
// per iteration is cheaper than the register pressure.
template <typename T>
__device__ __forceinline__ T* opaque_ptr(T* p) {
  asm volatile("" : "+l"(p));
  return p;
}

// ---------------------------------------------------------------------------
// Scalar conversions (float math for every element type).

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// ---------------------------------------------------------------------------
// 16-byte vectors: one LDG.128 / STG.128 each. Callers guarantee 16-byte
// alignment. A Pack holds raw bits as four 32-bit words, so selects and zero
// fills stay 32-bit operations (no 16-bit lane shuffling for __half).

template <typename T>
struct Pack {
  static constexpr int N = 16 / sizeof(T);  // 4 floats or 8 halves
  uint4 raw;
};

// Bit casts between a 32-bit word and a float or a pair of 16-bit values.
template <typename T>
struct Word;
template <>
struct Word<float> {
  static __device__ __forceinline__ void to_float(uint32_t w, float* out) { out[0] = __uint_as_float(w); }
  static __device__ __forceinline__ uint32_t from_float(const float* in) { return __float_as_uint(in[0]); }
};
template <>
struct Word<__half> {
  static __device__ __forceinline__ void to_float(uint32_t w, float* out) {
    __half2 h;
    static_assert(sizeof(h) == sizeof(w));
    memcpy(&h, &w, sizeof(w));
    const float2 f = __half22float2(h);
    out[0] = f.x;
    out[1] = f.y;
  }
  static __device__ __forceinline__ uint32_t from_float(const float* in) {
    const __half2 h = __floats2half2_rn(in[0], in[1]);
    uint32_t w;
    memcpy(&w, &h, sizeof(w));
    return w;
  }
};
template <>
struct Word<__nv_bfloat16> {
  static __device__ __forceinline__ void to_float(uint32_t w, float* out) {
    // bf16 is the top half of a float: two shifts, exact.
    out[0] = __uint_as_float(w << 16);
    out[1] = __uint_as_float(w & 0xffff0000u);
  }
  static __device__ __forceinline__ uint32_t from_float(const float* in) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(in[0], in[1]);
    uint32_t w;
    memcpy(&w, &h, sizeof(w));
    return w;
  }
};

// Through the read-only (non-coherent) path: for data no thread of the kernel writes.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return Pack<T>{__ldg(reinterpret_cast<const uint4*>(p))};
}

// load_pack(p) where `pred`, else zeros: compiles to a predicated load into
// zeroed registers, no branch.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack_if(bool pred, const T* p) {
  Pack<T> out{make_uint4(0u, 0u, 0u, 0u)};
  if (pred) out.raw = __ldg(reinterpret_cast<const uint4*>(p));
  return out;
}

// An ordinary (coherent) load: unlike load_pack's read-only path, the compiler
// will not move it above an earlier store that may alias, so per-item loads in
// a store loop are not all hoisted to the top (keeps register pressure down).
template <typename T>
__device__ __forceinline__ Pack<T> load_pack_ordered(const T* p) {
  return Pack<T>{*reinterpret_cast<const uint4*>(p)};
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<uint4*>(p) = v.raw;
}

template <typename T>
__device__ __forceinline__ void pack_to_float(const Pack<T>& in, float (&out)[Pack<T>::N]) {
  constexpr int PER_WORD = Pack<T>::N / 4;
  Word<T>::to_float(in.raw.x, out + 0 * PER_WORD);
  Word<T>::to_float(in.raw.y, out + 1 * PER_WORD);
  Word<T>::to_float(in.raw.z, out + 2 * PER_WORD);
  Word<T>::to_float(in.raw.w, out + 3 * PER_WORD);
}

template <typename T>
__device__ __forceinline__ Pack<T> float_to_pack(const float (&in)[Pack<T>::N]) {
  constexpr int PER_WORD = Pack<T>::N / 4;
  return Pack<T>{make_uint4(Word<T>::from_float(in + 0 * PER_WORD), Word<T>::from_float(in + 1 * PER_WORD),
                            Word<T>::from_float(in + 2 * PER_WORD), Word<T>::from_float(in + 3 * PER_WORD))};
}

// ---------------------------------------------------------------------------
// Reductions. Every lane (thread) gets the same bits back, so all threads of a
// row agree on mean and rstd.

__device__ __forceinline__ float warp_all_reduce_sum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum over the whole block, returned to every thread (any whole number of
// warps). `scratch` is a shared array of at least BLOCK / 32 floats. Two calls in a row must use different
// scratch arrays (a fast warp may write the next partial before a slow one has
// read this one); with alternating arrays, the barrier in call n+1 orders the
// reads of call n before the writes of call n+2.
template <int BLOCK>
__device__ __forceinline__ float block_all_reduce_sum(float v, float* scratch) {
  static_assert(BLOCK % kWarpSize == 0 && BLOCK <= 1024, "BLOCK must be whole warps");
  constexpr int WARPS = BLOCK / kWarpSize;
  v = warp_all_reduce_sum(v);
  if constexpr (WARPS == 1) {
    return v;
  } else {
    const int lane = threadIdx.x % kWarpSize;
    if (lane == 0) scratch[threadIdx.x / kWarpSize] = v;
    __syncthreads();
    if constexpr ((WARPS & (WARPS - 1)) == 0) {
      // Each aligned group of WARPS lanes holds all partials, so a butterfly over
      // log2(WARPS) steps leaves the total in every lane (same order everywhere).
      float t = scratch[lane % WARPS];
#pragma unroll
      for (int offset = WARPS / 2; offset > 0; offset /= 2) {
        t += __shfl_xor_sync(0xffffffffu, t, offset);
      }
      return t;
    } else {
      // Any other warp count (e.g. 3 for a 96-thread CTA): every thread adds
      // all partials (broadcast reads) in the same order, so all get the same bits.
      float t = scratch[0];
#pragma unroll
      for (int w = 1; w < WARPS; ++w) t += scratch[w];
      return t;
    }
  }
}

// Combines per-warp moments into the block's mean and M2 (sum of squared
// deviations), returned to every thread. Each warp passes its (sum, M2 about
// its own mean) in all lanes; warp_count(w) gives warp w's element count (the
// same in every thread). `scratch` holds BLOCK / 32 float2 and follows the
// alternation rule of block_all_reduce_sum. Chan et al.'s pairwise update:
//   mean = sum_w sum_w / n,  M2 = sum_w [M2_w + n_w * (sum_w / n_w - mean)^2]
// adds only non-negative terms, so no cancellation; one barrier.
template <int BLOCK, typename CountFn>
__device__ __forceinline__ void block_combine_moments(float warp_sum, float warp_m2, float2* scratch,
                                                      CountFn warp_count, float inv_n, float& mean,
                                                      float& m2) {
  static_assert(BLOCK % kWarpSize == 0 && BLOCK <= 1024, "BLOCK must be whole warps");
  constexpr int WARPS = BLOCK / kWarpSize;
  const int lane = threadIdx.x % kWarpSize;
  if (lane == 0) scratch[threadIdx.x / kWarpSize] = make_float2(warp_sum, warp_m2);
  __syncthreads();
  if constexpr ((WARPS & (WARPS - 1)) == 0) {
    // Butterfly over the WARPS lanes of each aligned group (see block_all_reduce_sum).
    const int w = lane % WARPS;
    const float2 p = scratch[w];
    float total = p.x;
#pragma unroll
    for (int offset = WARPS / 2; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
    mean = total * inv_n;
    const float n_w = warp_count(w);
    const float dev = n_w > 0.f ? p.x / n_w - mean : 0.f;
    float t = p.y + n_w * dev * dev;
#pragma unroll
    for (int offset = WARPS / 2; offset > 0; offset /= 2) t += __shfl_xor_sync(0xffffffffu, t, offset);
    m2 = t;
  } else {
    // Other warp counts (3 for a 96-thread CTA): lane w < WARPS computes warp
    // w's term, and every lane adds the WARPS terms by shuffles in the same
    // order, so all get the same bits (lanes >= WARPS duplicate a term, unused).
    const int w = lane % WARPS;
    const float2 p = scratch[w];
    float total = __shfl_sync(0xffffffffu, p.x, 0);
#pragma unroll
    for (int i = 1; i < WARPS; ++i) total += __shfl_sync(0xffffffffu, p.x, i);
    mean = total * inv_n;
    const float n_w = warp_count(w);
    const float dev = n_w > 0.f ? p.x / n_w - mean : 0.f;
    const float term = p.y + n_w * dev * dev;
    float t = __shfl_sync(0xffffffffu, term, 0);
#pragma unroll
    for (int i = 1; i < WARPS; ++i) t += __shfl_sync(0xffffffffu, term, i);
    m2 = t;
  }
}

}  // namespace trt_fastops
