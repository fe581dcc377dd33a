// Device code for Dense's GELU pass (the fallback of activation "gelu":
// cuBLASLt wrote v = X · W + bias into Y, this kernel makes it GELU(v) in
// place). Host side: dense_gelu.cu. Device code only, no framework.
#pragma once

#include <cstdint>

#include "plugins/common/cuda_utils.cuh"

namespace trt_fastops::dense {

// erf(x) to within 1.5e-7 absolute (Abramowitz & Stegun 7.1.26:
// 1 - t (a1 + t (a2 + ... + t a5)) e^-x^2, t = 1 / (1 + p |x|)); on the device
// the reciprocal and the exponential are the fast approximations, adding a few
// 1e-8. One reciprocal, one exponential and seven FMAs: erff's dependent chain
// is about twice as long, and in the sm_90a GEMM's epilogue (dense_gelu_sm90.cu)
// GELU is what the tensor cores wait on. The error is far below Y's rounding
// (float16 / bfloat16: 5e-4 / 4e-3 relative).
__host__ __device__ __forceinline__ float erf_fast(float x) {
  const float a = fabsf(x);
#if defined(__CUDA_ARCH__)
  const float t = __fdividef(1.f, fmaf(0.3275911f, a, 1.f));
  const float e = __expf(-a * a);
#else
  const float t = 1.f / fmaf(0.3275911f, a, 1.f);
  const float e = expf(-a * a);
#endif
  const float poly =
      t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 1.061405429f, -1.453152027f), 1.421413741f), -0.284496736f), 0.254829592f);
  return copysignf(fmaf(-poly, e, 1.f), x);
}

// The exact (erf) GELU, 0.5 v (1 + erf(v / sqrt 2)), in float32 with erf_fast:
// the one expression both Dense paths use (the fallback's pass below and the
// sm_90a epilogue's GeluErf), so they compute GELU alike from the same v.
__host__ __device__ __forceinline__ float gelu_erf(float v) {
  return 0.5f * v * (1.f + erf_fast(v * 0.70710678118654752f));
}

// Y[i] = GELU(Y[i]) for i < count, grid-stride. VEC: y is 16-byte aligned and
// whole 16-byte packs are processed per step (one LDG.128 / STG.128 each), the
// count % Pack<T>::N tail element by element; otherwise one element per step.
template <typename T, bool VEC>
__global__ void dense_gelu_kernel(T* __restrict__ y, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t done = 0;
  if constexpr (VEC) {
    constexpr int N = Pack<T>::N;
    const int64_t packs = count / N;
    for (int64_t i = tid; i < packs; i += stride) {
      float v[N];
      pack_to_float(load_pack_ordered(y + i * N), v);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = gelu_erf(v[j]);
      store_pack(y + i * N, float_to_pack<T>(v));
    }
    done = packs * N;
  }
  for (int64_t i = done + tid; i < count; i += stride) y[i] = from_float<T>(gelu_erf(to_float(y[i])));
}

}  // namespace trt_fastops::dense
