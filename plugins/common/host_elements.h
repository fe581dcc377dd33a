// Element access for the host (CPU reference) paths: one element of a
// float32 / float16 / bfloat16 buffer read as float32 or written from float32
// (16-bit types rounded once, from the float32 value, as the GPU kernels do).
#pragma once

#include <cstdint>

#include "plugins/common/dtype.h"

namespace trt_fastops {

inline float load_element(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::f16: return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::bf16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  }
  return 0.f;
}

inline void store_element(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(base)[i] = float_to_half_bits(v); break;
    case DType::bf16: static_cast<uint16_t*>(base)[i] = float_to_bf16_bits(v); break;
  }
}

}  // namespace trt_fastops
