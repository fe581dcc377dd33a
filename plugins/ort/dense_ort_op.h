// ORT custom op for Dense (domain trt_fastops: Y = act(MatMul(X, W) + bias), with
// the semantics of plugins/dense/dense_op.h): the dense family of OrtOp
// (plugins/ort/ort_op.h holds the shared plumbing and explains the typed +
// catch-all registrations). Y follows X's dtype.
//
// The CPU registration runs the float64-accumulating reference
// (plugins/dense/dense_cpu.h) over ORT's intra-op thread pool, so a rewritten
// model runs anywhere. The CUDA registration enqueues launch_dense (cuBLASLt,
// bias in the BIAS epilogue; activation "gelu": a CUTLASS GEMM with bias and
// GELU in its epilogue on sm_90a, else cuBLASLt then a GELU kernel) on the
// kernel context's stream, with a
// dense_workspace_bytes() workspace from ORT's allocator for X's device, freed
// after the enqueue (stream-ordered reuse, as ORT's own CUDA kernels do).
// Attribute 'activation' ("none" default, "gelu": dense_op.h) is read once at
// kernel creation; a wrong value or kind fails session creation. Optional int
// attributes 'inputs' / 'outputs' (slot bitmasks, plugins/trt/README.md) are
// read and checked as for the other ops; for X, W, bias? -> Y a valid mask is
// the positions.
#pragma once

#include <onnxruntime_c_api.h>

#include <vector>

#include "plugins/dense/dense_op.h"
#include "plugins/ort/ort_op.h"

namespace trt_fastops::ort {

struct DenseFamily {
  using Op = dense::DenseOp;
  using Signature = dense::DenseSignature;
  struct Kernel : OrtKernelBase<Op> {
    // Node input position -> slot from the optional 'inputs' bitmask (empty:
    // positions are slots), read as for every op (ort_helpers.h).
    std::vector<int> input_slots;
    dense::DenseAttrs attrs;
  };

  static const Signature& signature(Op op) { return dense::dense_signature(op); }
  static ONNXTensorElementDataType output_type(const Signature&, size_t, ONNXTensorElementDataType x_type) {
    return x_type;
  }
  static Status create_kernel(const OrtKernelInfo* info, Kernel* k);
  static OrtStatus* compute(const Kernel& k, OrtKernelContext* ctx);
  static Status infer_shapes(Op op, OrtShapeInferContext* ctx);
};

using DenseCustomOp = OrtOp<DenseFamily>;

}  // namespace trt_fastops::ort
