// ORT custom op for Attention (domain trt_fastops, ONNX Attention-23
// semantics from plugins/attention/attention_op.h): the attention family of
// OrtOp (plugins/ort/ort_op.h holds the shared plumbing and explains the
// typed + catch-all registrations). Y, present_key and present_value follow
// Q's dtype.
//
// Both EPs build present_key / present_value (concat(past, new) along seq)
// with the op layer's AttentionCopies, into the outputs or, when past is
// given without them, into a scratch block from ORT's allocator, and attend
// over present. The CPU registration runs the reference (attention_cpu.h)
// over ORT's intra-op thread pool; the CUDA one enqueues the copies
// (launch_attention_copy) and launch_attention on the kernel context's stream.
// The CUDA kernel is float16 / bfloat16 only, so the CUDA EP registers Q as
// float16 and bfloat16 and nothing else (attention_x_types): ORT's partitioner
// finds no CUDA kernel for a float32 (or any other) Q and places the node on
// the CPU EP, whose registrations take every type (float32 runs there, others
// get our refusal). The kernel's own float32 refusal on CUDA stays as a
// safety net.
// Optional int attributes 'inputs' / 'outputs' (bitmasks of the present input /
// output slots, plugins/trt/README.md) are honoured as the norm ops do.
// Without 'inputs', node positions are slots: ORT keeps an omitted optional
// input as an empty name in its position, so packed_qkv's Q, "", "", attn_mask
// is slots 0 and 3 (K and V are optional in the schema for that form; the op
// layer requires them otherwise).
#pragma once

#include <onnxruntime_c_api.h>

#include <vector>

#include "plugins/attention/attention_op.h"
#include "plugins/ort/ort_op.h"

namespace trt_fastops::ort {

struct AttentionFamily {
  using Op = attention::AttentionOp;
  using Signature = attention::AttentionSignature;
  struct Kernel : OrtKernelBase<Op> {
    attention::AttentionAttrs attrs;
    std::vector<bool> outputs_present;
    // Node input position -> op input slot; empty (positions are slots) unless
    // the node has the int attribute 'inputs' (a bitmask of the slots present,
    // the TensorRT plugin's field), which lets a node leave out a middle
    // optional input (past_key without attn_mask) without an empty name.
    std::vector<int> input_slots;
  };

  static const Signature& signature(Op op) { return attention::attention_signature(op); }
  static ONNXTensorElementDataType output_type(const Signature&, size_t, ONNXTensorElementDataType x_type) {
    return x_type;
  }
  static Status create_kernel(const OrtKernelInfo* info, Kernel* k);
  static OrtStatus* compute(const Kernel& k, OrtKernelContext* ctx);
  static Status infer_shapes(Op op, OrtShapeInferContext* ctx);
};

using AttentionCustomOp = OrtOp<AttentionFamily>;

// X (Q) types to register on one EP: CPU all_x_types(); CUDA float16 and
// bfloat16 only (no float32, no catch-all), so other types go to the CPU EP.
const std::vector<ONNXTensorElementDataType>& attention_x_types(bool cuda);

}  // namespace trt_fastops::ort
