// ORT custom ops for Conv / ConvTranspose (domain trt_fastops). One
// ConvCustomOp is one registration: (op, execution provider, element type of
// X); each op is registered once per supported dtype plus one type-agnostic
// catch-all, for the same reasons as the norm ops (see norm_ort_op.h): Y's
// type follows X, and a W/B of the wrong dtype or an unsupported X reaches our
// own check and message instead of ORT's "no kernel def matches".
//
// Schema, attributes, shape inference, output allocation and the ConvParams
// come from here for both EPs. The CPU registration runs the reference loop
// (plugins/conv/conv_cpu.h) over ORT's intra-op thread pool; the CUDA
// registration hands the finished ConvParams (device pointers) to
//   OrtStatus* conv_compute_cuda(OrtKernelContext*, const conv::ConvParams&,
//                                const char* op_name, const std::string& node_name)
// declared in plugins/ort/conv_ort_cuda.h (the CUDA side: cudnn-frontend
// plans, plan cache, fallback kernel, workspace from ORT).
#pragma once

#include <onnxruntime_c_api.h>

#include "plugins/conv/conv_op.h"

namespace trt_fastops::ort {

struct ConvCustomOp : OrtCustomOp {
  conv::ConvOp op = conv::ConvOp::conv;
  bool cuda = false;  // CUDAExecutionProvider, else CPUExecutionProvider
  ONNXTensorElementDataType x_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;  // UNDEFINED: catch-all
};

void init_conv_custom_op(ConvCustomOp* custom_op, conv::ConvOp op, bool cuda, ONNXTensorElementDataType x_type);

}  // namespace trt_fastops::ort
