// ORT custom ops for Conv / ConvTranspose (domain trt_fastops): the conv
// family of OrtOp (plugins/ort/ort_op.h, which holds the shared plumbing and
// explains the typed + catch-all registrations); Y follows X's dtype.
//
// Schema, attributes, shape inference, output allocation and the ConvParams
// come from here for both EPs. The CPU registration runs the reference loop
// (plugins/conv/conv_cpu.h) over ORT's intra-op thread pool; the CUDA
// registration hands the finished ConvParams (device pointers) to
//   OrtStatus* conv_compute_cuda(OrtKernelContext*, const conv::ConvParams&,
//                                const char* op_name, const std::string& node_name)
// declared in plugins/ort/conv_ort_cuda.h (the CUDA side: cudnn-frontend
// plans, plan cache, fallback kernel, workspace from ORT).
// Optional int attributes 'inputs' / 'outputs' (slot bitmasks, plugins/trt/README.md)
// are read and checked as for the other ops; for X, W, B? -> Y a valid mask is the positions.
#pragma once

#include <onnxruntime_c_api.h>

#include <vector>

#include "plugins/conv/conv_op.h"
#include "plugins/ort/ort_op.h"

namespace trt_fastops::ort {

struct ConvFamily {
  using Op = conv::ConvOp;
  using Signature = conv::ConvSignature;
  struct Kernel : OrtKernelBase<Op> {
    conv::ConvAttrs attrs;
    // Node input position -> slot from the optional 'inputs' bitmask (empty:
    // positions are slots), read as for every op (ort_helpers.h).
    std::vector<int> input_slots;
  };

  static const Signature& signature(Op op) { return conv::conv_signature(op); }
  static ONNXTensorElementDataType output_type(const Signature&, size_t, ONNXTensorElementDataType x_type) {
    return x_type;
  }
  static Status create_kernel(const OrtKernelInfo* info, Kernel* k);
  static OrtStatus* compute(const Kernel& k, OrtKernelContext* ctx);
  static Status infer_shapes(Op op, OrtShapeInferContext* ctx);
};

using ConvCustomOp = OrtOp<ConvFamily>;

}  // namespace trt_fastops::ort
