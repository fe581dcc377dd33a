// ORT custom ops for LayerNorm / SkipLayerNorm / RMSNorm: the norm family of
// OrtOp (plugins/ort/ort_op.h, which holds the shared plumbing and explains
// the typed + catch-all registrations). Y and Sum follow X's dtype; Mean and
// InvStdDev are float32. The CPU registrations run the reference
// (plugins/norm/norm_cpu.h) over ORT's intra-op thread pool, the CUDA ones
// enqueue launch_norm on the kernel context's stream. Optional int
// attributes 'inputs' / 'outputs' (bitmasks of the present input / output
// slots, plugins/trt/README.md) are honoured so one file serves ORT and TensorRT.
#pragma once

#include <onnxruntime_c_api.h>

#include <string>
#include <vector>

#include "plugins/norm/norm_op.h"
#include "plugins/ort/ort_op.h"

namespace trt_fastops::ort {

struct NormFamily {
  using Op = norm::NormOp;
  using Signature = norm::NormSignature;
  struct Kernel : OrtKernelBase<Op> {
    norm::NormAttrs attrs;
    std::vector<bool> outputs_present;
    // Node input position -> op input slot; empty (positions are slots)
    // unless the node has the int attribute 'inputs' (a bitmask of the slots present, in slot order;
    // the same field the TensorRT plugin reads), which lets one file leave out
    // a middle optional input (SkipLayerNorm with Bias but no B) without an
    // empty-name input, which TensorRT's parser cannot take.
    std::vector<int> input_slots;
  };

  static const Signature& signature(Op op) { return norm::norm_signature(op); }
  static ONNXTensorElementDataType output_type(const Signature& sig, size_t i, ONNXTensorElementDataType x_type);
  static Status create_kernel(const OrtKernelInfo* info, Kernel* k);
  static OrtStatus* compute(const Kernel& k, OrtKernelContext* ctx);
  static Status infer_shapes(Op op, OrtShapeInferContext* ctx);
};

using NormCustomOp = OrtOp<NormFamily>;

}  // namespace trt_fastops::ort
