#include "plugins/ort/ort_helpers.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

namespace trt_fastops::ort {
namespace {

std::atomic<const OrtApi*> g_api{nullptr};

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

bool succeeded(OrtStatus* st) {
  if (st == nullptr) return true;
  api()->ReleaseStatus(st);
  return false;
}

OrtStatus* node_error(OrtErrorCode code, const std::string& msg, const std::string& node_name) {
  if (node_name.empty()) return api()->CreateStatus(code, msg.c_str());
  return api()->CreateStatus(code, str_cat(msg, " (node '", node_name, "')").c_str());
}

OrtStatus* invalid_argument(const Status& st, const std::string& node_name) {
  return node_error(ORT_INVALID_ARGUMENT, st.message(), node_name);
}

OrtStatus* internal_error(const char* op_name, const char* what) {
  return api()->CreateStatus(ORT_FAIL, str_cat(op_name, ": internal error: ", what).c_str());
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

void set_desc_dtype(ONNXTensorElementDataType t, TensorDesc* desc) {
  desc->unsupported_dtype.clear();
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: desc->dtype = DType::f32; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: desc->dtype = DType::f16; break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: desc->dtype = DType::bf16; break;
    default: desc->unsupported_dtype = element_type_name(t); break;
  }
}

// Element type and dims of a tensor type-and-shape (not owned).
static Status fill_desc(const OrtTensorTypeAndShapeInfo* info, TensorDesc* desc) {
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

Status tensor_desc_from_value(const OrtValue* value, TensorDesc* desc) {
  *desc = TensorDesc();
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

Status tensor_desc_from_kernel_info(const OrtKernelInfo* info, size_t index, TensorDesc* desc) {
  *desc = TensorDesc();
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

Status kernel_info_counts(const OrtKernelInfo* info, size_t* n_inputs, size_t* n_outputs) {
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(api()->KernelInfo_GetInputCount(info, n_inputs), "KernelInfo_GetInputCount"));
  return from_ort_status(api()->KernelInfo_GetOutputCount(info, n_outputs), "KernelInfo_GetOutputCount");
}

std::string kernel_info_node_name(const OrtKernelInfo* info) {
  const OrtApi* a = api();
  std::string name;
  size_t size = 0;
  OrtStatus* st = a->KernelInfo_GetNodeName(info, nullptr, &size);
  if (st == nullptr && size > 1) {
    std::string buf(size, '\0');
    st = a->KernelInfo_GetNodeName(info, buf.data(), &size);
    if (st == nullptr) name = buf.c_str();
  }
  if (st) a->ReleaseStatus(st);  // the name only decorates messages
  return name;
}

Status kernel_info_inputs(const OrtKernelInfo* info, size_t n_inputs, const char* op_name,
                          std::vector<TensorDesc>* descs) {
  descs->assign(n_inputs, TensorDesc());
  for (size_t i = 0; i < n_inputs; ++i) {
    Status s = tensor_desc_from_kernel_info(info, i, &(*descs)[i]);
    if (!s.is_ok()) return Status::errorf(op_name, ": ", s.message());
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Compute

Status context_inputs(OrtKernelContext* ctx, size_t max_inputs, std::vector<TensorDesc>* descs, const void** data) {
  const OrtApi* a = api();
  size_t n_in = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelContext_GetInputCount(ctx, &n_in), "KernelContext_GetInputCount"));
  n_in = std::min(n_in, max_inputs);
  descs->assign(n_in, TensorDesc());
  for (size_t i = 0; i < n_in; ++i) {
    const OrtValue* v = nullptr;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelContext_GetInput(ctx, i, &v), "KernelContext_GetInput"));
    TRT_FASTOPS_RETURN_IF_ERROR(tensor_desc_from_value(v, &(*descs)[i]));
    if (v != nullptr) {
      void* p = nullptr;
      // The C API (v21) has no const accessor; the data is only read.
      TRT_FASTOPS_RETURN_IF_ERROR(
          from_ort_status(a->GetTensorMutableData(const_cast<OrtValue*>(v), &p), "GetTensorMutableData"));
      data[i] = p;
    }
  }
  return Status::ok();
}

Status context_output(OrtKernelContext* ctx, size_t index, const std::vector<int64_t>& dims, void** data) {
  const OrtApi* a = api();
  OrtValue* v = nullptr;
  TRT_FASTOPS_RETURN_IF_ERROR(
      from_ort_status(a->KernelContext_GetOutput(ctx, index, dims.data(), dims.size(), &v), "KernelContext_GetOutput"));
  if (v == nullptr) return Status::ok();  // ORT has no value for it after all
  return from_ort_status(a->GetTensorMutableData(v, data), "GetTensorMutableData");
}

// ---------------------------------------------------------------------------
// Shape inference

Status shape_infer_inputs(OrtShapeInferContext* ctx, size_t max_inputs, int x, std::vector<TensorDesc>* descs,
                          std::vector<std::string>* x_symbols) {
  const OrtApi* a = api();
  x_symbols->clear();
  size_t n_in = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(
      from_ort_status(a->ShapeInferContext_GetInputCount(ctx, &n_in), "ShapeInferContext_GetInputCount"));
  n_in = std::min(n_in, max_inputs);
  descs->assign(n_in, TensorDesc());
  for (size_t i = 0; i < n_in; ++i) {
    OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by ctx
    TRT_FASTOPS_RETURN_IF_ERROR(
        from_ort_status(a->ShapeInferContext_GetInputTypeShape(ctx, i, &info), "ShapeInferContext_GetInputTypeShape"));
    ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetTensorElementType(info, &t), "GetTensorElementType"));
    if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) continue;  // omitted optional input
    TensorDesc& d = (*descs)[i];
    d.present = true;
    set_desc_dtype(t, &d);
    size_t rank = 0;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetDimensionsCount(info, &rank), "GetDimensionsCount"));
    d.dims.assign(rank, 0);
    if (rank > 0)
      TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetDimensions(info, d.dims.data(), rank), "GetDimensions"));
    for (auto& v : d.dims)
      if (v < 0) v = -1;
    d.rank_known = rank > 0;  // a missing shape reads as rank 0
    if (int(i) == x && rank > 0) {
      std::vector<const char*> syms(rank, nullptr);
      TRT_FASTOPS_RETURN_IF_ERROR(
          from_ort_status(a->GetSymbolicDimensions(info, syms.data(), rank), "GetSymbolicDimensions"));
      for (const char* s : syms) x_symbols->emplace_back(s ? s : "");
    }
  }
  return Status::ok();
}

std::string fresh_dim_symbol() {
  static std::atomic<uint64_t> next{0};
  return str_cat("trt_fastops_unk_", next.fetch_add(1, std::memory_order_relaxed));
}

Status set_shape_infer_output(OrtShapeInferContext* ctx, size_t index, DType dtype, const std::vector<int64_t>& dims,
                              const std::vector<const char*>& names) {
  const OrtApi* a = api();
  OrtTensorTypeAndShapeInfo* y = nullptr;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->CreateTensorTypeAndShapeInfo(&y), "CreateTensorTypeAndShapeInfo"));
  Status st = from_ort_status(a->SetTensorElementType(y, element_type_of(dtype)), "SetTensorElementType");
  if (st.is_ok()) st = from_ort_status(a->SetDimensions(y, dims.data(), dims.size()), "SetDimensions");
  // The C API takes the names non-const; it only reads them.
  if (st.is_ok())
    st = from_ort_status(a->SetSymbolicDimensions(y, const_cast<const char**>(names.data()), names.size()),
                         "SetSymbolicDimensions");
  if (st.is_ok())
    st = from_ort_status(a->ShapeInferContext_SetOutputTypeShape(ctx, index, y), "ShapeInferContext_SetOutputTypeShape");
  a->ReleaseTensorTypeAndShapeInfo(y);
  return st;
}

// ---------------------------------------------------------------------------
// 'inputs' / 'outputs' slot masks

namespace {

constexpr const char* ATTR_INPUTS = "inputs";
constexpr const char* ATTR_OUTPUTS = "outputs";

// *mask = -1 when the attribute is absent.
Status read_mask_attr(const OrtKernelInfo* info, const SlotLayout& layout, const char* name, int64_t* mask) {
  const OrtApi* a = api();
  *mask = -1;
  int64_t i = 0;
  float f = 0.f;
  size_t size = 0;
  const bool inputs = std::string(name) == ATTR_INPUTS;
  const int count = inputs ? layout.num_inputs : layout.num_outputs;
  if (succeeded(a->KernelInfoGetAttribute_int64(info, name, &i))) {
    if (i < 0 || i >= (int64_t{1} << count) || (!inputs && !(i & 1))) {
      return Status::errorf(layout.op_name, ": attribute '", name, "' is ", i, ", expected a bitmask over the ", count,
                            " ", inputs ? "input" : "output", " slots", inputs ? "" : " with bit 0 (Y) set");
    }
    *mask = i;
    return Status::ok();
  }
  const char* found = nullptr;
  if (succeeded(a->KernelInfoGetAttribute_float(info, name, &f)))
    found = "a float";
  else if (succeeded(a->KernelInfoGetAttribute_string(info, name, nullptr, &size)))
    found = "a string";
  if (found != nullptr) {
    return Status::errorf(layout.op_name, ": attribute '", name, "' is ", found, ", expected an int (a bitmask of ",
                          inputs ? "input" : "output", " slots)");
  }
  return Status::ok();  // absent
}

// Position -> slot for a node with n_in inputs; mask < 0 (no attribute):
// empty, i.e. positions are slots.
Status input_slots_from_mask(const SlotLayout& layout, int64_t mask, size_t n_in, std::vector<int>* slots) {
  slots->clear();
  if (mask < 0) return Status::ok();
  for (int s = 0; s < layout.num_inputs; ++s)
    if (mask >> s & 1) slots->push_back(s);
  if (slots->size() != n_in) {
    return Status::errorf(layout.op_name, ": the node has ", n_in, " inputs, but attribute 'inputs' = ", mask,
                          " names ", slots->size());
  }
  return Status::ok();
}

}  // namespace

Status read_slot_masks(const OrtKernelInfo* info, const SlotLayout& layout, size_t n_in, std::vector<int>* input_slots,
                       int64_t* outputs_mask) {
  int64_t in_mask = -1;
  *outputs_mask = -1;
  input_slots->clear();
  TRT_FASTOPS_RETURN_IF_ERROR(read_mask_attr(info, layout, ATTR_INPUTS, &in_mask));
  TRT_FASTOPS_RETURN_IF_ERROR(read_mask_attr(info, layout, ATTR_OUTPUTS, outputs_mask));
  return input_slots_from_mask(layout, in_mask, n_in, input_slots);
}

Status kernel_info_outputs_present(const OrtKernelInfo* info, const SlotLayout& layout, size_t n_out,
                                   int64_t outputs_mask, std::vector<bool>* present) {
  present->assign(n_out, false);
  for (size_t i = 0; i < n_out; ++i) {
    std::string name;
    TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_output_name(info, i, &name));
    (*present)[i] = !name.empty();
    if ((*present)[i] && outputs_mask >= 0 && !(outputs_mask >> i & 1)) {
      return Status::errorf(layout.op_name, ": ", slot_ref("output", layout.outputs, int(i)),
                            " is used but attribute 'outputs' = ", outputs_mask, " does not include it");
    }
  }
  return Status::ok();
}

void inputs_to_slots(const std::vector<int>& input_slots, int num_inputs, std::vector<TensorDesc>* descs,
                     const void** data) {
  if (input_slots.empty()) return;
  std::vector<TensorDesc> by_slot(static_cast<size_t>(num_inputs));
  std::vector<const void*> ptrs(static_cast<size_t>(num_inputs), nullptr);
  for (size_t k = 0; k < descs->size() && k < input_slots.size(); ++k) {
    by_slot[size_t(input_slots[k])] = (*descs)[k];
    if (data != nullptr) ptrs[size_t(input_slots[k])] = data[k];
  }
  *descs = std::move(by_slot);
  if (data != nullptr)
    for (int s = 0; s < num_inputs; ++s) data[s] = ptrs[size_t(s)];
}

bool shape_infer_inputs_to_slots(OrtShapeInferContext* ctx, const SlotLayout& layout, std::vector<TensorDesc>* descs) {
  const OrtOpAttr* mask_attr = nullptr;
  if (!succeeded(api()->ShapeInferContext_GetAttribute(ctx, ATTR_INPUTS, &mask_attr)) || mask_attr == nullptr)
    return true;  // no 'inputs': positions are slots
  int64_t mask = 0;
  size_t out = 0;
  std::vector<int> slots;
  if (!succeeded(api()->ReadOpAttr(mask_attr, ORT_OP_ATTR_INT, &mask, sizeof(mask), &out)) || mask < 0 ||
      mask >= (int64_t{1} << layout.num_inputs) || !input_slots_from_mask(layout, mask, descs->size(), &slots).is_ok()) {
    return false;
  }
  inputs_to_slots(slots, layout.num_inputs, descs, nullptr);
  return true;
}

KernelScratch::~KernelScratch() {
  for (void* b : blocks_)
    if (b != nullptr) allocator_->Free(allocator_, b);
  if (allocator_ != nullptr) api()->ReleaseAllocator(allocator_);
}

Status KernelScratch::alloc(size_t bytes, const std::string& what, void** data) {
  *data = nullptr;
  size_t slot = 0;
  while (slot < MAX_BLOCKS && blocks_[slot] != nullptr) ++slot;
  if (slot == MAX_BLOCKS) return Status::errorf(op_, ": internal error: more than ", MAX_BLOCKS, " scratch blocks asked for");
  const OrtApi* a = api();
  if (allocator_ == nullptr) {
    const OrtValue* v = nullptr;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelContext_GetInput(ctx_, input_, &v), "KernelContext_GetInput"));
    if (v == nullptr) return Status::errorf(op_, ": internal error: input ", input_, " has no value");
    const OrtMemoryInfo* info = nullptr;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetTensorMemoryInfo(v, &info), "GetTensorMemoryInfo"));
    TRT_FASTOPS_RETURN_IF_ERROR(
        from_ort_status(a->KernelContext_GetAllocator(ctx_, info, &allocator_), "KernelContext_GetAllocator"));
  }
  blocks_[slot] = allocator_->Alloc(allocator_, bytes);
  if (blocks_[slot] == nullptr) return Status::errorf(op_, ": ORT's allocator returned no memory for a ", what);
  *data = blocks_[slot];
  return Status::ok();
}

}  // namespace trt_fastops::ort
