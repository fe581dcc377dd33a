// Framework-free launcher contract for Conv / ConvTranspose (ONNX opset 11+
// semantics, 1-D to 3-D, NCHW-style layouts). Adapters (ORT op, TensorRT
// plugin, pybind11) fill one ConvParams through conv_op.h and call the
// launcher; the CPU reference takes the same struct with host pointers.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"

namespace trt_fastops::conv {

constexpr int CONV_MAX_SPATIAL = 3;

enum class Activation : int32_t { none = 0, relu = 1, silu = 2, gelu = 3 };

// All spatial arrays hold `spatial` meaningful entries (the rest are ignored).
// Layouts (contiguous):
//   Conv:          x [n, c_in, in...], w [c_out, c_in / group, kernel...], y [n, c_out, out...]
//   ConvTranspose: x [n, c_in, in...], w [c_in, c_out / group, kernel...], y [n, c_out, out...]
// bias: [c_out] or null. y = act(conv(x, w) + bias).
// pad_begin / pad_end are the explicit pads after auto_pad was resolved (conv_op.h does that);
// output_padding only for ConvTranspose. out[] is the already-inferred output size.
struct ConvParams {
  DType dtype = DType::f32;  // of x, w, bias, y (16-bit types accumulate in float32)
  bool transpose = false;
  int spatial = 2;  // 1, 2 or 3
  int64_t n = 0, c_in = 0, c_out = 0, group = 1;
  int64_t in[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t out[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t kernel[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t stride[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t dilation[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t pad_begin[CONV_MAX_SPATIAL] = {0, 0, 0};
  int64_t pad_end[CONV_MAX_SPATIAL] = {0, 0, 0};
  int64_t output_padding[CONV_MAX_SPATIAL] = {0, 0, 0};
  Activation activation = Activation::none;

  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
};

}  // namespace trt_fastops::conv
