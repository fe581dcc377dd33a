// Semantics of the norm ops (LayerNorm, SkipLayerNorm, RMSNorm), written once
// and shared by every adapter (ORT custom op, TensorRT plugin, pybind11):
// signatures (inputs/outputs and their optionality), attributes and their
// defaults, dtype and shape rules, output shapes and every error message.
// Framework-free: adapters translate their tensors into TensorDesc and their
// attributes into NormAttrs, then call infer_norm and make_norm_params.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"
#include "plugins/norm/norm.h"

namespace trt_fastops::norm {

enum class NormOp : int32_t { layer_norm = 0, skip_layer_norm = 1, rms_norm = 2 };

constexpr int NORM_OP_COUNT = 3;
constexpr int NORM_MAX_INPUTS = 5;
constexpr int NORM_MAX_OUTPUTS = 4;

// TensorDesc, TensorSlot and format_dims are shared by every op family
// (plugins/common/tensor_desc.h); the norm names stay for the adapters.
using NormSlot = TensorSlot;
using trt_fastops::TensorDesc;
using trt_fastops::format_dims;

// Where each role sits in an op's input/output list; -1 when the op lacks it.
struct NormSignature {
  NormOp op;
  const char* name;  // op_type in the trt_fastops domain
  NormKind kind;
  int num_inputs;
  int num_outputs;
  NormSlot inputs[NORM_MAX_INPUTS];
  NormSlot outputs[NORM_MAX_OUTPUTS];
  int x, skip, scale, b, bias;     // input indices
  int y, mean, inv_std_dev, sum;   // output indices
  bool has_stash_type;
};

// LayerNorm:     inputs X, Scale, B?               outputs Y, Mean?, InvStdDev?       attrs axis, epsilon, stash_type
// SkipLayerNorm: inputs X, Skip, Scale, B?, Bias?  outputs Y, Mean?, InvStdDev?, Sum? attrs axis, epsilon
// RMSNorm:       inputs X, Scale, Skip?, Bias?     outputs Y, Sum?                    attrs axis, epsilon, stash_type
const NormSignature& norm_signature(NormOp op);
inline const char* norm_op_name(NormOp op) { return norm_signature(op).name; }
// "LayerNorm" -> NormOp::layer_norm; false for any other name.
bool norm_op_from_name(const std::string& name, NormOp* op);

// ---------------------------------------------------------------------------
// Attributes. Defaults are the ONNX ones; absent attributes keep them.
struct NormAttrs {
  int64_t axis = -1;
  float epsilon = 1e-5f;
  int64_t stash_type = 1;  // only 1 (float32 statistics) is supported
};

// Names of the attributes `op` accepts ("axis", "epsilon"[, "stash_type"]).
std::vector<std::string> norm_attr_names(NormOp op);
// True for the integer attributes (axis, stash_type), false for epsilon.
bool norm_attr_is_int(const std::string& name);

// Set one attribute from a value as a framework holds it (ints may come as
// int32 or int64: pass them widened). Refuses names the op does not have and
// out-of-domain values (stash_type != 1; epsilon not finite or negative).
// An attribute of the wrong kind (a float 'axis') is reported by the adapter
// with norm_attr_type_error.
Status set_norm_attr_int(NormOp op, const std::string& name, int64_t value, NormAttrs* attrs);
Status set_norm_attr_float(NormOp op, const std::string& name, double value, NormAttrs* attrs);
// "LayerNorm: attribute 'axis' is a float, expected an int"
Status norm_attr_type_error(NormOp op, const std::string& name, const char* found_kind);
// Checks values that do not depend on the inputs (epsilon, stash_type).
Status validate_norm_attrs(NormOp op, const NormAttrs& attrs);

// ---------------------------------------------------------------------------
// What infer_norm derives. Counts are -1 where unknown (graph time only).
struct NormShapes {
  DType dtype = DType::f32;  // of X, Y, Sum
  int64_t rank = -1;         // of X; -1 when unknown
  int64_t axis = -1;         // normalised to [0, rank) when the rank is known
  int64_t rows = -1;         // prod(X.shape[:axis])
  int64_t cols = -1;         // prod(X.shape[axis:])
  int64_t skip_rows = 0;     // rows of Skip viewed as [skip_rows, cols]; 0 without Skip
  bool has_skip = false, has_bias = false, has_beta = false;
  bool gamma_scalar = false, beta_scalar = false;
  std::vector<int64_t> y_dims;     // X's dims (also Sum's)
  std::vector<int64_t> stat_dims;  // Mean / InvStdDev: X.shape[:axis] + [1] * (rank - axis)
};

// Validates inputs, attributes and which outputs are requested, and computes
// the output shapes. `inputs` holds one TensorDesc per input slot of the op
// (missing trailing entries count as absent); `outputs_present` one flag per
// output slot (missing trailing entries count as absent; Y is required).
Status infer_norm(NormOp op, const NormAttrs& attrs, const std::vector<TensorDesc>& inputs,
                  const std::vector<bool>& outputs_present, NormShapes* out);

// Data pointers by slot, as the framework hands them over (host or device).
struct NormBuffers {
  const void* inputs[NORM_MAX_INPUTS] = {};
  void* outputs[NORM_MAX_OUTPUTS] = {};
};

// Fills the launcher params from fully known shapes (run time) and buffers.
// Refuses null pointers for present tensors that hold data.
Status make_norm_params(NormOp op, const NormAttrs& attrs, const NormShapes& shapes,
                        const NormBuffers& buffers, NormParams* out);

}  // namespace trt_fastops::norm
