#include "plugins/ort/dense_ort_op.h"

#include <algorithm>
#include <string>
#include <vector>

#include "plugins/dense/dense.h"
#include "plugins/dense/dense_cpu.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {
namespace {

using dense::DenseParams;
using dense::DenseSignature;

// Attributes. ORT cannot list a node's attributes, so each known name is
// probed: as a string (its kind), then as an int or a float (for the message).
// Absent: the default.
Status read_dense_attrs(const OrtKernelInfo* info, dense::DenseAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = dense::DenseAttrs();
  for (const std::string& name : dense::dense_attr_names()) {
    const char* n = name.c_str();
    size_t size = 0;
    int64_t i = 0;
    float f = 0.f;
    if (succeeded(a->KernelInfoGetAttribute_string(info, n, nullptr, &size))) {
      std::string buf(size, '\0');
      if (size > 0) {
        TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfoGetAttribute_string(info, n, buf.data(), &size),
                                                    "KernelInfoGetAttribute_string"));
      }
      TRT_FASTOPS_RETURN_IF_ERROR(dense::set_dense_attr_string(name, std::string(buf.c_str()), attrs));
      continue;
    }
    if (succeeded(a->KernelInfoGetAttribute_int64(info, n, &i))) return dense::set_dense_attr_int(name, i, attrs);
    if (succeeded(a->KernelInfoGetAttribute_float(info, n, &f))) return dense::set_dense_attr_float(name, f, attrs);
    if (succeeded(a->KernelInfoGetAttributeArray_int64(info, n, nullptr, &size)) && size > 0)
      return dense::dense_attr_type_error(name, "a list of ints");
  }
  return Status::ok();
}

// CPU reference, split over rows of Y through ORT's intra-op thread pool.
Status run_cpu(OrtKernelContext* ctx, const DenseParams& p) {
  constexpr int64_t MACS_PER_CHUNK = 1 << 18;  // keeps per-task overhead small
  TRT_FASTOPS_RETURN_IF_ERROR(dense::run_dense_cpu_rows(p, 0, 0));  // validates params
  const int64_t cost = std::max<int64_t>(1, p.n * std::max<int64_t>(p.k, 1));
  const int64_t rows_per_chunk = std::max<int64_t>(1, MACS_PER_CHUNK / cost);
  return run_chunked(
      ctx, p.m, rows_per_chunk, [&p](int64_t begin, int64_t end) { return dense::run_dense_cpu_rows(p, begin, end); },
      [&p] { return dense::run_dense_cpu(p); });
}

OrtStatus* run_cuda(const DenseFamily::Kernel& k, OrtKernelContext* ctx, DenseParams p) {
  auto fail = [&](const Status& st) { return node_error(ORT_EP_FAIL, st.message(), k.node_name); };
  void* stream = nullptr;
  Status s = from_ort_status(api()->KernelContext_GetGPUComputeStream(ctx, &stream), "KernelContext_GetGPUComputeStream");
  if (!s.is_ok()) return fail(Status::errorf("Dense: getting the compute stream: ", s.message()));
  KernelScratch scratch(ctx, dense::DENSE_X, "Dense");  // on X's device
  if (p.m > 0 && p.n > 0 && p.k > 0) {  // only the GEMMs use it (cuBLASLt, CUTLASS)
    const size_t bytes = dense::dense_workspace_bytes();
    s = scratch.alloc(bytes, std::to_string(bytes) + "-byte GEMM workspace", &p.workspace);
    if (!s.is_ok()) return fail(s);
    p.workspace_bytes = bytes;
  }
  // Enqueue only: no synchronisation (CUDA-graph capture safe).
  s = dense::launch_dense(p, static_cast<cudaStream_t>(stream));
  return s.is_ok() ? nullptr : fail(s);
}

}  // namespace

Status DenseFamily::create_kernel(const OrtKernelInfo* info, Kernel* k) {
  const DenseSignature& sig = dense::dense_signature(k->op);
  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_counts(info, &n_in, &n_out));
  if (n_in < 2 || n_in > size_t(sig.num_inputs) || n_out != size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": node has ", n_in, " inputs and ", n_out,
                          " outputs, expected 2 or 3 inputs (X, W, bias?) and 1 output (Y)");
  }
  // 'inputs' / 'outputs' as every op reads them. With X, W, bias? and Y alone a
  // valid mask always equals the positions; reading it refuses one that
  // contradicts the node.
  int64_t out_mask = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(read_slot_masks(info, slot_layout(sig), n_in, &k->input_slots, &out_mask));
  std::vector<TensorDesc> inputs;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_inputs(info, n_in, sig.name, &inputs));
  inputs_to_slots(k->input_slots, sig.num_inputs, &inputs, nullptr);
  TRT_FASTOPS_RETURN_IF_ERROR(read_dense_attrs(info, &k->attrs));
  dense::DenseShapes shapes;
  return dense::infer_dense(inputs, &shapes);
}

OrtStatus* DenseFamily::compute(const Kernel& k, OrtKernelContext* ctx) {
  const DenseSignature& sig = dense::dense_signature(k.op);
  auto fail = [&](const Status& st) { return invalid_argument(st, k.node_name); };

  std::vector<TensorDesc> inputs;
  dense::DenseBuffers buffers;
  Status s = context_inputs(ctx, size_t(sig.num_inputs), &inputs, buffers.inputs);
  if (!s.is_ok()) return fail(s);
  inputs_to_slots(k.input_slots, sig.num_inputs, &inputs, buffers.inputs);

  dense::DenseShapes shapes;
  s = dense::infer_dense(inputs, &shapes);
  if (!s.is_ok()) return fail(s);

  s = context_output(ctx, size_t(sig.y), shapes.y_dims, &buffers.outputs[sig.y]);
  if (!s.is_ok()) return fail(s);

  DenseParams p;
  s = dense::make_dense_params(shapes, k.attrs, buffers, &p);
  if (!s.is_ok()) return fail(s);

  if (k.cuda) return run_cuda(k, ctx, p);
  s = run_cpu(ctx, p);
  return s.is_ok() ? nullptr : fail(s);
}

// Shape inference: Y gets X's dtype and X.shape[:-1] + [N]. X's leading dims
// keep their symbolic names; other unknown dims (N when W's is unknown, an
// unnamed X dim) get fresh symbols ("trt_fastops_unk_17": unknown, unrelated
// to any other dim; an empty name would make ORT record -1).
Status DenseFamily::infer_shapes(Op op, OrtShapeInferContext* ctx) {
  const DenseSignature& sig = dense::dense_signature(op);
  std::vector<TensorDesc> inputs;
  std::vector<std::string> x_symbols;
  TRT_FASTOPS_RETURN_IF_ERROR(shape_infer_inputs(ctx, size_t(sig.num_inputs), sig.x, &inputs, &x_symbols));
  // X stays slot 0, so x_symbols still hold; an unusable mask: kernel creation words the refusal.
  if (!shape_infer_inputs_to_slots(ctx, slot_layout(sig), &inputs)) return Status::ok();
  dense::DenseShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(dense::infer_dense(inputs, &shapes));
  if (shapes.y_dims.empty()) return Status::ok();  // X's rank unknown: nothing to say

  const size_t last = shapes.y_dims.size() - 1;
  std::vector<std::string> fresh(shapes.y_dims.size());
  std::vector<const char*> names(shapes.y_dims.size(), "");
  for (size_t i = 0; i < shapes.y_dims.size(); ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (i < last && i < x_symbols.size() && !x_symbols[i].empty()) {
      names[i] = x_symbols[i].c_str();
      continue;
    }
    fresh[i] = fresh_dim_symbol();
    names[i] = fresh[i].c_str();
  }
  return set_shape_infer_output(ctx, size_t(sig.y), shapes.dtype, shapes.y_dims, names);
}

}  // namespace trt_fastops::ort
