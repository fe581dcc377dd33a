// Activation epilogue shared by trt_fastops' own convolution kernels
// (conv_fallback.cuh, conv_depthwise.cuh): one definition, so every kernel
// rounds the same float32 value. Device code only, no framework.
#pragma once

#include <cuda_runtime.h>

namespace trt_fastops::conv {

enum : int { ACT_NONE = 0, ACT_RELU = 1, ACT_SILU = 2, ACT_GELU = 3 };

__device__ __forceinline__ float apply_activation(float v, int act) {
  switch (act) {
    case ACT_RELU: return v < 0.f ? 0.f : v;  // NaN stays NaN
    case ACT_SILU: return __fdividef(v, 1.f + expf(-v));  // no IEEE-division slow-path call; -0 for v < -88
    case ACT_GELU: return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    default: return v;
  }
}

}  // namespace trt_fastops::conv
