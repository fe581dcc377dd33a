// ORT custom op for EmbedLayerNorm (domain trt_fastops, semantics in plugins/norm/embed_op.h):
// the embed family of OrtOp (plugins/ort/ort_op.h holds the shared plumbing). Registrations
// are typed on word_embedding (Y follows it); the index inputs are type-agnostic and checked
// by the semantics (int32 / int64).
//
// The CPU registration runs the reference (plugins/norm/embed_cpu.h) over ORT's intra-op
// thread pool, refusing an index out of range. The CUDA registration enqueues
// launch_embed_norm on the kernel context's stream (such a token's row is NaN there).
// Attribute 'epsilon' is read once at kernel creation; optional 'inputs' / 'outputs' slot
// bitmasks are read and checked as for every op.
#pragma once

#include <onnxruntime_c_api.h>

#include <vector>

#include "plugins/norm/embed_op.h"
#include "plugins/ort/ort_op.h"

namespace trt_fastops::ort {

struct EmbedFamily {
  using Op = norm::EmbedOp;
  using Signature = norm::EmbedSignature;
  struct Kernel : OrtKernelBase<Op> {
    std::vector<int> input_slots;  // node input position -> slot ('inputs' bitmask; empty: positions)
    norm::EmbedAttrs attrs;
  };

  static const Signature& signature(Op op) { return norm::embed_signature(op); }
  static ONNXTensorElementDataType output_type(const Signature&, size_t, ONNXTensorElementDataType x_type) {
    return x_type;
  }
  static Status create_kernel(const OrtKernelInfo* info, Kernel* k);
  static OrtStatus* compute(const Kernel& k, OrtKernelContext* ctx);
  static Status infer_shapes(Op op, OrtShapeInferContext* ctx);
};

using EmbedCustomOp = OrtOp<EmbedFamily>;

}  // namespace trt_fastops::ort
