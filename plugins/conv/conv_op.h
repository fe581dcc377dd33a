// Semantics of the conv ops (Conv, ConvTranspose; ONNX opset-11+ semantics
// plus our fused `activation` attribute), written once and shared by every
// adapter (ORT custom op, later the TensorRT plugin and pybind11): signatures,
// attributes and their defaults, dtype and shape rules, auto_pad / output_shape
// resolution, output shapes and every error message. Framework-free: adapters
// translate their tensors into TensorDesc and their attributes into ConvAttrs,
// then call infer_conv and make_conv_params. Same API shape as norm_op.h.
//
// Resolution rules (ONNX, matching ONNX Runtime 1.31 where ONNX is vague):
// - Conv, NOTSET: explicit pads (default 0), out = floor((in + pb + pe - dk) / s) + 1,
//   dk = dilation * (k - 1) + 1; in + pb + pe < dk is an error (no output).
// - Conv, SAME_UPPER / SAME_LOWER: out = ceil(in / s), total = max(0, (out - 1) * s + dk - in),
//   the odd pad goes to the end (UPPER) or the beginning (LOWER). Dilation is allowed.
// - Conv / ConvTranspose, VALID: pads 0.
// - `pads` together with auto_pad != NOTSET is refused (ONNX: "cannot be used simultaneously").
// - ConvTranspose: out = s * (in - 1) + output_padding + dk - pb - pe.
//   output_shape (spatial dims, or N, C and the spatial dims) overrides: total = natural - output_shape,
//   SAME_UPPER puts the odd pad at the end, every other auto_pad at the beginning; explicit pads are
//   ignored then (as ONNX Runtime does). An output_shape larger than the natural size is allowed up to
//   stride - 1 extra elements: pads 0 and the excess goes into output_padding. SAME_UPPER/SAME_LOWER
//   without output_shape aim for out = in * s (total clamped at 0). output_padding must be smaller
//   than max(stride, dilation), and the result must be the exact adjoint of a forward conv:
//   floor((out + pb + pe - dk) / s) + 1 == in (so output_padding < stride in the resolved params).
// - ConvTranspose `output_crop` (ours, not ONNX; [x1_begin, x2_begin, ..., x1_end, ...] like pads,
//   values >= 0, default none): extra output elements removed at the beginning / end of each
//   spatial dim, i.e. added to the explicit pads (pb += crop_begin, pe += crop_end). Only with
//   auto_pad NOTSET and no output_shape. It exists because ONNX Runtime's CUDA EP sends every node
//   whose op type is "ConvTranspose" with asymmetric `pads` or auto_pad SAME_* to the CPU EP,
//   whatever its domain (ConvTransposeNeedFallbackToCPU reads only those two attributes): the
//   rewriter writes asymmetric padding as symmetric `pads` + `output_crop`, same meaning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"
#include "plugins/conv/conv.h"

namespace trt_fastops::conv {

enum class ConvOp : int32_t { conv = 0, conv_transpose = 1 };

constexpr int CONV_OP_COUNT = 2;
constexpr int CONV_MAX_INPUTS = 3;   // X, W, B?
constexpr int CONV_MAX_OUTPUTS = 1;  // Y

// TensorDesc, TensorSlot and format_dims are shared by every op family
// (plugins/common/tensor_desc.h).
using ConvSlot = TensorSlot;
using trt_fastops::TensorDesc;
using trt_fastops::format_dims;

struct ConvSignature {
  ConvOp op;
  const char* name;  // op_type in the trt_fastops domain
  bool transpose;
  int num_inputs;
  int num_outputs;
  ConvSlot inputs[CONV_MAX_INPUTS];
  ConvSlot outputs[CONV_MAX_OUTPUTS];
  int x, w, b;  // input indices
  int y;        // output index
};

// Conv:          inputs X, W, B?  output Y
// ConvTranspose: inputs X, W, B?  output Y
// attrs (both): kernel_shape, strides, dilations, pads, auto_pad, group, activation;
// ConvTranspose also output_padding, output_shape, output_crop.
const ConvSignature& conv_signature(ConvOp op);
inline const char* conv_op_name(ConvOp op) { return conv_signature(op).name; }
// "Conv" -> ConvOp::conv; false for any other name.
bool conv_op_from_name(const std::string& name, ConvOp* op);

// ---------------------------------------------------------------------------
// Attributes. Defaults are the ONNX ones; absent attributes keep them.
enum class AutoPad : int32_t { notset = 0, same_upper = 1, same_lower = 2, valid = 3 };

// "NOTSET", "SAME_UPPER", ...
const char* auto_pad_name(AutoPad p);
// "" (none), "Relu", "Silu", "Gelu": the values of the `activation` attribute.
const char* activation_name(Activation a);

struct ConvAttrs {
  // Empty: absent (defaults: kernel from W, strides/dilations 1, pads/output_padding/output_crop 0).
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape, output_crop;
  AutoPad auto_pad = AutoPad::notset;
  int64_t group = 1;
  Activation activation = Activation::none;
};

enum class ConvAttrKind : int32_t { ints = 0, int_ = 1, string = 2 };

// Names of the attributes `op` accepts, in a fixed order.
std::vector<std::string> conv_attr_names(ConvOp op);
// The kind of a known attribute; false for names neither op has.
bool conv_attr_kind(const std::string& name, ConvAttrKind* kind);
// "a list of ints", "an int", "a string" (for messages).
const char* conv_attr_kind_name(ConvAttrKind kind);

// Set one attribute as a framework holds it. Refuses names the op does not
// have and values that are wrong whatever the inputs are (strides < 1,
// pads < 0, group < 1, an unknown auto_pad or activation string). Lengths
// are checked against X's rank by infer_conv. An attribute of the wrong kind
// (a float 'group') is reported by the adapter with conv_attr_type_error.
Status set_conv_attr_ints(ConvOp op, const std::string& name, const std::vector<int64_t>& values,
                          ConvAttrs* attrs);
Status set_conv_attr_int(ConvOp op, const std::string& name, int64_t value, ConvAttrs* attrs);
Status set_conv_attr_string(ConvOp op, const std::string& name, const std::string& value, ConvAttrs* attrs);
// "Conv: attribute 'group' is a float, expected an int"
Status conv_attr_type_error(ConvOp op, const std::string& name, const char* found_kind);
// Checks everything that does not depend on the inputs (values, pads vs auto_pad,
// output_padding / output_shape / output_crop only on ConvTranspose, output_crop
// only with auto_pad NOTSET and no output_shape).
Status validate_conv_attrs(ConvOp op, const ConvAttrs& attrs);

// ---------------------------------------------------------------------------
// What infer_conv derives. -1 where unknown (graph time only).
struct ConvShapes {
  DType dtype = DType::f32;  // of X, W, B, Y
  int spatial = -1;          // 1..3; -1 when X's rank is unknown
  bool has_bias = false;
  int64_t n = -1, c_in = -1, c_out = -1, group = 1;
  // Per spatial dim (spatial entries meaningful; the rest 1 / 0 like ConvParams).
  int64_t in[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t out[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t kernel[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t stride[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t dilation[CONV_MAX_SPATIAL] = {1, 1, 1};
  int64_t pad_begin[CONV_MAX_SPATIAL] = {0, 0, 0};
  int64_t pad_end[CONV_MAX_SPATIAL] = {0, 0, 0};
  int64_t output_padding[CONV_MAX_SPATIAL] = {0, 0, 0};
  std::vector<int64_t> y_dims;  // [N, C_out, out...]; empty when the rank is unknown

  // Every field above known (run time).
  bool fully_known() const;
};

// Validates inputs and attributes and computes Y's shape. `inputs` holds one
// TensorDesc per input slot (X, W, B; missing trailing entries count as absent).
// At graph time unknown dims (-1) and an unknown rank are allowed: whatever can
// be checked is checked, and unknown output dims stay -1.
Status infer_conv(ConvOp op, const ConvAttrs& attrs, const std::vector<TensorDesc>& inputs, ConvShapes* out);

// Data pointers by slot, as the framework hands them over (host or device).
struct ConvBuffers {
  const void* inputs[CONV_MAX_INPUTS] = {};
  void* outputs[CONV_MAX_OUTPUTS] = {};
};

// Fills the launcher params from fully known shapes (run time) and buffers.
// Refuses null pointers for tensors that hold data.
Status make_conv_params(ConvOp op, const ConvAttrs& attrs, const ConvShapes& shapes, const ConvBuffers& buffers,
                        ConvParams* out);

// The same params without data (every pointer null), for queries that depend
// on sizes only (conv_workspace_bound in conv_launch.h, at build time).
Status make_conv_size_params(ConvOp op, const ConvAttrs& attrs, const ConvShapes& shapes, ConvParams* out);

}  // namespace trt_fastops::conv
