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
// float32 on the CUDA EP is refused at session creation (the kernel is
// float16 / bfloat16 only): cast, or run the node on CPUExecutionProvider.
// Optional int attributes 'inputs' / 'outputs' (bitmasks of the present input /
// output slots, plugins/trt/README.md) are honoured as the norm ops do.
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

}  // namespace trt_fastops::ort
