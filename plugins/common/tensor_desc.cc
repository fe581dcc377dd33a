#include "plugins/common/tensor_desc.h"

namespace trt_fastops {

std::string format_dims(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    if (dims[i] < 0)
      s += "?";
    else
      str_append(s, dims[i]);
  }
  return s + "]";
}

const TensorDesc& desc_at(const std::vector<TensorDesc>& inputs, int idx) {
  static const TensorDesc absent;
  return idx >= 0 && size_t(idx) < inputs.size() ? inputs[size_t(idx)] : absent;
}

std::string slot_ref(const char* kind, const TensorSlot* slots, int idx) {
  return str_cat(kind, " '", slots[idx].name, "' (index ", idx, ")");
}

Status check_required_inputs(const char* op_name, const TensorSlot* slots, int num_slots,
                             const std::vector<TensorDesc>& inputs) {
  for (int i = 0; i < num_slots; ++i) {
    if (!slots[i].optional && !desc_at(inputs, i).present) {
      return Status::errorf(op_name, ": ", slot_ref("input", slots, i), " is missing; it is required");
    }
  }
  return Status::ok();
}

Status check_input_dtypes(const char* op_name, const TensorSlot* slots, int num_slots, int x,
                          const std::vector<TensorDesc>& inputs) {
  const TensorDesc& xd = desc_at(inputs, x);
  if (!xd.unsupported_dtype.empty()) {
    return Status::errorf(op_name, ": ", slot_ref("input", slots, x), " is ", xd.unsupported_dtype,
                          ", expected float32, float16 or bfloat16");
  }
  for (int i = 0; i < num_slots; ++i) {
    const TensorDesc& t = desc_at(inputs, i);
    if (i == x || !t.present) continue;
    if (!t.unsupported_dtype.empty() || t.dtype != xd.dtype) {
      return Status::errorf(op_name, ": ", slot_ref("input", slots, i), " is ",
                            t.unsupported_dtype.empty() ? dtype_name(t.dtype) : t.unsupported_dtype,
                            ", expected ", dtype_name(xd.dtype), " (the dtype of X)");
    }
  }
  return Status::ok();
}

Status unknown_attr_error(const char* op_name, const std::string& name, const std::vector<std::string>& known) {
  std::string list;
  for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
  return Status::errorf(op_name, ": unknown attribute '", name, "', expected one of ", list);
}

Status attr_kind_error(const char* op_name, const std::string& name, const char* found_kind,
                       const char* expected_kind) {
  return Status::errorf(op_name, ": attribute '", name, "' is ", found_kind, ", expected ", expected_kind);
}

int64_t dims_product(const std::vector<int64_t>& dims, size_t begin, size_t end, bool* overflow) {
  bool unknown = false;
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i] == 0) return 0;
    if (dims[i] < 0) {
      unknown = true;
      continue;
    }
    if (__builtin_mul_overflow(n, dims[i], &n)) *overflow = true;
  }
  return unknown ? -1 : n;
}

}  // namespace trt_fastops
