// Semantics of the Dense op (domain trt_fastops, version 1), written once and
// shared by every adapter (the ORT custom op; pybind11 if it ever needs one):
// signature, dtype and shape rules, output shape, the DenseParams the launcher
// (dense.h) and the CPU reference (dense_cpu.h) take, and every error message.
// Framework-free: same API shape as norm_op.h / conv_op.h / attention_op.h.
//
//   Y = MatMul(X, W) + bias
//
//   inputs:  X [..., K] (rank >= 2; the leading dims flatten into M),
//            W [K, N] (exactly ONNX MatMul's B, rank 2),
//            bias [N]? (1-D, optional)
//   outputs: Y [..., N] (X's leading dims, then N), X's dtype
//   attrs:   none (any attribute the adapter can see is refused)
//
// Rules:
// - X, W and bias share one dtype: float32, float16 or bfloat16.
// - M = 0 or N = 0: Y is empty and nothing runs. K = 0: Y = bias broadcast over
//   rows, or zeros without bias (a sum over nothing).
// - Accumulation: float32 on CUDA (cuBLASLt, CUBLAS_COMPUTE_32F: float16 /
//   bfloat16 in float32, float32 in plain FP32, never TF32); float64 on the
//   CPU reference. Y is rounded once to its dtype.
//
// Why the op exists: ONNX Runtime's MatMul cannot fuse the Add of a bias
// initializer that follows it, so the bias costs a full extra pass over the
// activations; Dense adds it in cuBLASLt's BIAS epilogue. TensorRT has no
// plugin for Dense: TensorRT fuses MatMul + bias in its own tactics, so the
// rewriter emits Dense only for `--target ort`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"
#include "plugins/dense/dense.h"

namespace trt_fastops::dense {

enum class DenseOp : int32_t { dense = 0 };

constexpr int DENSE_MAX_INPUTS = 3;   // X, W, bias?
constexpr int DENSE_MAX_OUTPUTS = 1;  // Y

// Input / output slots.
constexpr int DENSE_X = 0, DENSE_W = 1, DENSE_BIAS = 2;
constexpr int DENSE_Y = 0;

using trt_fastops::format_dims;
using trt_fastops::TensorDesc;

struct DenseSignature {
  DenseOp op;
  const char* name;  // op_type in the trt_fastops domain
  int num_inputs;
  int num_outputs;
  TensorSlot inputs[DENSE_MAX_INPUTS];
  TensorSlot outputs[DENSE_MAX_OUTPUTS];
  int x;  // the input whose dtype decides (X)
  int y;  // output index of Y
};

const DenseSignature& dense_signature(DenseOp op = DenseOp::dense);
// "Dense" -> DenseOp::dense; false for any other name.
bool dense_op_from_name(const std::string& name, DenseOp* op);

// ---------------------------------------------------------------------------
// Attributes: Dense has none. Adapters that can list a node's attributes pass
// each one here; every name is refused ("Dense: unknown attribute 'alpha';
// Dense takes no attributes"). ORT cannot list attributes, so there unknown
// ones are ignored, as for every op.
struct DenseAttrs {};
std::vector<std::string> dense_attr_names();  // empty
Status set_dense_attr_int(const std::string& name, int64_t value, DenseAttrs* attrs);
Status set_dense_attr_float(const std::string& name, double value, DenseAttrs* attrs);

// ---------------------------------------------------------------------------
// What infer_dense derives. Counts are -1 where unknown (graph time only).
struct DenseShapes {
  DType dtype = DType::f32;  // of X, W, bias and Y
  int64_t rank = -1;         // of X (and Y); -1 when unknown
  int64_t m = -1;            // prod(X.shape[:-1])
  int64_t n = -1;            // W.shape[1]
  int64_t k = -1;            // X.shape[-1] (= W.shape[0])
  bool has_bias = false;
  std::vector<int64_t> y_dims;  // X.shape[:-1] + [N]; empty when X's rank is unknown

  bool fully_known() const { return rank >= 2 && m >= 0 && n >= 0 && k >= 0; }
};

// Validates the inputs (one TensorDesc per input slot; missing trailing
// entries count as absent) and computes Y's shape. At graph time unknown dims
// (-1) and ranks are allowed: whatever can be checked is checked. Messages:
//   "Dense: input 'W' (index 1) must be 2-D [K, N], got [3, 4, 5]"
//   "Dense: X's last dim (768) must equal W's first dim (512): input 'X' (index 0) has shape [2, 768], ..."
//   "Dense: input 'bias' (index 2) has shape [7], expected [8] (N, W's last dim)"
//   "Dense: input 'W' (index 1) is float32, expected float16 (the dtype of X)"
Status infer_dense(const std::vector<TensorDesc>& inputs, DenseShapes* out);

// Data pointers by slot, as the framework hands them over (host or device).
struct DenseBuffers {
  const void* inputs[DENSE_MAX_INPUTS] = {};
  void* outputs[DENSE_MAX_OUTPUTS] = {};
};

// Fills the launcher params from fully known shapes (run time) and buffers;
// the workspace is left to the caller. Refuses null pointers for tensors that
// hold data the computation reads or writes.
Status make_dense_params(const DenseShapes& shapes, const DenseBuffers& buffers, DenseParams* out);

}  // namespace trt_fastops::dense
