// Device code for Dense's GELU pass (the fallback of activation "gelu":
// cuBLASLt wrote v = X · W + bias into Y, this kernel makes it GELU(v) in
// place). Host side: dense_gelu.cu. Device code only, no framework.
#pragma once

#include <cstdint>

#include "plugins/common/cuda_utils.cuh"

namespace trt_fastops::dense {

// The exact (erf) GELU, v Phi(v), with Abramowitz & Stegun 7.1.26 for erf
// (1 - t (a1 + t (a2 + ... + t a5)) e^-x^2, t = 1 / (1 + p x), x >= 0; within
// 1.5e-7), rearranged so that no sign handling or 1 + erf remains:
//   GELU(v) = max(v, 0) - |v| h(t) e^(-v^2 / 2),  t = 1 / (1 + p |v| / sqrt 2),
// with h = 0.5 (a1 t + ... + a5 t^5) (the halves folded into the coefficients).
// On the device the reciprocal and the power of two are single MUFU
// instructions (rcp / ex2 .approx.ftz: flushing denormal intermediates changes
// nothing here), 13 instructions in all: the sm_90a GEMM (dense_gelu_sm90.cu)
// runs this in its epilogue, where its ~25 instructions per element, unhidden
// by the main loop, were what the tensor cores waited on (ncu: 4x the
// instructions of cuBLASLt's bias-only GEMM). The one expression both Dense
// paths use (the fallback's pass below and the sm_90a epilogue's GeluErf),
// so they compute GELU alike from the same v. Error far below Y's rounding
// (float16 / bfloat16: 5e-4 / 4e-3 relative).
__host__ __device__ __forceinline__ float gelu_erf(float v) {
  const float a = fabsf(v);
  const float d = fmaf(0.3275911f * 0.70710678118654752f, a, 1.f);
  const float w = a * 0.84932180028801907f;  // e^(-v^2 / 2) = 2^(-w^2), w = |v| sqrt(log2(e) / 2)
#if defined(__CUDA_ARCH__)
  float t, e;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(d));
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-w * w));
#else
  const float t = 1.f / d;
  const float e = exp2f(-w * w);
#endif
  const float h =
      t * fmaf(t, fmaf(t, fmaf(t, fmaf(t, 0.5307027145f, -0.7265760135f), 0.7107068705f), -0.142248368f),
               0.127414796f);
  return fmaf(-a * h, e, fmaxf(v, 0.f));
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
