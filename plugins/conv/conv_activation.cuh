// Activation epilogue shared by trt_fastops' own convolution kernels
// (conv_fallback.cuh, conv_depthwise.cuh): one definition, so every kernel
// rounds the same float32 value. Device code only, no framework.
#pragma once

#include <type_traits>

#include <cuda_runtime.h>

namespace trt_fastops::conv {

enum : int { ACT_NONE = 0, ACT_RELU = 1, ACT_SILU = 2, ACT_GELU = 3 };

template <int ACT>
__device__ __forceinline__ float activation_of(float v) {
  if constexpr (ACT == ACT_RELU) return v < 0.f ? 0.f : v;  // NaN stays NaN
  if constexpr (ACT == ACT_SILU) return __fdividef(v, 1.f + expf(-v));  // no IEEE-division slow-path call; -0 for v < -88
  if constexpr (ACT == ACT_GELU) return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  return v;
}

__device__ __forceinline__ float apply_activation(float v, int act) {
  switch (act) {
    case ACT_RELU: return activation_of<ACT_RELU>(v);
    case ACT_SILU: return activation_of<ACT_SILU>(v);
    case ACT_GELU: return activation_of<ACT_GELU>(v);
    default: return v;
  }
}

// f(std::integral_constant<int, ACT>) for the runtime activation: loops over a
// tile's elements then branch once, not per element.
template <typename F>
__device__ __forceinline__ void with_activation(int act, F&& f) {
  switch (act) {
    case ACT_RELU: f(std::integral_constant<int, ACT_RELU>{}); break;
    case ACT_SILU: f(std::integral_constant<int, ACT_SILU>{}); break;
    case ACT_GELU: f(std::integral_constant<int, ACT_GELU>{}); break;
    default: f(std::integral_constant<int, ACT_NONE>{}); break;
  }
}

}  // namespace trt_fastops::conv
