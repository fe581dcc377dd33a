// CUDA execution of the Conv / ConvTranspose ORT custom ops (the op itself,
// with schema, attributes, shape inference and output allocation, is
// conv_ort_op.cc; its CUDA-EP registrations call this once Y is allocated).
#pragma once

#include <onnxruntime_c_api.h>

#include <string>

#include "plugins/conv/conv.h"

namespace trt_fastops::ort {

// Runs p (device pointers: x, w, bias or null, y allocated by the op) on the
// kernel context's CUDA stream through the conv launcher (plan cache, cuDNN or
// trt_fastops' kernels); the workspace comes from ORT's allocator for X's
// device and is released after the enqueue (stream-ordered reuse). op_name:
// "Conv" or "ConvTranspose". Returns nullptr, or an ORT_EP_FAIL status whose
// message ends with " (node '<node_name>')" when node_name is not empty.
OrtStatus* conv_compute_cuda(OrtKernelContext* ctx, const conv::ConvParams& p, const char* op_name,
                             const std::string& node_name);

}  // namespace trt_fastops::ort
