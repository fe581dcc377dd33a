// Semantics of the Attention op (domain trt_fastops, version 1 = ONNX
// Attention, opset 23), written once and shared by every adapter (ORT custom
// op, later the TensorRT plugin and pybind11): signature, attributes and their
// defaults, dtype and shape rules, output shapes, the AttentionParams the
// launcher and the CPU reference take, the K/V copies that build
// present_key / present_value, and every error message. Framework-free: same
// API shape as norm_op.h / conv_op.h.
//
//   inputs:  Q, K?, V?, attn_mask?, past_key?, past_value?  (K and V required unless packed_qkv = 1)
//   outputs: Y, present_key?, present_value?, qk_matmul_output? (refused: not supported yet)
//   attrs:   is_causal (0), kv_num_heads, q_num_heads, qk_matmul_output_mode (0),
//            scale (1/sqrt(head_dim)), softcap (0), softmax_precision;
//            left_window_size / right_window_size (ONNX Attention-25) only as -1 (no window);
//            packed_qkv (0; a trt_fastops extension, not ONNX): 0 or 1
//
// Rules (ONNX Attention-23 and its reference implementation):
// - 4-D: Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv]; q_num_heads /
//   kv_num_heads must not be given. 3-D: Q [B, Sq, Hq*D], K [B, Skv, Hkv*D],
//   V [B, Skv, Hkv*Dv]; both attributes required and dividing the hidden sizes.
//   Hq a multiple of Hkv (GQA / MQA). D and Dv in [1, 256].
// - packed_qkv = 1: Q is 3-D [B, S, (Hq + 2 * Hkv) * D] holding Q, K and V, its
//   last dim laid out [Q heads | K heads | V heads] with each head's D
//   contiguous: the output of one MatMul with the Q, K, V weights concatenated
//   along N. K and V must be omitted; q_num_heads and kv_num_heads are
//   required; Skv = Sq, Dv = D. The launcher reads the three parts through
//   strided views of Q (no split copies). Y is [B, S, Hq * D]; attn_mask,
//   past_key / past_value and present_key / present_value work as for 3-D
//   inputs (present_* are copied from the packed K / V parts).
// - past_key [B, Hkv, P, D] and past_value [B, Hkv, P, Dv] (always 4-D), both or
//   neither. present_key / present_value = concat(past, new) along seq
//   ([B, Hkv, P + Skv, D / Dv], also for 3-D inputs); without past they are K / V
//   laid out as 4-D. Attention runs over total = P + Skv keys.
// - is_causal: key j is visible to query i iff j <= i + P (top-left without past),
//   for every query row also when the mask broadcasts over q_seq (as ONNX's
//   function body computes it from Q's length; onnx's Python reference takes
//   q_seq from such a mask's shape and gives every row row 0's frontier, and
//   ONNX Runtime 1.31 refuses masks whose q dim is not q_seq).
// - attn_mask: bool (true = attend) or additive with Q's dtype; rank 1..4,
//   right-aligned broadcast to [B, Hq, Sq, total]: every dim but the last is 1
//   or the full size; the last is <= total and a shorter one is padded with
//   false / -inf (ONNX pads before broadcasting, so a last dim of 1 is padded,
//   not broadcast, unless total is 1).
// - softcap > 0: s = softcap * tanh(s / softcap) before the mask; 0: none.
// - softmax_precision (1, 10, 11, 16 = float, float16, double, bfloat16) is
//   accepted; softmax always runs in float32 or wider (never below the request
//   for float / float16 / bfloat16).
// - dtypes: Q float32 / float16 / bfloat16; K, V, past_key, past_value the same.
//   The CUDA kernel takes float16 / bfloat16 only (attention_cuda_refusal).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_copy.h"
#include "plugins/common/dtype.h"
#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"

namespace trt_fastops::attention {

enum class AttentionOp : int32_t { attention = 0 };

constexpr int ATTENTION_MAX_INPUTS = 6;
constexpr int ATTENTION_MAX_OUTPUTS = 4;

// Input / output slots.
constexpr int ATTN_Q = 0, ATTN_K = 1, ATTN_V = 2, ATTN_MASK = 3, ATTN_PAST_KEY = 4, ATTN_PAST_VALUE = 5;
constexpr int ATTN_Y = 0, ATTN_PRESENT_KEY = 1, ATTN_PRESENT_VALUE = 2, ATTN_QK_MATMUL_OUTPUT = 3;

using trt_fastops::format_dims;
using trt_fastops::TensorDesc;

struct AttentionSignature {
  AttentionOp op;
  const char* name;  // op_type in the trt_fastops domain
  int num_inputs;
  int num_outputs;
  TensorSlot inputs[ATTENTION_MAX_INPUTS];
  TensorSlot outputs[ATTENTION_MAX_OUTPUTS];
  int x;  // the input whose dtype decides (Q)
};

const AttentionSignature& attention_signature(AttentionOp op = AttentionOp::attention);
// "Attention" -> AttentionOp::attention; false for any other name.
bool attention_op_from_name(const std::string& name, AttentionOp* op);

// ---------------------------------------------------------------------------
// Attributes. Defaults are the ONNX ones; absent attributes keep them.
struct AttentionAttrs {
  int64_t is_causal = 0;
  bool has_q_num_heads = false, has_kv_num_heads = false;
  int64_t q_num_heads = 0, kv_num_heads = 0;
  int64_t qk_matmul_output_mode = 0;
  bool has_scale = false;
  float scale = 0.f;
  float softcap = 0.f;
  bool has_softmax_precision = false;
  int64_t softmax_precision = 0;  // an ONNX TensorProto element type
  int64_t packed_qkv = 0;         // 1: Q holds Q, K and V (see the rules above)
};

// Names of the attributes the op accepts, in a fixed order.
std::vector<std::string> attention_attr_names();
// True for the int attributes, false for scale / softcap.
bool attention_attr_is_int(const std::string& name);

// Set one attribute from a value as a framework holds it (ints may come as
// int32 or int64: pass them widened). Refuses unknown names and values that
// are wrong whatever the inputs are.
Status set_attention_attr_int(const std::string& name, int64_t value, AttentionAttrs* attrs);
Status set_attention_attr_float(const std::string& name, double value, AttentionAttrs* attrs);
// "Attention: attribute 'scale' is an int, expected a float"
Status attention_attr_type_error(const std::string& name, const char* found_kind);
Status validate_attention_attrs(const AttentionAttrs& attrs);

// ---------------------------------------------------------------------------
// What infer_attention derives. Counts are -1 where unknown (graph time only).
struct AttentionShapes {
  DType dtype = DType::f32;  // of Q, K, V, past, Y, present
  int rank = -1;             // 3 or 4; -1 when unknown
  int64_t batch = -1, q_heads = -1, kv_heads = -1;
  int64_t q_len = -1, kv_len = -1, past_len = 0, total_len = -1;  // total = past + kv
  int64_t head_dim = -1, v_head_dim = -1;
  bool has_past = false;
  MaskKind mask_kind = MaskKind::none;
  DType mask_dtype = DType::f32;  // additive masks
  std::vector<int64_t> mask_dims;  // as given
  bool present_key_out = false, present_value_out = false;  // requested outputs
  std::vector<int64_t> y_dims, present_key_dims, present_value_dims;

  // Every count above known (run time).
  bool fully_known() const;
  // The concatenated K / V must be materialised (present outputs, or scratch
  // of present_bytes(...) when past is given without present outputs).
  bool needs_present_key() const { return has_past || present_key_out; }
  bool needs_present_value() const { return has_past || present_value_out; }
  // Bytes of the present_key (value = false) / present_value (true) buffer.
  int64_t present_bytes(bool value) const;
};

// Validates inputs, attributes and requested outputs and computes the output
// shapes. `inputs`: one TensorDesc per input slot (missing trailing entries
// absent); a bool input is a desc with unsupported_dtype == "bool".
// `outputs_present`: one flag per output slot (missing trailing entries
// absent; empty = Y only). At graph time unknown dims (-1) and unknown ranks
// are allowed: whatever can be checked is checked.
Status infer_attention(const AttentionAttrs& attrs, const std::vector<TensorDesc>& inputs,
                       const std::vector<bool>& outputs_present, AttentionShapes* out);

// The CUDA execution provider's refusals, worded for the op: a float32 Q
// (known at graph time) and whatever attention_unsupported_reason says about
// finished params (run time).
Status attention_cuda_dtype_refusal(const AttentionShapes& shapes);
Status attention_cuda_refusal(const AttentionParams& p);
// "Attention: CUDA kernel <name> failed: <error>" (launch) or
// "Attention: present_key copy failed: <error>".
Status attention_cuda_error(const char* what, const std::string& error);

// Data pointers by slot, as the framework hands them over (host or device).
// present_scratch[0 / 1]: where present_key / present_value are built when
// past is given but that output is not requested (present_bytes each).
// workspace: the launcher's (AttentionParams::workspace) of workspace_bytes,
// or null (CUDA only; attention_launch_workspace_bytes says how much it uses).
struct AttentionBuffers {
  const void* inputs[ATTENTION_MAX_INPUTS] = {};
  void* outputs[ATTENTION_MAX_OUTPUTS] = {};
  void* present_scratch[2] = {};
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Bytes of workspace the CUDA launcher can use for a node with these
// attributes and (graph-time or run-time) shapes: attention_workspace_bytes
// of its params, which depends on the dtype and is_causal only.
size_t attention_launch_workspace_bytes(const AttentionAttrs& attrs, const AttentionShapes& shapes);

// The copies that fill present_key / present_value, to run before the
// attention (in order). Empty copies are left out.
struct AttentionCopies {
  int count = 0;
  AttentionCopy items[4];
};

// Fills the launcher params (strided views of Q / K / V / Y, or of the present
// buffers when past is given; mask strides with 0 for broadcast dims;
// mask_kv_len; causal_offset = past length; the resolved scale) and the
// present copies, from fully known shapes (run time) and buffers. Refuses
// null pointers for tensors that hold data.
Status make_attention_params(const AttentionAttrs& attrs, const AttentionShapes& shapes,
                             const AttentionBuffers& buffers, AttentionParams* out, AttentionCopies* copies);

}  // namespace trt_fastops::attention
