// Device code for Dense's GELU pass (the fallback of activation "gelu":
// cuBLASLt wrote v = X · W + bias into Y, this kernel makes it GELU(v) in
// place). Host side: dense_gelu.cu. Device code only, no framework.
#pragma once

#include <cstdint>

#include "plugins/common/cuda_utils.cuh"

namespace trt_fastops::dense {

// The exact GELU, 0.5 v (1 + erf(v / sqrt 2)), in float32: the same float
// expression as CUTLASS's thread::GELU<float> (the sm_90a path's epilogue) and
// conv's ACT_GELU, so both Dense paths compute GELU alike from the same v.
__device__ __forceinline__ float gelu_erf(float v) { return 0.5f * v * (1.f + erff(v * 0.70710678118654752f)); }

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
