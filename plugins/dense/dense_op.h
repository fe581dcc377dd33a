// Semantics of the Dense op (domain trt_fastops, version 1), written once and
// shared by every adapter (the ORT custom op; pybind11 if it ever needs one):
// signature, dtype and shape rules, output shape, the DenseParams the launcher
// (dense.h) and the CPU reference (dense_cpu.h) take, and every error message.
// Framework-free: same API shape as norm_op.h / conv_op.h / attention_op.h.
//
//   Y = act(MatMul(X, W) + bias)
//
//   inputs:  X [..., K] (rank >= 2; the leading dims flatten into M),
//            W [K, N] (exactly ONNX MatMul's B, rank 2),
//            bias [N]? (1-D, optional)
//   outputs: Y [..., N] (X's leading dims, then N), X's dtype
//   attrs:   activation (string): "none" (default) or "gelu", the exact GELU
//            0.5 v (1 + erf(v / sqrt 2)) of v = MatMul(X, W) + bias (ONNX
//            Gelu with approximate="none"; com.microsoft BiasGelu)
//
// Rules:
// - X, W and bias share one dtype: float32, float16 or bfloat16.
// - M = 0 or N = 0: Y is empty and nothing runs. K = 0: Y = bias broadcast over
//   rows, or zeros without bias (a sum over nothing).
// - Accumulation: float32 on CUDA (cuBLASLt, CUBLAS_COMPUTE_32F: float16 /
//   bfloat16 in float32, float32 in plain FP32, never TF32; the sm_90a CUTLASS
//   GEMM of activation "gelu" likewise); float64 on the CPU reference. Y is
//   rounded once to its dtype (activation "gelu" on CUDA: GELU is computed in
//   float32 from the float32 v, except on the cuBLASLt fallback, where v is
//   rounded to Y's dtype first: see dense.h).
//
// Why the op exists: ONNX Runtime's MatMul cannot fuse the Add of a bias
// initializer that follows it, so the bias costs a full extra pass over the
// activations; Dense adds it in cuBLASLt's BIAS epilogue. The same holds for
// BERT's GELU after the MLP's first GEMM (ONNX Runtime's BiasGelu reads and
// writes the whole activation again): activation "gelu" fuses it where CUTLASS
// can (sm_90a). TensorRT has no
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
// Attributes: 'activation' (a string). Adapters that can list a node's
// attributes pass each one here; other names are refused ("Dense: unknown
// attribute 'alpha'; Dense takes only 'activation'"). ORT cannot list
// attributes, so there unknown ones are ignored, as for every op.
struct DenseAttrs {
  DenseActivation activation = DenseActivation::none;
};
std::vector<std::string> dense_attr_names();  // {"activation"}
// "Dense: attribute 'activation' is 'relu'; expected 'none' or 'gelu'"
Status set_dense_attr_string(const std::string& name, const std::string& value, DenseAttrs* attrs);
// 'activation' given as an int / float: "Dense: attribute 'activation' is an
// int, expected a string ('none' or 'gelu')"; unknown names as above.
Status set_dense_attr_int(const std::string& name, int64_t value, DenseAttrs* attrs);
Status set_dense_attr_float(const std::string& name, double value, DenseAttrs* attrs);
// The refusal for an attribute of another kind (adapters that cannot read the
// value as its kind): found_kind "an int", "a float", "a list of ints", ...
Status dense_attr_type_error(const std::string& name, const char* found_kind);

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

// Fills the launcher params from fully known shapes (run time), the
// attributes and buffers; the workspace is left to the caller. Refuses null
// pointers for tensors that hold data the computation reads or writes.
Status make_dense_params(const DenseShapes& shapes, const DenseAttrs& attrs, const DenseBuffers& buffers,
                         DenseParams* out);

}  // namespace trt_fastops::dense
