// Plain-C-API helpers shared by the ORT custom ops: the OrtApi pointer,
// Status -> OrtStatus*, ONNX element type -> DType, and TensorDesc /
// attribute readers. No exceptions cross into ORT: everything returns a
// Status or an OrtStatus*.
#pragma once

#include <onnxruntime_c_api.h>

#include <string>
#include <vector>

#include "plugins/common/status.h"
#include "plugins/norm/norm_op.h"

namespace trt_fastops::ort {

// Set once by RegisterCustomOps (the same value for the whole process).
void set_api(const OrtApi* api);
const OrtApi* api();

// Status -> OrtStatus* (nullptr for ok) with the given code.
OrtStatus* to_ort_status(const Status& st, OrtErrorCode code = ORT_INVALID_ARGUMENT);
// OrtStatus* -> Status, releasing it; `what` names the failed ORT call.
Status from_ort_status(OrtStatus* st, const char* what);

// "float64", "int32", ... for messages.
const char* element_type_name(ONNXTensorElementDataType t);
ONNXTensorElementDataType element_type_of(DType t);
// Fills desc->dtype, or desc->unsupported_dtype with the type's name.
void set_desc_dtype(ONNXTensorElementDataType t, norm::TensorDesc* desc);

// Run time: an input OrtValue (nullptr = absent) -> TensorDesc.
Status tensor_desc_from_value(const OrtValue* value, norm::TensorDesc* desc);

// Graph time: what ORT knows about a node input at kernel creation. Unknown
// dims become -1; rank 0 counts as unknown (ORT reports a missing shape as
// rank 0, so a real scalar is only refused at run time).
Status tensor_desc_from_kernel_info(const OrtKernelInfo* info, size_t index, norm::TensorDesc* desc);

// Node attributes, absent -> default. Wrong kinds are refused.
Status read_norm_attrs(const OrtKernelInfo* info, norm::NormOp op, norm::NormAttrs* attrs);
Status read_norm_attrs(const OrtShapeInferContext* ctx, norm::NormOp op, norm::NormAttrs* attrs);

// Node input/output names ("" for an omitted optional one).
Status kernel_info_input_name(const OrtKernelInfo* info, size_t index, std::string* name);
Status kernel_info_output_name(const OrtKernelInfo* info, size_t index, std::string* name);

}  // namespace trt_fastops::ort
