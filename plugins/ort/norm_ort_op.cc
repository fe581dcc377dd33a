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
  const SlotLayout layout = slot_layout(sig);
  int64_t out_mask = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(read_slot_masks(info, layout, n_in, &k->input_slots, &out_mask));
  std::vector<TensorDesc> inputs;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_inputs(info, n_in, sig.name, &inputs));
  inputs_to_slots(k->input_slots, sig.num_inputs, &inputs, nullptr);
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_outputs_present(info, layout, n_out, out_mask, &k->outputs_present));
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
  inputs_to_slots(k.input_slots, sig.num_inputs, &inputs, buffers.inputs);

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
  // X stays slot 0, so x_symbols still hold; an unusable mask: kernel creation words the refusal.
  if (!shape_infer_inputs_to_slots(ctx, slot_layout(sig), &inputs)) return Status::ok();
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
