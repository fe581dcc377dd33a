#include "plugins/ort/attention_ort_op.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_copy.h"
#include "plugins/attention/attention_cpu.h"
#include "plugins/common/cuda_status.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {
namespace {

namespace at = trt_fastops::attention;

// ---------------------------------------------------------------------------
// Attributes, absent -> default. Wrong kinds are refused.

Status read_attention_attrs(const OrtKernelInfo* info, at::AttentionAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = at::AttentionAttrs();
  for (const std::string& name : at::attention_attr_names()) {
    int64_t i = 0;
    float f = 0.f;
    size_t size = 0;
    if (at::attention_attr_is_int(name)) {
      if (succeeded(a->KernelInfoGetAttribute_int64(info, name.c_str(), &i))) {
        TRT_FASTOPS_RETURN_IF_ERROR(at::set_attention_attr_int(name, i, attrs));
        continue;
      }
      if (succeeded(a->KernelInfoGetAttribute_float(info, name.c_str(), &f)))
        return at::attention_attr_type_error(name, "a float");
    } else {
      if (succeeded(a->KernelInfoGetAttribute_float(info, name.c_str(), &f))) {
        TRT_FASTOPS_RETURN_IF_ERROR(at::set_attention_attr_float(name, f, attrs));
        continue;
      }
      if (succeeded(a->KernelInfoGetAttribute_int64(info, name.c_str(), &i)))
        return at::attention_attr_type_error(name, "an int");
    }
    if (succeeded(a->KernelInfoGetAttribute_string(info, name.c_str(), nullptr, &size)))
      return at::attention_attr_type_error(name, "a string");
    // Absent (or a list/tensor, which ORT reports the same way): default.
  }
  return at::validate_attention_attrs(*attrs);
}

Status read_attention_attrs(const OrtShapeInferContext* ctx, at::AttentionAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = at::AttentionAttrs();
  for (const std::string& name : at::attention_attr_names()) {
    const OrtOpAttr* attr = nullptr;
    if (!succeeded(a->ShapeInferContext_GetAttribute(ctx, name.c_str(), &attr)) || attr == nullptr)
      continue;  // absent: default
    int64_t i = 0;
    float f = 0.f;
    size_t out = 0;
    if (at::attention_attr_is_int(name)) {
      if (!succeeded(a->ReadOpAttr(attr, ORT_OP_ATTR_INT, &i, sizeof(i), &out)))
        return at::attention_attr_type_error(name, "of another type");
      TRT_FASTOPS_RETURN_IF_ERROR(at::set_attention_attr_int(name, i, attrs));
    } else {
      if (!succeeded(a->ReadOpAttr(attr, ORT_OP_ATTR_FLOAT, &f, sizeof(f), &out)))
        return at::attention_attr_type_error(name, "of another type");
      TRT_FASTOPS_RETURN_IF_ERROR(at::set_attention_attr_float(name, f, attrs));
    }
  }
  return at::validate_attention_attrs(*attrs);
}

// CPU reference, split over output rows through ORT's intra-op thread pool.
Status run_cpu(OrtKernelContext* ctx, const at::AttentionParams& p, const at::AttentionCopies& copies) {
  for (int i = 0; i < copies.count; ++i) TRT_FASTOPS_RETURN_IF_ERROR(at::cpu_attention_copy(copies.items[i]));
  constexpr int64_t MACS_PER_CHUNK = 1 << 16;  // keeps per-task overhead small
  TRT_FASTOPS_RETURN_IF_ERROR(at::cpu_attention_rows(p, 0, 0));  // validates params
  const int64_t rows = at::cpu_attention_row_count(p);
  const int64_t cost = std::max<int64_t>(1, p.kv_len * (p.head_dim + p.v_head_dim));
  const int64_t rows_per_chunk = std::max<int64_t>(1, MACS_PER_CHUNK / cost);
  return run_chunked(
      ctx, rows, rows_per_chunk, [&p](int64_t begin, int64_t end) { return at::cpu_attention_rows(p, begin, end); },
      [&p] { return at::cpu_attention(p); });
}

OrtStatus* run_cuda(const AttentionFamily::Kernel& k, OrtKernelContext* ctx, const at::AttentionParams& p,
                    const at::AttentionCopies& copies) {
  auto fail = [&](const Status& st) { return node_error(ORT_EP_FAIL, st.message(), k.node_name); };
  Status s = at::attention_cuda_refusal(p);
  if (!s.is_ok()) return invalid_argument(s, k.node_name);
  void* stream = nullptr;
  s = from_ort_status(api()->KernelContext_GetGPUComputeStream(ctx, &stream), "KernelContext_GetGPUComputeStream");
  if (!s.is_ok()) return fail(at::attention_cuda_error("getting the compute stream", s.message()));
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  // Enqueue only: no allocation here, no synchronisation (CUDA-graph capture safe).
  for (int i = 0; i < copies.count; ++i) {
    cudaError_t err = at::launch_attention_copy(copies.items[i], cuda_stream);
    if (err != cudaSuccess) return fail(at::attention_cuda_error("the present K/V copy", cuda_error_string(err)));
  }
  cudaError_t err = at::launch_attention(p, cuda_stream);
  if (err != cudaSuccess) {
    return fail(at::attention_cuda_error(str_cat("CUDA kernel ", at::attention_kernel_name(p)).c_str(),
                                         cuda_error_string(err)));
  }
  return nullptr;
}

}  // namespace

const std::vector<ONNXTensorElementDataType>& attention_x_types(bool cuda) {
  static const std::vector<ONNXTensorElementDataType> cuda_types = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
                                                                    ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
  return cuda ? cuda_types : all_x_types();
}

Status AttentionFamily::create_kernel(const OrtKernelInfo* info, Kernel* k) {
  const Signature& sig = signature(k->op);
  TRT_FASTOPS_RETURN_IF_ERROR(read_attention_attrs(info, &k->attrs));
  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_counts(info, &n_in, &n_out));
  const SlotLayout layout = slot_layout(sig);
  int64_t out_mask = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(read_slot_masks(info, layout, n_in, &k->input_slots, &out_mask));
  std::vector<TensorDesc> inputs;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_inputs(info, std::min(n_in, size_t(sig.num_inputs)), sig.name, &inputs));
  inputs.resize(std::max(inputs.size(), n_in));  // extra inputs: infer_attention words the refusal
  inputs_to_slots(k->input_slots, sig.num_inputs, &inputs, nullptr);
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_outputs_present(info, layout, n_out, out_mask, &k->outputs_present));
  at::AttentionShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(k->attrs, inputs, k->outputs_present, &shapes));
  // Not reached through ORT's partitioner (the CUDA registrations take float16 /
  // bfloat16 Q only); kept as a safety net with the op's own message.
  if (k->cuda) return at::attention_cuda_dtype_refusal(shapes);
  return Status::ok();
}

OrtStatus* AttentionFamily::compute(const Kernel& k, OrtKernelContext* ctx) {
  auto fail = [&](const Status& st) { return invalid_argument(st, k.node_name); };

  std::vector<TensorDesc> inputs;
  at::AttentionBuffers buffers;
  Status s = context_inputs(ctx, size_t(at::ATTENTION_MAX_INPUTS), &inputs, buffers.inputs);
  if (!s.is_ok()) return fail(s);
  inputs_to_slots(k.input_slots, signature(k.op).num_inputs, &inputs, buffers.inputs);

  at::AttentionShapes shapes;
  s = at::infer_attention(k.attrs, inputs, k.outputs_present, &shapes);
  if (!s.is_ok()) return fail(s);
  if (k.cuda) {
    s = at::attention_cuda_dtype_refusal(shapes);
    if (!s.is_ok()) return fail(s);
  }

  s = context_output(ctx, size_t(at::ATTN_Y), shapes.y_dims, &buffers.outputs[at::ATTN_Y]);
  if (!s.is_ok()) return fail(s);
  if (shapes.present_key_out) {
    s = context_output(ctx, size_t(at::ATTN_PRESENT_KEY), shapes.present_key_dims, &buffers.outputs[at::ATTN_PRESENT_KEY]);
    if (!s.is_ok()) return fail(s);
  }
  if (shapes.present_value_out) {
    s = context_output(ctx, size_t(at::ATTN_PRESENT_VALUE), shapes.present_value_dims,
                       &buffers.outputs[at::ATTN_PRESENT_VALUE]);
    if (!s.is_ok()) return fail(s);
  }

  // Scratch for present_key / present_value when past is given without those
  // outputs, on Q's device.
  KernelScratch scratch(ctx, at::ATTN_Q, "Attention");
  if (shapes.has_past) {
    for (int which = 0; which < 2; ++which) {
      const bool out = which ? shapes.present_value_out : shapes.present_key_out;
      const int64_t bytes = shapes.present_bytes(which != 0);
      if (out || bytes <= 0) continue;
      s = scratch.alloc(size_t(bytes), str_cat(bytes, "-byte ", which ? "present_value" : "present_key", " scratch buffer"),
                        &buffers.present_scratch[which]);
      if (!s.is_ok()) return node_error(ORT_FAIL, s.message(), k.node_name);
    }
  }
  // The launcher's workspace (a tile counter for causal inputs).
  if (k.cuda) {
    const size_t bytes = at::attention_launch_workspace_bytes(k.attrs, shapes);
    if (bytes > 0) {
      s = scratch.alloc(bytes, str_cat(bytes, "-byte attention workspace"), &buffers.workspace);
      if (!s.is_ok()) return node_error(ORT_FAIL, s.message(), k.node_name);
      buffers.workspace_bytes = bytes;
    }
  }

  at::AttentionParams p;
  at::AttentionCopies copies;
  s = at::make_attention_params(k.attrs, shapes, buffers, &p, &copies);
  if (!s.is_ok()) return fail(s);

  if (k.cuda) return run_cuda(k, ctx, p, copies);
  s = run_cpu(ctx, p, copies);
  return s.is_ok() ? nullptr : fail(s);
}

// Shape inference: validates what it can and gives Y (index 0, always
// present) its dtype and shape. Dims taken straight from Q keep Q's symbolic
// names; other unknown dims get fresh symbols. Other outputs are left alone:
// this context cannot tell how many outputs the node has.
Status AttentionFamily::infer_shapes(Op op, OrtShapeInferContext* ctx) {
  const Signature& sig = signature(op);
  std::vector<TensorDesc> inputs;
  std::vector<std::string> q_symbols;
  TRT_FASTOPS_RETURN_IF_ERROR(shape_infer_inputs(ctx, size_t(sig.num_inputs), sig.x, &inputs, &q_symbols));
  // Q stays slot 0, so q_symbols still hold; an unusable mask: kernel creation words the refusal.
  if (!shape_infer_inputs_to_slots(ctx, slot_layout(sig), &inputs)) return Status::ok();
  at::AttentionAttrs attrs;
  TRT_FASTOPS_RETURN_IF_ERROR(read_attention_attrs(ctx, &attrs));
  at::AttentionShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(attrs, inputs, {}, &shapes));
  if (shapes.y_dims.empty()) return Status::ok();  // rank unknown: nothing to say

  // Y's dims that are Q's dims: 4-D [B, Hq, Sq, Dv] <- Q dims 0, 1, 2; 3-D [B, Sq, Hq * Dv] <- Q dims 0, 1.
  const size_t from_q = shapes.rank == 4 ? 3 : 2;
  const bool q_is_rank = desc_at(inputs, at::ATTN_Q).rank_known && q_symbols.size() == size_t(shapes.rank);
  std::vector<std::string> fresh(shapes.y_dims.size());
  std::vector<const char*> names(shapes.y_dims.size(), "");
  for (size_t i = 0; i < shapes.y_dims.size(); ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (q_is_rank && i < from_q && !q_symbols[i].empty()) {
      names[i] = q_symbols[i].c_str();
      continue;
    }
    fresh[i] = fresh_dim_symbol();
    names[i] = fresh[i].c_str();
  }
  return set_shape_infer_output(ctx, size_t(at::ATTN_Y), shapes.dtype, shapes.y_dims, names);
}

}  // namespace trt_fastops::ort
