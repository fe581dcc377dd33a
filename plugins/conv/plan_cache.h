// The conv plan cache's key: everything that decides how one convolution runs
// (device, dtype, op, every size and attribute, activation, bias, the
// requested backend and the alignment of each pointer). A plain struct of
// int64 fields: no padding, so it hashes and compares as bytes.
//
// The cache itself is LruCache<ConvKey, shared_ptr<const ConvPlan>> (see
// conv_launch.cu); its capacity comes from TRT_FASTOPS_CONV_CACHE_SIZE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "plugins/common/lru_cache.h"
#include "plugins/common/status.h"
#include "plugins/conv/conv.h"

namespace trt_fastops::conv {

struct ConvKey {
  int64_t device, dtype, transpose, spatial, backend, activation, has_bias;
  int64_t n, c_in, c_out, group;
  int64_t in[CONV_MAX_SPATIAL], out[CONV_MAX_SPATIAL], kernel[CONV_MAX_SPATIAL], stride[CONV_MAX_SPATIAL],
      dilation[CONV_MAX_SPATIAL], pad_begin[CONV_MAX_SPATIAL], pad_end[CONV_MAX_SPATIAL],
      output_padding[CONV_MAX_SPATIAL];
  int64_t align_x, align_w, align_b, align_y;  // largest power of two <= 16 dividing the address

  bool operator==(const ConvKey& o) const { return std::memcmp(this, &o, sizeof(ConvKey)) == 0; }
  bool operator!=(const ConvKey& o) const { return !(*this == o); }
};
static_assert(sizeof(ConvKey) == (15 + 8 * CONV_MAX_SPATIAL) * sizeof(int64_t), "ConvKey must have no padding");


inline int64_t pointer_alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 16;
  while (align > 1 && (a % uintptr_t(align)) != 0) align /= 2;
  return align;
}

// Entries past p.spatial are normalised so that stale values there never split keys.
inline ConvKey make_conv_key(const ConvParams& p, int device, int backend) {
  ConvKey k;
  std::memset(&k, 0, sizeof(k));
  k.device = device;
  k.dtype = static_cast<int64_t>(p.dtype);
  k.transpose = p.transpose ? 1 : 0;
  k.spatial = p.spatial;
  k.backend = backend;
  k.activation = static_cast<int64_t>(p.activation);
  k.has_bias = p.bias != nullptr ? 1 : 0;
  k.n = p.n;
  k.c_in = p.c_in;
  k.c_out = p.c_out;
  k.group = p.group;
  for (int i = 0; i < CONV_MAX_SPATIAL; ++i) {
    const bool used = i < p.spatial;
    k.in[i] = used ? p.in[i] : 1;
    k.out[i] = used ? p.out[i] : 1;
    k.kernel[i] = used ? p.kernel[i] : 1;
    k.stride[i] = used ? p.stride[i] : 1;
    k.dilation[i] = used ? p.dilation[i] : 1;
    k.pad_begin[i] = used ? p.pad_begin[i] : 0;
    k.pad_end[i] = used ? p.pad_end[i] : 0;
    k.output_padding[i] = used && p.transpose ? p.output_padding[i] : 0;
  }
  k.align_x = pointer_alignment(p.x);
  k.align_w = pointer_alignment(p.w);
  k.align_b = p.bias != nullptr ? pointer_alignment(p.bias) : 0;
  k.align_y = pointer_alignment(p.y);
  return k;
}

// "Conv float16 x[32,64,56,56] w[64,64,3,3] y[32,64,56,56] group 1 stride [1,1] dilation [1,1]
//  pads [1,1]-[1,1] bias relu, device 0" (for error messages only: never on a success path).
inline std::string describe_conv(const ConvParams& p, int device) {
  const int sp = p.spatial < 0 ? 0 : p.spatial > CONV_MAX_SPATIAL ? CONV_MAX_SPATIAL : p.spatial;
  std::string s;
  auto list = [&](const int64_t* v) {
    s += '[';
    for (int i = 0; i < sp; ++i) str_append(s, i ? "," : ""), str_append(s, v[i]);
    s += ']';
  };
  auto dims = [&](int64_t a, int64_t b, const int64_t* v) {
    str_append(s, a), s += ',', str_append(s, b);
    for (int i = 0; i < sp; ++i) s += ',', str_append(s, v[i]);
    s += ']';
  };
  s += p.transpose ? "ConvTranspose " : "Conv ";
  s += dtype_name(p.dtype);
  s += " x[";
  dims(p.n, p.c_in, p.in);
  s += " w[";
  const int64_t per_group = p.group > 0 ? (p.transpose ? p.c_out : p.c_in) / p.group : 0;
  dims(p.transpose ? p.c_in : p.c_out, per_group, p.kernel);
  s += " y[";
  dims(p.n, p.c_out, p.out);
  str_append(s, " group "), str_append(s, p.group), s += " stride ";
  list(p.stride);
  s += " dilation ";
  list(p.dilation);
  s += " pads ";
  list(p.pad_begin);
  s += '-';
  list(p.pad_end);
  if (p.transpose) {
    s += " output_padding ";
    list(p.output_padding);
  }
  if (p.bias != nullptr) s += " bias";
  static const char* acts[] = {"", " relu", " silu", " gelu"};
  const int a = static_cast<int>(p.activation);
  if (a > 0 && a < 4) s += acts[a];
  str_append(s, ", device "), str_append(s, device);
  return s;
}

// TRT_FASTOPS_CONV_CACHE_SIZE (entries, >= 1), default 256.
inline size_t conv_cache_capacity_from_env() { return cache_capacity_from_env("TRT_FASTOPS_CONV_CACHE_SIZE", 256); }

}  // namespace trt_fastops::conv
