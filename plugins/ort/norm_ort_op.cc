#include "plugins/ort/norm_ort_op.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "plugins/common/cuda_status.h"
#include "plugins/norm/norm.h"
#include "plugins/norm/norm_cpu.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {
namespace {

using norm::NormOp;
using norm::NormParams;
using norm::NormSignature;

// ---------------------------------------------------------------------------
// Attributes, absent -> default. Wrong kinds are refused.

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

// ---------------------------------------------------------------------------
// 'inputs' / 'outputs': bitmasks of the op's input / output slots (the
// TensorRT plugin's fields, plugins/trt/README.md). ORT maps node inputs by
// position, so with 'inputs' given, node input k is the k-th set slot.

constexpr const char* ATTR_INPUTS = "inputs";
constexpr const char* ATTR_OUTPUTS = "outputs";

// *mask = -1 when the attribute is absent.
Status read_mask_attr(const OrtKernelInfo* info, const NormSignature& sig, const char* name, int64_t* mask) {
  const OrtApi* a = api();
  *mask = -1;
  int64_t i = 0;
  float f = 0.f;
  size_t size = 0;
  const bool inputs = std::string(name) == ATTR_INPUTS;
  const int count = inputs ? sig.num_inputs : sig.num_outputs;
  if (succeeded(a->KernelInfoGetAttribute_int64(info, name, &i))) {
    if (i < 0 || i >= (int64_t{1} << count) || (!inputs && !(i & 1))) {
      return Status::errorf(sig.name, ": attribute '", name, "' is ", i, ", expected a bitmask over the ", count,
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
    return Status::errorf(sig.name, ": attribute '", name, "' is ", found, ", expected an int (a bitmask of ",
                          inputs ? "input" : "output", " slots)");
  }
  return Status::ok();  // absent
}

// Position -> slot for a node with n_in inputs; mask < 0 (no attribute):
// empty, i.e. positions are slots.
Status input_slots_from_mask(const NormSignature& sig, int64_t mask, size_t n_in, std::vector<int>* slots) {
  slots->clear();
  if (mask < 0) return Status::ok();
  for (int s = 0; s < sig.num_inputs; ++s)
    if (mask >> s & 1) slots->push_back(s);
  if (slots->size() != n_in) {
    return Status::errorf(sig.name, ": the node has ", n_in, " inputs, but attribute 'inputs' = ", mask, " names ",
                          slots->size());
  }
  return Status::ok();
}

// Descs (and data pointers) by position -> by slot; unnamed slots stay absent.
// No slots (no 'inputs' attribute): left as they are.
void to_slots(const std::vector<int>& slots, const NormSignature& sig, std::vector<TensorDesc>* descs,
              const void** data) {
  if (slots.empty()) return;
  std::vector<TensorDesc> by_slot(size_t(sig.num_inputs), TensorDesc());
  const void* ptrs[norm::NORM_MAX_INPUTS] = {};
  for (size_t k = 0; k < descs->size() && k < slots.size(); ++k) {
    by_slot[size_t(slots[k])] = (*descs)[k];
    if (data != nullptr) ptrs[slots[k]] = data[k];
  }
  *descs = std::move(by_slot);
  if (data != nullptr)
    for (int s = 0; s < norm::NORM_MAX_INPUTS; ++s) data[s] = ptrs[s];
}

// CPU reference, split over rows through ORT's intra-op thread pool.
Status run_cpu(OrtKernelContext* ctx, const NormParams& p) {
  constexpr int64_t ELEMS_PER_CHUNK = 1 << 15;  // keeps per-task overhead small
  TRT_FASTOPS_RETURN_IF_ERROR(norm::run_norm_cpu_rows(p, 0, 0));  // validates params
  const int64_t rows_per_chunk = std::max<int64_t>(1, ELEMS_PER_CHUNK / p.cols);
  return run_chunked(
      ctx, p.rows, rows_per_chunk, [&p](int64_t begin, int64_t end) { return norm::run_norm_cpu_rows(p, begin, end); },
      [&p] { return norm::run_norm_cpu(p); });
}

}  // namespace

ONNXTensorElementDataType NormFamily::output_type(const Signature& sig, size_t i, ONNXTensorElementDataType x_type) {
  if (int(i) == sig.mean || int(i) == sig.inv_std_dev) return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  return x_type;  // Y, Sum: X's dtype
}

Status NormFamily::create_kernel(const OrtKernelInfo* info, Kernel* k) {
  const NormSignature& sig = norm::norm_signature(k->op);
  TRT_FASTOPS_RETURN_IF_ERROR(read_norm_attrs(info, k->op, &k->attrs));

  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_counts(info, &n_in, &n_out));
  if (n_in > size_t(sig.num_inputs) || n_out > size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": node has ", n_in, " inputs and ", n_out, " outputs, expected at most ",
                          sig.num_inputs, " and ", sig.num_outputs);
  }
  int64_t in_mask = -1, out_mask = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(read_mask_attr(info, sig, ATTR_INPUTS, &in_mask));
  TRT_FASTOPS_RETURN_IF_ERROR(read_mask_attr(info, sig, ATTR_OUTPUTS, &out_mask));
  TRT_FASTOPS_RETURN_IF_ERROR(input_slots_from_mask(sig, in_mask, n_in, &k->input_slots));
  std::vector<TensorDesc> inputs;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_inputs(info, n_in, sig.name, &inputs));
  to_slots(k->input_slots, sig, &inputs, nullptr);
  k->outputs_present.assign(n_out, false);
  for (size_t i = 0; i < n_out; ++i) {
    std::string name;
    TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_output_name(info, i, &name));
    k->outputs_present[i] = !name.empty();
    // TensorRT would leave an output outside 'outputs' unwritten: refuse the mismatch here too.
    if (k->outputs_present[i] && out_mask >= 0 && !(out_mask >> i & 1)) {
      return Status::errorf(sig.name, ": ", output_ref(sig, int(i)), " is used but attribute 'outputs' = ",
                            out_mask, " does not include it");
    }
  }
  norm::NormShapes shapes;
  return norm::infer_norm(k->op, k->attrs, inputs, k->outputs_present, &shapes);
}

OrtStatus* NormFamily::compute(const Kernel& k, OrtKernelContext* ctx) {
  const NormSignature& sig = norm::norm_signature(k.op);
  auto fail = [&](const Status& st) { return invalid_argument(st, k.node_name); };

  std::vector<TensorDesc> inputs;
  norm::NormBuffers buffers;
  Status s = context_inputs(ctx, size_t(sig.num_inputs), &inputs, buffers.inputs);
  if (!s.is_ok()) return fail(s);
  to_slots(k.input_slots, sig, &inputs, buffers.inputs);

  norm::NormShapes shapes;
  s = norm::infer_norm(k.op, k.attrs, inputs, k.outputs_present, &shapes);
  if (!s.is_ok()) return fail(s);

  for (size_t i = 0; i < k.outputs_present.size(); ++i) {
    if (!k.outputs_present[i]) continue;
    const bool stat = int(i) == sig.mean || int(i) == sig.inv_std_dev;
    s = context_output(ctx, i, stat ? shapes.stat_dims : shapes.y_dims, &buffers.outputs[i]);
    if (!s.is_ok()) return fail(s);
  }

  NormParams p;
  s = norm::make_norm_params(k.op, k.attrs, shapes, buffers, &p);
  if (!s.is_ok()) return fail(s);

  if (!k.cuda) {
    s = run_cpu(ctx, p);
    return s.is_ok() ? nullptr : fail(s);
  }

  void* stream = nullptr;
  s = from_ort_status(api()->KernelContext_GetGPUComputeStream(ctx, &stream), "KernelContext_GetGPUComputeStream");
  if (!s.is_ok()) return fail(s);
  // Enqueue only: no allocation, no synchronisation (CUDA-graph capture safe).
  cudaError_t err = norm::launch_norm(p, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    return node_error(ORT_EP_FAIL,
                      str_cat(sig.name, ": CUDA kernel ", norm::norm_kernel_name(p), " failed: ", cuda_error_string(err)),
                      k.node_name);
  }
  return nullptr;
}

// Shape inference: validates what it can and gives Y (index 0, always
// present) its shape. Other outputs are left alone: this context cannot tell
// how many outputs the node has.
Status NormFamily::infer_shapes(Op op, OrtShapeInferContext* ctx) {
  const NormSignature& sig = norm::norm_signature(op);
  std::vector<TensorDesc> inputs;
  std::vector<std::string> x_symbols;
  TRT_FASTOPS_RETURN_IF_ERROR(shape_infer_inputs(ctx, size_t(sig.num_inputs), sig.x, &inputs, &x_symbols));
  const OrtOpAttr* mask_attr = nullptr;
  if (succeeded(api()->ShapeInferContext_GetAttribute(ctx, ATTR_INPUTS, &mask_attr)) && mask_attr != nullptr) {
    int64_t mask = 0;
    size_t out = 0;
    std::vector<int> slots;
    if (!succeeded(api()->ReadOpAttr(mask_attr, ORT_OP_ATTR_INT, &mask, sizeof(mask), &out)) || mask < 0 ||
        mask >= (int64_t{1} << sig.num_inputs) ||
        !input_slots_from_mask(sig, mask, inputs.size(), &slots).is_ok()) {
      return Status::ok();  // kernel creation words the refusal
    }
    to_slots(slots, sig, &inputs, nullptr);  // X stays slot 0, so x_symbols still hold
  }
  norm::NormAttrs attrs;
  TRT_FASTOPS_RETURN_IF_ERROR(read_norm_attrs(ctx, op, &attrs));
  norm::NormShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_norm(op, attrs, inputs, {}, &shapes));
  if (shapes.rank <= 0) return Status::ok();  // X's rank unknown: nothing to say

  // Y = X's shape; symbolic dims keep their names. A dim that is neither
  // known nor named cannot be expressed through this API: leave Y alone.
  std::vector<const char*> names(shapes.y_dims.size(), "");
  for (size_t i = 0; i < shapes.y_dims.size(); ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (i >= x_symbols.size() || x_symbols[i].empty()) return Status::ok();
    names[i] = x_symbols[i].c_str();
  }
  return set_shape_infer_output(ctx, size_t(sig.y), shapes.dtype, shapes.y_dims, names);
}

}  // namespace trt_fastops::ort
