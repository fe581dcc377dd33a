// Element types the ops support, and host-side conversions for the 16-bit
// formats (used by the CPU reference; device code uses cuda_fp16/cuda_bf16).
// Framework-free: adapters map their own type enums onto DType.
#pragma once

#include <cstdint>
#include <cstring>

namespace trt_fastops {

enum class DType : int32_t { f32 = 0, f16 = 1, bf16 = 2 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
  }
  return "unknown";
}

inline int64_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

// IEEE binary16 <-> float, round to nearest even.
inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { ++e; man <<= 1; } while (!(man & 0x400u));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + (127 - 15)) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / Inf
  if (abs >= 0x477ff000u) return sign | 0x7c00u;                                      // overflow
  if (abs < 0x38800000u) {  // half subnormal (units of 2^-24) or zero
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    int shift = 126 - int(abs >> 23);  // 14..24
    uint16_t r = uint16_t(man >> shift);
    uint32_t rem = man & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return sign | r;
  }
  uint32_t e = (abs >> 23) - 112;  // rebias 127 -> 15
  uint32_t man = abs & 0x7fffffu;
  uint16_t r = uint16_t(e << 10 | man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into exponent: correct
  return sign | r;
}

inline float bf16_bits_to_float(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

}  // namespace trt_fastops
