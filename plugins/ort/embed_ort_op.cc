#include "plugins/ort/embed_ort_op.h"

#include <algorithm>
#include <string>
#include <vector>

#include "plugins/common/cuda_status.h"
#include "plugins/norm/embed.h"
#include "plugins/norm/embed_cpu.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {
namespace {

using norm::EmbedParams;
using norm::EmbedSignature;

// 'epsilon', probed as a float, then as other kinds for the message; absent: the default.
Status read_embed_attrs(const OrtKernelInfo* info, norm::EmbedAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = norm::EmbedAttrs();
  for (const std::string& name : norm::embed_attr_names()) {
    const char* n = name.c_str();
    float f = 0.f;
    int64_t i = 0;
    size_t size = 0;
    if (succeeded(a->KernelInfoGetAttribute_float(info, n, &f))) {
      TRT_FASTOPS_RETURN_IF_ERROR(norm::set_embed_attr_float(name, f, attrs));
      continue;
    }
    if (succeeded(a->KernelInfoGetAttribute_int64(info, n, &i))) return norm::embed_attr_type_error(name, "an int");
    if (succeeded(a->KernelInfoGetAttribute_string(info, n, nullptr, &size)))
      return norm::embed_attr_type_error(name, "a string");
  }
  return Status::ok();
}

Status run_cpu(OrtKernelContext* ctx, const EmbedParams& p) {
  constexpr int64_t ELEMENTS_PER_CHUNK = 1 << 16;
  const int64_t tokens = p.batch * p.seq;
  const int64_t per_chunk = std::max<int64_t>(1, ELEMENTS_PER_CHUNK / std::max<int64_t>(p.hidden, 1));
  return run_chunked(
      ctx, tokens, per_chunk, [&p](int64_t begin, int64_t end) { return norm::run_embed_cpu_tokens(p, begin, end); },
      [&p] { return norm::run_embed_cpu(p); });
}

OrtStatus* run_cuda(const EmbedFamily::Kernel& k, OrtKernelContext* ctx, const EmbedParams& p) {
  void* stream = nullptr;
  Status s = from_ort_status(api()->KernelContext_GetGPUComputeStream(ctx, &stream), "KernelContext_GetGPUComputeStream");
  if (!s.is_ok()) {
    return node_error(ORT_EP_FAIL, "EmbedLayerNorm: getting the compute stream: " + s.message(), k.node_name);
  }
  // Enqueue only: no synchronisation (CUDA-graph capture safe).
  const cudaError_t err = norm::launch_embed_norm(p, static_cast<cudaStream_t>(stream));
  if (err == cudaSuccess) return nullptr;
  return node_error(ORT_EP_FAIL, str_cat("EmbedLayerNorm: CUDA kernel embed_norm failed: ", cuda_error_string(err)),
                    k.node_name);
}

}  // namespace

Status EmbedFamily::create_kernel(const OrtKernelInfo* info, Kernel* k) {
  const EmbedSignature& sig = norm::embed_signature(k->op);
  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_counts(info, &n_in, &n_out));
  if (n_in < 6 || n_in > size_t(sig.num_inputs) || n_out != size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": node has ", n_in, " inputs and ", n_out,
                          " outputs, expected 6 to 8 inputs (input_ids, segment_ids?, word_embedding, "
                          "position_embedding, segment_embedding?, gamma, beta?, position_ids?) and 1 output (Y)");
  }
  int64_t out_mask = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(read_slot_masks(info, slot_layout(sig), n_in, &k->input_slots, &out_mask));
  std::vector<TensorDesc> inputs;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_inputs(info, n_in, sig.name, &inputs));
  inputs_to_slots(k->input_slots, sig.num_inputs, &inputs, nullptr);
  TRT_FASTOPS_RETURN_IF_ERROR(read_embed_attrs(info, &k->attrs));
  norm::EmbedShapes shapes;
  return norm::infer_embed(inputs, &shapes);
}

OrtStatus* EmbedFamily::compute(const Kernel& k, OrtKernelContext* ctx) {
  const EmbedSignature& sig = norm::embed_signature(k.op);
  auto fail = [&](const Status& st) { return invalid_argument(st, k.node_name); };

  std::vector<TensorDesc> inputs;
  norm::EmbedBuffers buffers;
  Status s = context_inputs(ctx, size_t(sig.num_inputs), &inputs, buffers.inputs);
  if (!s.is_ok()) return fail(s);
  inputs_to_slots(k.input_slots, sig.num_inputs, &inputs, buffers.inputs);

  norm::EmbedShapes shapes;
  s = norm::infer_embed(inputs, &shapes);
  if (!s.is_ok()) return fail(s);

  s = context_output(ctx, size_t(sig.y), shapes.y_dims, &buffers.outputs[sig.y]);
  if (!s.is_ok()) return fail(s);

  EmbedParams p;
  s = norm::make_embed_params(shapes, k.attrs, buffers, &p);
  if (!s.is_ok()) return fail(s);

  if (k.cuda) return run_cuda(k, ctx, p);
  s = run_cpu(ctx, p);
  return s.is_ok() ? nullptr : fail(s);
}

// Shape inference: Y gets the tables' dtype and [B, S, H], B and S keeping input_ids' symbols.
Status EmbedFamily::infer_shapes(Op op, OrtShapeInferContext* ctx) {
  const EmbedSignature& sig = norm::embed_signature(op);
  std::vector<TensorDesc> inputs;
  std::vector<std::string> ids_symbols;
  TRT_FASTOPS_RETURN_IF_ERROR(
      shape_infer_inputs(ctx, size_t(sig.num_inputs), norm::EMBED_IDS, &inputs, &ids_symbols));
  if (!shape_infer_inputs_to_slots(ctx, slot_layout(sig), &inputs)) return Status::ok();
  norm::EmbedShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_embed(inputs, &shapes));
  if (shapes.y_dims.empty()) return Status::ok();  // input_ids' rank unknown: nothing to say
  std::vector<std::string> fresh(3);
  std::vector<const char*> names(3, "");
  for (size_t i = 0; i < 3; ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (i < 2 && i < ids_symbols.size() && !ids_symbols[i].empty()) {
      names[i] = ids_symbols[i].c_str();
    } else {
      fresh[i] = fresh_dim_symbol();
      names[i] = fresh[i].c_str();
    }
  }
  return set_shape_infer_output(ctx, size_t(sig.y), shapes.dtype, shapes.y_dims, names);
}

}  // namespace trt_fastops::ort
