#include "plugins/ort/ort_helpers.h"

#include <atomic>

namespace trt_fastops::ort {
namespace {

std::atomic<const OrtApi*> g_api{nullptr};

// True when the ORT call succeeded; a failure status is released.
bool succeeded(OrtStatus* st) {
  if (st == nullptr) return true;
  api()->ReleaseStatus(st);
  return false;
}

}  // namespace

void set_api(const OrtApi* a) { g_api.store(a, std::memory_order_release); }
const OrtApi* api() { return g_api.load(std::memory_order_acquire); }

OrtStatus* to_ort_status(const Status& st, OrtErrorCode code) {
  if (st.is_ok()) return nullptr;
  return api()->CreateStatus(code, st.message().c_str());
}

Status from_ort_status(OrtStatus* st, const char* what) {
  if (st == nullptr) return Status::ok();
  Status r = Status::errorf(what, " failed: ", api()->GetErrorMessage(st));
  api()->ReleaseStatus(st);
  return r;
}

#define TRT_FASTOPS_ORT_CALL(call) TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status((call), #call))

const char* element_type_name(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED: return "undefined";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "string";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "float64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "uint32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "uint64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64: return "complex64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128: return "complex128";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2: return "float8e5m2";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4: return "uint4";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4: return "int4";
  }
  return "an unknown element type";
}

ONNXTensorElementDataType element_type_of(DType t) {
  switch (t) {
    case DType::f32: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case DType::f16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case DType::bf16: return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

void set_desc_dtype(ONNXTensorElementDataType t, norm::TensorDesc* desc) {
  desc->unsupported_dtype.clear();
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: desc->dtype = DType::f32; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: desc->dtype = DType::f16; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: desc->dtype = DType::bf16; break;
    default: desc->unsupported_dtype = element_type_name(t); break;
  }
}

// Element type and dims of a tensor type-and-shape (not owned).
static Status fill_desc(const OrtTensorTypeAndShapeInfo* info, norm::TensorDesc* desc) {
  const OrtApi* a = api();
  ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
  TRT_FASTOPS_ORT_CALL(a->GetTensorElementType(info, &t));
  TRT_FASTOPS_ORT_CALL(a->GetDimensionsCount(info, &rank));
  desc->present = true;
  set_desc_dtype(t, desc);
  desc->dims.assign(rank, 0);
  if (rank > 0) TRT_FASTOPS_ORT_CALL(a->GetDimensions(info, desc->dims.data(), rank));
  for (auto& d : desc->dims)
    if (d < 0) d = -1;
  return Status::ok();
}

Status tensor_desc_from_value(const OrtValue* value, norm::TensorDesc* desc) {
  *desc = norm::TensorDesc();
  if (value == nullptr) return Status::ok();
  OrtTensorTypeAndShapeInfo* info = nullptr;
  TRT_FASTOPS_ORT_CALL(api()->GetTensorTypeAndShape(value, &info));
  Status st = fill_desc(info, desc);
  api()->ReleaseTensorTypeAndShapeInfo(info);
  return st;
}

Status kernel_info_input_name(const OrtKernelInfo* info, size_t index, std::string* name) {
  size_t size = 0;
  TRT_FASTOPS_ORT_CALL(api()->KernelInfo_GetInputName(info, index, nullptr, &size));
  std::string buf(size, '\0');
  if (size > 0) TRT_FASTOPS_ORT_CALL(api()->KernelInfo_GetInputName(info, index, buf.data(), &size));
  *name = std::string(buf.c_str());
  return Status::ok();
}

Status kernel_info_output_name(const OrtKernelInfo* info, size_t index, std::string* name) {
  size_t size = 0;
  TRT_FASTOPS_ORT_CALL(api()->KernelInfo_GetOutputName(info, index, nullptr, &size));
  std::string buf(size, '\0');
  if (size > 0) TRT_FASTOPS_ORT_CALL(api()->KernelInfo_GetOutputName(info, index, buf.data(), &size));
  *name = std::string(buf.c_str());
  return Status::ok();
}

Status tensor_desc_from_kernel_info(const OrtKernelInfo* info, size_t index, norm::TensorDesc* desc) {
  *desc = norm::TensorDesc();
  std::string name;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_input_name(info, index, &name));
  if (name.empty()) return Status::ok();  // omitted optional input
  OrtTypeInfo* type_info = nullptr;
  TRT_FASTOPS_ORT_CALL(api()->KernelInfo_GetInputTypeInfo(info, index, &type_info));
  const OrtTensorTypeAndShapeInfo* tensor_info = nullptr;
  Status st = from_ort_status(api()->CastTypeInfoToTensorInfo(type_info, &tensor_info),
                              "CastTypeInfoToTensorInfo");
  if (st.is_ok() && tensor_info == nullptr) {
    st = Status::errorf("input '", name, "' is not a tensor");
  }
  if (st.is_ok()) st = fill_desc(tensor_info, desc);
  api()->ReleaseTypeInfo(type_info);
  if (st.is_ok() && desc->dims.empty()) desc->rank_known = false;
  return st;
}

// ---------------------------------------------------------------------------
// Attributes

Status read_norm_attrs(const OrtKernelInfo* info, norm::NormOp op, norm::NormAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = norm::NormAttrs();
  for (const std::string& name : norm::norm_attr_names(op)) {
    int64_t i = 0;
    float f = 0.f;
    size_t size = 0;
    if (norm::norm_attr_is_int(name)) {
      if (succeeded(a->KernelInfoGetAttribute_int64(info, name.c_str(), &i))) {
        TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_int(op, name, i, attrs));
        continue;
      }
      if (succeeded(a->KernelInfoGetAttribute_float(info, name.c_str(), &f)))
        return norm::norm_attr_type_error(op, name, "a float");
    } else {
      if (succeeded(a->KernelInfoGetAttribute_float(info, name.c_str(), &f))) {
        TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_float(op, name, f, attrs));
        continue;
      }
      if (succeeded(a->KernelInfoGetAttribute_int64(info, name.c_str(), &i)))
        return norm::norm_attr_type_error(op, name, "an int");
    }
    if (succeeded(a->KernelInfoGetAttribute_string(info, name.c_str(), nullptr, &size)))
      return norm::norm_attr_type_error(op, name, "a string");
    // Absent (or a list/tensor, which ORT reports the same way): default.
  }
  return norm::validate_norm_attrs(op, *attrs);
}

Status read_norm_attrs(const OrtShapeInferContext* ctx, norm::NormOp op, norm::NormAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = norm::NormAttrs();
  for (const std::string& name : norm::norm_attr_names(op)) {
    const OrtOpAttr* attr = nullptr;
    if (!succeeded(a->ShapeInferContext_GetAttribute(ctx, name.c_str(), &attr)) || attr == nullptr)
      continue;  // absent: default
    int64_t i = 0;
    float f = 0.f;
    size_t out = 0;
    if (norm::norm_attr_is_int(name)) {
      if (succeeded(a->ReadOpAttr(attr, ORT_OP_ATTR_INT, &i, sizeof(i), &out))) {
        TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_int(op, name, i, attrs));
        continue;
      }
      return norm::norm_attr_type_error(op, name, "of another type");
    }
    if (succeeded(a->ReadOpAttr(attr, ORT_OP_ATTR_FLOAT, &f, sizeof(f), &out))) {
      TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_float(op, name, f, attrs));
      continue;
    }
    return norm::norm_attr_type_error(op, name, "of another type");
  }
  return norm::validate_norm_attrs(op, *attrs);
}

}  // namespace trt_fastops::ort
