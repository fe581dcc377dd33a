// ORT custom ops for LayerNorm / SkipLayerNorm / RMSNorm. One NormCustomOp is
// one registration: (op, execution provider, element type of X).
//
// Why several registrations per op and EP: ORT infers the element type of a
// type-agnostic (UNDEFINED) output from the *last* type-agnostic input, not
// from X. So each op is registered once per supported dtype with X, Y and Sum
// typed and every other input type-agnostic (Y follows X, and a Scale of the
// wrong dtype reaches our own check and message), plus one fully
// type-agnostic catch-all, so that an unsupported X (float64, int32) also
// reaches our refusal instead of ORT's "no kernel def matches". All
// registrations share the same callbacks.
#pragma once

#include <onnxruntime_c_api.h>

#include "plugins/norm/norm_op.h"

namespace trt_fastops::ort {

struct NormCustomOp : OrtCustomOp {
  norm::NormOp op = norm::NormOp::layer_norm;
  bool cuda = false;  // CUDAExecutionProvider, else CPUExecutionProvider
  ONNXTensorElementDataType x_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;  // UNDEFINED: catch-all
};

void init_norm_custom_op(NormCustomOp* custom_op, norm::NormOp op, bool cuda,
                         ONNXTensorElementDataType x_type);

}  // namespace trt_fastops::ort
