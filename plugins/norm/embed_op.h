// Semantics of the EmbedLayerNorm op (domain trt_fastops, version 1), written once and shared
// by every adapter (the ORT custom op; the CPU reference): signature, attribute, dtype and
// shape rules, output shape, the EmbedParams the launcher (embed.h) takes, and every error
// message. Framework-free: same API shape as dense_op.h / norm_op.h.
//
//   Y = LayerNorm(word_embedding[input_ids] + position_embedding[positions]
//                 (+ segment_embedding[segment_ids])) * gamma (+ beta)
//
//   inputs:  input_ids [B, S] (int32 / int64),
//            segment_ids [B, S]? (int32 / int64; with segment_embedding),
//            word_embedding [V, H], position_embedding [P, H], segment_embedding [T, H]?,
//            gamma [H], beta [H]?,
//            position_ids [B, S] or [1, S]? (int32 / int64; absent: position s for token s)
//   outputs: Y [B, S, H], the tables' dtype
//   attrs:   epsilon (float, default 1e-5)
//
// Rules:
// - The tables, gamma and beta share one dtype: float32, float16 or bfloat16. Statistics in
//   float32 (the CUDA kernel) or float64 (the CPU reference); Y rounded once.
// - Indices follow ONNX Gather: i in [-n, n) for a table of n rows, negative counting from the
//   end. Out of range: the CPU reference refuses the run (naming the input and position); the
//   CUDA kernel cannot raise, so that token's row of Y is NaN.
// - Without position_ids, S must not exceed P (checked at run time).
//
// Why the op exists: a BERT export embeds tokens with three Gathers, two Adds (one with
// positions sliced from an arange buffer: a copy node inside a CUDA graph) and a LayerNorm;
// ONNX Runtime runs them as six kernels. The rewriter emits EmbedLayerNorm for
// `--target ort` only: there is no TensorRT plugin for it (TensorRT fuses the gathers and
// the sum into its own kernels; the portable file keeps them for our SkipLayerNorm).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"
#include "plugins/norm/embed.h"

namespace trt_fastops::norm {

enum class EmbedOp : int32_t { embed_layer_norm = 0 };

constexpr int EMBED_MAX_INPUTS = 8;
constexpr int EMBED_MAX_OUTPUTS = 1;

// Input / output slots.
constexpr int EMBED_IDS = 0, EMBED_SEGMENT_IDS = 1, EMBED_WORD = 2, EMBED_POSITION = 3, EMBED_SEGMENT = 4,
              EMBED_GAMMA = 5, EMBED_BETA = 6, EMBED_POSITION_IDS = 7;
constexpr int EMBED_Y = 0;

struct EmbedSignature {
  EmbedOp op;
  const char* name;  // op_type in the trt_fastops domain
  int num_inputs;
  int num_outputs;
  TensorSlot inputs[EMBED_MAX_INPUTS];
  TensorSlot outputs[EMBED_MAX_OUTPUTS];
  int x;  // the input whose dtype decides (word_embedding)
  int y;  // output index of Y
};

const EmbedSignature& embed_signature(EmbedOp op = EmbedOp::embed_layer_norm);

// Attribute 'epsilon' (a float). Other names: "EmbedLayerNorm: unknown attribute 'axis';
// EmbedLayerNorm takes only 'epsilon'"; not finite or negative values are refused.
struct EmbedAttrs {
  float epsilon = 1e-5f;
};
std::vector<std::string> embed_attr_names();  // {"epsilon"}
Status set_embed_attr_float(const std::string& name, double value, EmbedAttrs* attrs);
// 'epsilon' given as another kind: "EmbedLayerNorm: attribute 'epsilon' is an int, expected a float".
Status embed_attr_type_error(const std::string& name, const char* found_kind);

// What infer_embed derives. Counts are -1 where unknown (graph time only).
struct EmbedShapes {
  DType dtype = DType::f32;  // of the tables, gamma, beta and Y
  int64_t batch = -1, seq = -1, hidden = -1;
  int64_t word_rows = -1, position_rows = -1, segment_rows = -1;
  int64_t position_id_rows = -1;  // 1 or batch, with position_ids
  bool has_segment = false, has_beta = false, has_position_ids = false;
  IndexType ids_type = IndexType::i64, segment_type = IndexType::i64, position_type = IndexType::i64;
  std::vector<int64_t> y_dims;  // [B, S, H]; empty when input_ids' rank is unknown

  bool fully_known() const {
    return batch >= 0 && seq >= 0 && hidden >= 0 && word_rows >= 0 && position_rows >= 0 &&
           (!has_segment || segment_rows >= 0) && (!has_position_ids || position_id_rows >= 0);
  }
};

// Validates the inputs (one TensorDesc per slot; missing trailing entries count as absent;
// index tensors arrive with unsupported_dtype "int32" / "int64") and computes Y's shape. At
// graph time unknown dims and ranks are allowed. Messages name the input and what was expected:
//   "EmbedLayerNorm: input 'input_ids' (index 0) is float32, expected int32 or int64"
//   "EmbedLayerNorm: input 'position_embedding' (index 3) has shape [512, 64], expected [?, 768] (H = 768, ...)"
//   "EmbedLayerNorm: input 'segment_ids' (index 1) is given without input 'segment_embedding' (index 4)"
Status infer_embed(const std::vector<TensorDesc>& inputs, EmbedShapes* out);

// Data pointers by slot, as the framework hands them over (host or device).
struct EmbedBuffers {
  const void* inputs[EMBED_MAX_INPUTS] = {};
  void* outputs[EMBED_MAX_OUTPUTS] = {};
};

// Fills the launcher params from fully known shapes (run time), the attribute and buffers;
// refuses null pointers for tensors that hold data and, without position_ids, S > P.
Status make_embed_params(const EmbedShapes& shapes, const EmbedAttrs& attrs, const EmbedBuffers& buffers,
                         EmbedParams* out);

}  // namespace trt_fastops::norm
