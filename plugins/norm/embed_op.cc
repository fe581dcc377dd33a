#include "plugins/norm/embed_op.h"

#include <cmath>

namespace trt_fastops::norm {
namespace {

const EmbedSignature SIGNATURES[1] = {
    {EmbedOp::embed_layer_norm,
     "EmbedLayerNorm",
     8,
     1,
     {{"input_ids", false},
      {"segment_ids", true},
      {"word_embedding", false},
      {"position_embedding", false},
      {"segment_embedding", true},
      {"gamma", false},
      {"beta", true},
      {"position_ids", true}},
     {{"Y", false}},
     EMBED_WORD,
     EMBED_Y},
};

const char* const OP = "EmbedLayerNorm";
const char* const ATTR_EPSILON = "epsilon";

const EmbedSignature& sig() { return SIGNATURES[0]; }

Status unknown_attr(const std::string& name) {
  return Status::errorf(OP, ": unknown attribute '", name, "'; EmbedLayerNorm takes only '", ATTR_EPSILON, "'");
}

// An index input: int32 or int64 (arrives as an "unsupported" dtype name).
Status index_type(int slot, const TensorDesc& t, IndexType* type) {
  if (t.unsupported_dtype == "int64") {
    *type = IndexType::i64;
  } else if (t.unsupported_dtype == "int32") {
    *type = IndexType::i32;
  } else {
    const std::string got = t.unsupported_dtype.empty() ? dtype_name(t.dtype) : t.unsupported_dtype;
    return Status::errorf(OP, ": ", input_ref(sig(), slot), " is ", got, ", expected int32 or int64");
  }
  return Status::ok();
}

// A float input of the tables' dtype.
Status float_type(int slot, const TensorDesc& t, const TensorDesc& word) {
  if (!t.unsupported_dtype.empty() || t.dtype != word.dtype) {
    const std::string got = t.unsupported_dtype.empty() ? dtype_name(t.dtype) : t.unsupported_dtype;
    return Status::errorf(OP, ": ", input_ref(sig(), slot), " is ", got, ", expected ", dtype_name(word.dtype),
                          " (the dtype of ", input_ref(sig(), EMBED_WORD), ")");
  }
  return Status::ok();
}

// H from a table [rows, H] (or gamma / beta [H]); -1 dims are unknown.
Status merge_hidden(int slot, const TensorDesc& t, int64_t dim, int64_t* hidden, int* hidden_from) {
  if (dim < 0) return Status::ok();
  if (*hidden < 0) {
    *hidden = dim;
    *hidden_from = slot;
    return Status::ok();
  }
  if (dim != *hidden) {
    return Status::errorf(OP, ": ", input_ref(sig(), slot), " has shape ", format_dims(t.dims), "; its hidden size ",
                          dim, " differs from ", *hidden, " (", input_ref(sig(), *hidden_from), ")");
  }
  return Status::ok();
}

}  // namespace

const EmbedSignature& embed_signature(EmbedOp op) { return signature_at(SIGNATURES, op); }

std::vector<std::string> embed_attr_names() { return {ATTR_EPSILON}; }

Status set_embed_attr_float(const std::string& name, double value, EmbedAttrs* attrs) {
  if (name != ATTR_EPSILON) return unknown_attr(name);
  if (!std::isfinite(value) || value < 0) {
    return Status::errorf(OP, ": attribute '", ATTR_EPSILON, "' is ", value, ", expected a finite value >= 0");
  }
  attrs->epsilon = float(value);
  return Status::ok();
}

Status embed_attr_type_error(const std::string& name, const char* found_kind) {
  if (name != ATTR_EPSILON) return unknown_attr(name);
  return Status::errorf(OP, ": attribute '", ATTR_EPSILON, "' is ", found_kind, ", expected a float");
}

Status infer_embed(const std::vector<TensorDesc>& inputs, EmbedShapes* out) {
  const EmbedSignature& s = sig();
  *out = EmbedShapes();
  if (inputs.size() > size_t(s.num_inputs)) {
    return Status::errorf(OP, ": got ", inputs.size(), " inputs, expected at most ", s.num_inputs,
                          " (input_ids, segment_ids?, word_embedding, position_embedding, segment_embedding?, gamma, "
                          "beta?, position_ids?)");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(check_required_inputs(OP, s.inputs, s.num_inputs, inputs));
  const TensorDesc& ids = desc_at(inputs, EMBED_IDS);
  const TensorDesc& seg_ids = desc_at(inputs, EMBED_SEGMENT_IDS);
  const TensorDesc& word = desc_at(inputs, EMBED_WORD);
  const TensorDesc& pos = desc_at(inputs, EMBED_POSITION);
  const TensorDesc& seg = desc_at(inputs, EMBED_SEGMENT);
  const TensorDesc& gamma = desc_at(inputs, EMBED_GAMMA);
  const TensorDesc& beta = desc_at(inputs, EMBED_BETA);
  const TensorDesc& pos_ids = desc_at(inputs, EMBED_POSITION_IDS);

  // dtypes
  if (!word.unsupported_dtype.empty()) {
    return Status::errorf(OP, ": ", input_ref(s, EMBED_WORD), " is ", word.unsupported_dtype,
                          ", expected float32, float16 or bfloat16");
  }
  out->dtype = word.dtype;
  TRT_FASTOPS_RETURN_IF_ERROR(index_type(EMBED_IDS, ids, &out->ids_type));
  TRT_FASTOPS_RETURN_IF_ERROR(float_type(EMBED_POSITION, pos, word));
  TRT_FASTOPS_RETURN_IF_ERROR(float_type(EMBED_GAMMA, gamma, word));
  out->has_segment = seg_ids.present;
  if (seg_ids.present != seg.present) {
    const int given = seg_ids.present ? EMBED_SEGMENT_IDS : EMBED_SEGMENT;
    const int missing = seg_ids.present ? EMBED_SEGMENT : EMBED_SEGMENT_IDS;
    return Status::errorf(OP, ": ", input_ref(s, given), " is given without ", input_ref(s, missing),
                          "; give both or neither");
  }
  if (out->has_segment) {
    TRT_FASTOPS_RETURN_IF_ERROR(index_type(EMBED_SEGMENT_IDS, seg_ids, &out->segment_type));
    TRT_FASTOPS_RETURN_IF_ERROR(float_type(EMBED_SEGMENT, seg, word));
  }
  out->has_beta = beta.present;
  if (beta.present) TRT_FASTOPS_RETURN_IF_ERROR(float_type(EMBED_BETA, beta, word));
  out->has_position_ids = pos_ids.present;
  if (pos_ids.present) TRT_FASTOPS_RETURN_IF_ERROR(index_type(EMBED_POSITION_IDS, pos_ids, &out->position_type));

  // tables [rows, H], gamma / beta [H]
  int64_t hidden = -1;
  int hidden_from = EMBED_WORD;
  for (int slot : {EMBED_WORD, EMBED_POSITION, EMBED_SEGMENT}) {
    const TensorDesc& t = desc_at(inputs, slot);
    if (!t.present || !t.rank_known) continue;
    if (t.dims.size() != 2) {
      return Status::errorf(OP, ": ", input_ref(s, slot), " must be 2-D [rows, hidden], got ", format_dims(t.dims));
    }
    TRT_FASTOPS_RETURN_IF_ERROR(merge_hidden(slot, t, t.dims[1], &hidden, &hidden_from));
    const int64_t rows = t.dims[0];
    if (rows == 0) return Status::errorf(OP, ": ", input_ref(s, slot), " has no rows (shape ", format_dims(t.dims), ")");
    (slot == EMBED_WORD ? out->word_rows : slot == EMBED_POSITION ? out->position_rows : out->segment_rows) = rows;
  }
  for (int slot : {EMBED_GAMMA, EMBED_BETA}) {
    const TensorDesc& t = desc_at(inputs, slot);
    if (!t.present || !t.rank_known) continue;
    if (t.dims.size() != 1) {
      return Status::errorf(OP, ": ", input_ref(s, slot), " must be 1-D [hidden], got ", format_dims(t.dims));
    }
    TRT_FASTOPS_RETURN_IF_ERROR(merge_hidden(slot, t, t.dims[0], &hidden, &hidden_from));
  }
  if (hidden == 0) return Status::errorf(OP, ": the hidden size is 0 (", input_ref(s, hidden_from), ")");
  out->hidden = hidden;

  // input_ids [B, S]; segment_ids the same; position_ids [1 or B, S]
  if (!ids.rank_known) return Status::ok();  // graph time: nothing more to check yet
  if (ids.dims.size() != 2) {
    return Status::errorf(OP, ": ", input_ref(s, EMBED_IDS), " must be 2-D [batch, sequence], got ",
                          format_dims(ids.dims));
  }
  out->batch = ids.dims[0];
  out->seq = ids.dims[1];
  auto same_dim = [](int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; };
  if (out->has_segment && seg_ids.rank_known &&
      (seg_ids.dims.size() != 2 || !same_dim(seg_ids.dims[0], out->batch) || !same_dim(seg_ids.dims[1], out->seq))) {
    return Status::errorf(OP, ": ", input_ref(s, EMBED_SEGMENT_IDS), " has shape ", format_dims(seg_ids.dims),
                          ", expected ", format_dims(ids.dims), " (the shape of ", input_ref(s, EMBED_IDS), ")");
  }
  if (out->has_position_ids && pos_ids.rank_known) {
    const bool ok = pos_ids.dims.size() == 2 && same_dim(pos_ids.dims[1], out->seq) &&
                    (pos_ids.dims[0] == 1 || same_dim(pos_ids.dims[0], out->batch));
    if (!ok) {
      return Status::errorf(OP, ": ", input_ref(s, EMBED_POSITION_IDS), " has shape ", format_dims(pos_ids.dims),
                            ", expected [1, S] or [B, S] with ", input_ref(s, EMBED_IDS), " ", format_dims(ids.dims));
    }
    out->position_id_rows = pos_ids.dims[0];
  }
  bool overflow = false;
  dims_product({out->batch, out->seq, out->hidden}, 0, 3, &overflow);
  if (overflow) {
    return Status::errorf(OP, ": output 'Y' would have ", out->batch, " x ", out->seq, " x ", out->hidden,
                          " elements, more than fit in int64");
  }
  out->y_dims = {out->batch, out->seq, out->hidden};
  return Status::ok();
}

Status make_embed_params(const EmbedShapes& shapes, const EmbedAttrs& attrs, const EmbedBuffers& buffers,
                         EmbedParams* out) {
  const EmbedSignature& s = sig();
  if (!shapes.fully_known()) {
    return Status::errorf(OP, ": internal error: make_embed_params needs fully known shapes");
  }
  if (!shapes.has_position_ids && shapes.seq > shapes.position_rows) {
    return Status::errorf(OP, ": the sequence length ", shapes.seq, " exceeds the ", shapes.position_rows,
                          " rows of ", input_ref(s, EMBED_POSITION), "; give ", input_ref(s, EMBED_POSITION_IDS),
                          " or a shorter sequence");
  }
  EmbedParams p;
  p.dtype = shapes.dtype;
  p.batch = shapes.batch;
  p.seq = shapes.seq;
  p.hidden = shapes.hidden;
  p.word_rows = shapes.word_rows;
  p.position_rows = shapes.position_rows;
  p.segment_rows = shapes.has_segment ? shapes.segment_rows : 0;
  p.position_id_rows = shapes.has_position_ids ? shapes.position_id_rows : 1;
  p.ids_type = shapes.ids_type;
  p.segment_type = shapes.segment_type;
  p.position_type = shapes.position_type;
  p.epsilon = attrs.epsilon;
  p.ids = buffers.inputs[EMBED_IDS];
  p.segment_ids = shapes.has_segment ? buffers.inputs[EMBED_SEGMENT_IDS] : nullptr;
  p.position_ids = shapes.has_position_ids ? buffers.inputs[EMBED_POSITION_IDS] : nullptr;
  p.word = buffers.inputs[EMBED_WORD];
  p.position = buffers.inputs[EMBED_POSITION];
  p.segment = shapes.has_segment ? buffers.inputs[EMBED_SEGMENT] : nullptr;
  p.gamma = buffers.inputs[EMBED_GAMMA];
  p.beta = shapes.has_beta ? buffers.inputs[EMBED_BETA] : nullptr;
  p.y = buffers.outputs[EMBED_Y];
  if (p.batch > 0 && p.seq > 0) {  // Y holds data (messages built only on failure: hot path)
    for (int slot : {EMBED_IDS, EMBED_SEGMENT_IDS, EMBED_WORD, EMBED_POSITION, EMBED_SEGMENT, EMBED_GAMMA, EMBED_BETA,
                     EMBED_POSITION_IDS}) {
      const bool present = slot == EMBED_SEGMENT_IDS || slot == EMBED_SEGMENT ? shapes.has_segment
                           : slot == EMBED_BETA                               ? shapes.has_beta
                           : slot == EMBED_POSITION_IDS                       ? shapes.has_position_ids
                                                                              : true;
      if (present && buffers.inputs[slot] == nullptr) {
        return Status::errorf(OP, ": ", input_ref(s, slot), " has no data (null pointer)");
      }
    }
    if (p.y == nullptr) return Status::errorf(OP, ": ", output_ref(s, EMBED_Y), " has no data (null pointer)");
  }
  *out = p;
  return Status::ok();
}

}  // namespace trt_fastops::norm
