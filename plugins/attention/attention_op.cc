#include "plugins/attention/attention_op.h"

#include <cmath>
#include <iterator>

namespace trt_fastops::attention {
namespace {

const AttentionSignature SIGNATURES[1] = {
    {AttentionOp::attention, "Attention", ATTENTION_MAX_INPUTS, ATTENTION_MAX_OUTPUTS,
     // K and V are optional in the signature only for packed_qkv = 1 (Q holds
     // them); infer_attention requires them otherwise.
     {{"Q", false}, {"K", true}, {"V", true}, {"attn_mask", true}, {"past_key", true}, {"past_value", true}},
     {{"Y", false}, {"present_key", true}, {"present_value", true}, {"qk_matmul_output", true}},
     /*x*/ ATTN_Q},
};

constexpr const char* OP = "Attention";

const AttentionSignature& sig() { return SIGNATURES[0]; }

std::string in_ref(int idx) { return input_ref(sig(), idx); }
std::string out_ref(int idx) { return output_ref(sig(), idx); }

std::string slot_list(const TensorSlot* slots, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += str_cat(i ? ", " : "", slots[i].name, slots[i].optional ? "?" : "");
  return s;
}

// left/right_window_size are ONNX Attention-25's sliding window: only their
// "no window" value -1 is accepted, so a windowed node is refused, not run wrong
// (ORT cannot list a node's attributes; an unknown name would go unnoticed).
// packed_qkv is ours, not ONNX's (attention_op.h).
const char* const ATTR_NAMES[] = {"is_causal",        "kv_num_heads",      "q_num_heads",     "qk_matmul_output_mode",
                                  "scale",            "softcap",           "softmax_precision", "left_window_size",
                                  "right_window_size", "packed_qkv"};

Status unknown_attr(const std::string& name) { return unknown_attr_error(OP, name, attention_attr_names()); }

bool is_known_attr(const std::string& name) {
  for (const char* n : ATTR_NAMES)
    if (name == n) return true;
  return false;
}

// ONNX TensorProto element types softmax_precision may name.
bool softmax_precision_ok(int64_t t) { return t == 1 || t == 10 || t == 11 || t == 16; }

const char* dtype_or_unsupported(const TensorDesc& t) {
  return t.unsupported_dtype.empty() ? dtype_name(t.dtype) : t.unsupported_dtype.c_str();
}

bool is_bool(const TensorDesc& t) { return t.unsupported_dtype == "bool"; }

int64_t checked_mul(int64_t a, int64_t b, bool* overflow) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) *overflow = true;
  return r;
}

// One derived quantity (batch, heads, lengths, head dims) and where its value
// came from, for the mismatch message. Strings are only built on failure.
struct Dim {
  const char* what;
  int64_t v = -1;
  int src_input = -1;  // -1: an attribute (src_attr)
  int src_axis = -1;
  int64_t src_divisor = 0;  // 3-D hidden size divided by a head count
  const char* src_attr = nullptr;
};

std::string source(const Dim& d) {
  if (d.src_input < 0) return str_cat("attribute '", d.src_attr, "'");
  if (d.src_divisor > 0)
    return str_cat("dim ", d.src_axis, " of ", in_ref(d.src_input), " divided by ", d.src_divisor, " heads");
  return str_cat("dim ", d.src_axis, " of ", in_ref(d.src_input));
}

// d takes `value` (read from dim `axis` of input `input`, divided by `divisor`
// heads when > 0) unless it already holds another known value: then the input
// is refused. Unknown values (-1) bind nothing.
Status bind(Dim* d, int64_t value, int input, const TensorDesc& t, int axis, int64_t divisor = 0) {
  if (value < 0) return Status::ok();
  if (d->v < 0) {
    d->v = value;
    d->src_input = input;
    d->src_axis = axis;
    d->src_divisor = divisor;
    return Status::ok();
  }
  if (d->v == value) return Status::ok();
  std::string how = divisor > 0 ? str_cat("dim ", axis, " divided by ", divisor, " heads") : str_cat("dim ", axis);
  return Status::errorf(OP, ": ", in_ref(input), " has shape ", format_dims(t.dims), ": its ", how, " (", d->what,
                        ") is ", value, ", expected ", d->v, " (", d->what, " from ", source(*d), ")");
}

Status bind_attr(Dim* d, int64_t value, const char* attr) {
  d->v = value;
  d->src_input = -1;
  d->src_attr = attr;
  return Status::ok();
}

// 3-D hidden size / heads, refusing a remainder. -1 when unknown.
Status split_hidden(int input, const TensorDesc& t, int64_t heads, const char* attr, int64_t* head_dim) {
  *head_dim = -1;
  const int64_t hidden = t.dims[2];
  if (hidden < 0) return Status::ok();
  if (hidden % heads != 0) {
    return Status::errorf(OP, ": ", in_ref(input), " has shape ", format_dims(t.dims), ": its last dim (hidden size) ",
                          hidden, " is not a multiple of attribute '", attr, "' = ", heads);
  }
  *head_dim = hidden / heads;
  return Status::ok();
}

Status check_head_dim(const Dim& d) {
  if (d.v < 0 || (d.v >= 1 && d.v <= ATTENTION_MAX_HEAD_DIM)) return Status::ok();
  return Status::errorf(OP, ": ", d.what, " is ", d.v, " (from ", source(d), "), expected 1 ... ",
                        ATTENTION_MAX_HEAD_DIM);
}

// 4-D view strides of a tensor in the 4-D layout [B, H, S, D] or the 3-D layout [B, S, H * D].
TensorView view_of(bool three_d, int64_t heads, int64_t seq, int64_t dim) {
  TensorView v;
  if (three_d) {
    v.stride_s = heads * dim;
    v.stride_h = dim;
    v.stride_b = seq * heads * dim;
  } else {
    v.stride_s = dim;
    v.stride_h = seq * dim;
    v.stride_b = heads * seq * dim;
  }
  return v;
}

void* offset_bytes(void* p, int64_t elements, DType t) {
  return p == nullptr ? nullptr : static_cast<char*>(p) + elements * dtype_size(t);
}
const void* offset_bytes(const void* p, int64_t elements, DType t) {
  return p == nullptr ? nullptr : static_cast<const char*>(p) + elements * dtype_size(t);
}

// Strides of Q, K and V inside a packed [B, S, (Hq + 2 * Hkv) * D] tensor: one
// row of S holds every head of the three, so all share the row stride.
TensorView packed_view(int64_t q_heads, int64_t kv_heads, int64_t seq, int64_t dim) {
  TensorView v;
  v.stride_s = (q_heads + 2 * kv_heads) * dim;
  v.stride_h = dim;
  v.stride_b = seq * v.stride_s;
  return v;
}

}  // namespace

const AttentionSignature& attention_signature(AttentionOp op) { return signature_at(SIGNATURES, op); }

bool attention_op_from_name(const std::string& name, AttentionOp* op) { return op_from_name(SIGNATURES, name, op); }

// ---------------------------------------------------------------------------
// Attributes

std::vector<std::string> attention_attr_names() { return std::vector<std::string>(std::begin(ATTR_NAMES), std::end(ATTR_NAMES)); }

bool attention_attr_is_int(const std::string& name) { return name != "scale" && name != "softcap"; }

Status attention_attr_type_error(const std::string& name, const char* found_kind) {
  if (!is_known_attr(name)) return unknown_attr(name);
  return attr_kind_error(OP, name, found_kind, attention_attr_is_int(name) ? "an int" : "a float");
}

Status set_attention_attr_int(const std::string& name, int64_t value, AttentionAttrs* attrs) {
  if (!is_known_attr(name)) return unknown_attr(name);
  if (!attention_attr_is_int(name)) return attention_attr_type_error(name, "an int");
  if (name == "is_causal") {
    attrs->is_causal = value;
  } else if (name == "q_num_heads") {
    attrs->has_q_num_heads = true;
    attrs->q_num_heads = value;
  } else if (name == "kv_num_heads") {
    attrs->has_kv_num_heads = true;
    attrs->kv_num_heads = value;
  } else if (name == "qk_matmul_output_mode") {
    attrs->qk_matmul_output_mode = value;
  } else if (name == "packed_qkv") {
    attrs->packed_qkv = value;
  } else if (name == "left_window_size" || name == "right_window_size") {
    if (value != -1) {
      return Status::errorf(OP, ": attribute '", name, "' is ", value,
                            "; sliding-window attention (ONNX Attention-25) is not supported, expected -1 (no window)");
    }
  } else {
    attrs->has_softmax_precision = true;
    attrs->softmax_precision = value;
  }
  return validate_attention_attrs(*attrs);
}

Status set_attention_attr_float(const std::string& name, double value, AttentionAttrs* attrs) {
  if (!is_known_attr(name)) return unknown_attr(name);
  if (attention_attr_is_int(name)) return attention_attr_type_error(name, "a float");
  const float f = static_cast<float>(value);
  if (!std::isfinite(value) || !std::isfinite(f) || value < 0) {
    return Status::errorf(OP, ": attribute '", name, "' is ", value, ", expected a finite float >= 0",
                          name == "softcap" ? " (0: no softcap)" : " (ONNX scales Q and K by sqrt(scale))");
  }
  if (name == "scale") {
    attrs->has_scale = true;
    attrs->scale = f;
  } else {
    attrs->softcap = f;
  }
  return validate_attention_attrs(*attrs);
}

Status validate_attention_attrs(const AttentionAttrs& a) {
  if (a.is_causal != 0 && a.is_causal != 1)
    return Status::errorf(OP, ": attribute 'is_causal' is ", a.is_causal, ", expected 0 or 1");
  if (a.packed_qkv != 0 && a.packed_qkv != 1) {
    return Status::errorf(OP, ": attribute 'packed_qkv' is ", a.packed_qkv,
                          ", expected 0 (separate Q, K, V) or 1 (Q holds Q, K and V)");
  }
  if (a.has_q_num_heads && a.q_num_heads < 1)
    return Status::errorf(OP, ": attribute 'q_num_heads' is ", a.q_num_heads, ", expected >= 1");
  if (a.has_kv_num_heads && a.kv_num_heads < 1)
    return Status::errorf(OP, ": attribute 'kv_num_heads' is ", a.kv_num_heads, ", expected >= 1");
  if (a.has_q_num_heads && a.has_kv_num_heads && a.q_num_heads % a.kv_num_heads != 0) {
    return Status::errorf(OP, ": attribute 'q_num_heads' (", a.q_num_heads,
                          ") is not a multiple of attribute 'kv_num_heads' (", a.kv_num_heads, ")");
  }
  if (a.qk_matmul_output_mode < 0 || a.qk_matmul_output_mode > 3) {
    return Status::errorf(OP, ": attribute 'qk_matmul_output_mode' is ", a.qk_matmul_output_mode,
                          ", expected 0, 1, 2 or 3");
  }
  if (a.has_scale && (!std::isfinite(a.scale) || a.scale < 0))
    return Status::errorf(OP, ": attribute 'scale' is ", a.scale, ", expected a finite float >= 0");
  if (!std::isfinite(a.softcap) || a.softcap < 0)
    return Status::errorf(OP, ": attribute 'softcap' is ", a.softcap, ", expected a finite float >= 0 (0: no softcap)");
  if (a.has_softmax_precision && !softmax_precision_ok(a.softmax_precision)) {
    return Status::errorf(OP, ": attribute 'softmax_precision' is ", a.softmax_precision,
                          ", expected 1 (float), 10 (float16), 11 (double) or 16 (bfloat16)");
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Shapes

bool AttentionShapes::fully_known() const {
  return (rank == 3 || rank == 4) && batch >= 0 && q_heads >= 1 && kv_heads >= 1 && q_len >= 0 && kv_len >= 0 &&
         past_len >= 0 && total_len >= 0 && head_dim >= 1 && v_head_dim >= 1;
}

int64_t AttentionShapes::present_bytes(bool value) const {
  if (!fully_known()) return -1;
  return batch * kv_heads * total_len * (value ? v_head_dim : head_dim) * dtype_size(dtype);
}

Status infer_attention(const AttentionAttrs& attrs, const std::vector<TensorDesc>& inputs,
                       const std::vector<bool>& outputs_present, AttentionShapes* out) {
  const AttentionSignature& s = sig();
  *out = AttentionShapes();
  if (inputs.size() > size_t(s.num_inputs)) {
    return Status::errorf(OP, ": got ", inputs.size(), " inputs, expected at most ", s.num_inputs, " (",
                          slot_list(s.inputs, s.num_inputs), ")",
                          inputs.size() >= 7 ? "; input 6 (nonpad_kv_seqlen, ONNX opset 24) is not supported" : "");
  }
  if (outputs_present.size() > size_t(s.num_outputs)) {
    return Status::errorf(OP, ": got ", outputs_present.size(), " outputs, expected at most ", s.num_outputs, " (",
                          slot_list(s.outputs, s.num_outputs), ")");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(validate_attention_attrs(attrs));
  auto in = [&](int idx) -> const TensorDesc& { return desc_at(inputs, idx); };
  auto out_present = [&](int idx) -> bool {
    if (outputs_present.empty()) return idx == ATTN_Y;
    return size_t(idx) < outputs_present.size() && outputs_present[size_t(idx)];
  };

  TRT_FASTOPS_RETURN_IF_ERROR(check_required_inputs(OP, s.inputs, s.num_inputs, inputs));  // Q
  const bool packed = attrs.packed_qkv != 0;
  for (int i : {ATTN_K, ATTN_V}) {
    if (packed && in(i).present) {
      return Status::errorf(OP, ": with packed_qkv=1, ", in_ref(i),
                            " must be omitted (Q holds Q, K and V: [batch, seq, (q_num_heads + 2 * kv_num_heads) * "
                            "head_dim])");
    }
    if (!packed && !in(i).present) {
      return Status::errorf(OP, ": ", in_ref(i),
                            " is missing; it is required (unless packed_qkv=1, where Q holds Q, K and V)");
    }
  }
  if (packed && (!attrs.has_q_num_heads || !attrs.has_kv_num_heads)) {
    return Status::errorf(OP, ": packed_qkv=1 needs attributes 'q_num_heads' and 'kv_num_heads' (missing: ",
                          !attrs.has_q_num_heads && !attrs.has_kv_num_heads ? "both"
                          : !attrs.has_q_num_heads                          ? "'q_num_heads'"
                                                                            : "'kv_num_heads'",
                          "); they split Q's last dim into (q_num_heads + 2 * kv_num_heads) heads");
  }
  if (!out_present(ATTN_Y)) return Status::errorf(OP, ": ", out_ref(ATTN_Y), " is missing; it is required");
  if (out_present(ATTN_QK_MATMUL_OUTPUT)) {
    return Status::errorf(OP, ": ", out_ref(ATTN_QK_MATMUL_OUTPUT),
                          " is requested; it is not supported yet (leave it out: qk_matmul_output_mode only matters "
                          "for that output)");
  }
  out->present_key_out = out_present(ATTN_PRESENT_KEY);
  out->present_value_out = out_present(ATTN_PRESENT_VALUE);

  // dtypes: Q decides; K, V, past follow it; the mask is bool or Q's dtype.
  const TensorDesc& q = in(ATTN_Q);
  if (!q.unsupported_dtype.empty()) {
    return Status::errorf(OP, ": ", in_ref(ATTN_Q), " is ", q.unsupported_dtype,
                          ", expected float32, float16 or bfloat16");
  }
  out->dtype = q.dtype;
  for (int i : {ATTN_K, ATTN_V, ATTN_PAST_KEY, ATTN_PAST_VALUE}) {
    const TensorDesc& t = in(i);
    if (t.present && (!t.unsupported_dtype.empty() || t.dtype != q.dtype)) {
      return Status::errorf(OP, ": ", in_ref(i), " is ", dtype_or_unsupported(t), ", expected ", dtype_name(q.dtype),
                            " (the dtype of Q)");
    }
  }
  const TensorDesc& mask = in(ATTN_MASK);
  if (mask.present) {
    if (is_bool(mask)) {
      out->mask_kind = MaskKind::boolean;
    } else if (mask.unsupported_dtype.empty() && mask.dtype == q.dtype) {
      out->mask_kind = MaskKind::additive;
      out->mask_dtype = mask.dtype;
    } else {
      return Status::errorf(OP, ": ", in_ref(ATTN_MASK), " is ", dtype_or_unsupported(mask), ", expected bool or ",
                            dtype_name(q.dtype), " (an additive mask has the dtype of Q)");
    }
  }
  const TensorDesc& past_k = in(ATTN_PAST_KEY);
  const TensorDesc& past_v = in(ATTN_PAST_VALUE);
  if (past_k.present != past_v.present) {
    const int given = past_k.present ? ATTN_PAST_KEY : ATTN_PAST_VALUE;
    const int missing = past_k.present ? ATTN_PAST_VALUE : ATTN_PAST_KEY;
    return Status::errorf(OP, ": ", in_ref(given), " is given without ", in_ref(missing),
                          "; past_key and past_value are used together");
  }
  out->has_past = past_k.present;

  // Ranks: Q, K, V share one (3 or 4); any of them may tell it at graph time.
  // Packed Q is always 3-D.
  int rank = -1;
  int rank_src = -1;
  if (packed && q.rank_known && q.dims.size() != 3) {
    return Status::errorf(OP, ": with packed_qkv=1, ", in_ref(ATTN_Q), " has shape ", format_dims(q.dims),
                          ", expected rank 3 [batch, seq, (q_num_heads + 2 * kv_num_heads) * head_dim]");
  }
  if (packed) {
    rank = 3;
    rank_src = ATTN_Q;
  }
  for (int i : {ATTN_Q, ATTN_K, ATTN_V}) {
    const TensorDesc& t = in(i);
    if (!t.present || !t.rank_known) continue;
    const int r = int(t.dims.size());
    if (r != 3 && r != 4) {
      return Status::errorf(OP, ": ", in_ref(i), " has shape ", format_dims(t.dims), " (rank ", r,
                            "), expected rank 4 [batch, heads, seq, head_dim] or 3 [batch, seq, heads * head_dim]");
    }
    if (rank < 0) {
      rank = r;
      rank_src = i;
    } else if (r != rank) {
      return Status::errorf(OP, ": ", in_ref(i), " has rank ", r, " (shape ", format_dims(t.dims), "), expected rank ",
                            rank, " like ", in_ref(rank_src), "; Q, K and V are all 3-D or all 4-D");
    }
  }
  for (int i : {ATTN_PAST_KEY, ATTN_PAST_VALUE}) {
    const TensorDesc& t = in(i);
    if (t.present && t.rank_known && t.dims.size() != 4) {
      return Status::errorf(OP, ": ", in_ref(i), " has shape ", format_dims(t.dims),
                            ", expected rank 4 [batch, kv_num_heads, past_seq, head_dim] (also for 3-D Q, K, V)");
    }
  }
  if (mask.present && mask.rank_known && (mask.dims.empty() || mask.dims.size() > 4)) {
    return Status::errorf(OP, ": ", in_ref(ATTN_MASK), " has shape ", format_dims(mask.dims),
                          ", expected rank 1 ... 4, broadcastable to [batch, q_num_heads, q_seq, total_seq]");
  }
  if (rank == 4) {
    for (const char* a : {"q_num_heads", "kv_num_heads"}) {
      const bool given = std::string(a) == "q_num_heads" ? attrs.has_q_num_heads : attrs.has_kv_num_heads;
      if (given) {
        return Status::errorf(OP, ": attribute '", a, "' is given with 4-D inputs (", in_ref(rank_src), " has shape ",
                              format_dims(in(rank_src).dims),
                              "); it is only used with 3-D Q, K, V (4-D inputs carry the heads in dim 1)");
      }
    }
  } else if (rank == 3 && (!attrs.has_q_num_heads || !attrs.has_kv_num_heads)) {
    return Status::errorf(OP, ": 3-D inputs (", in_ref(rank_src), " has shape ", format_dims(in(rank_src).dims),
                          ") need attributes 'q_num_heads' and 'kv_num_heads' (missing: ",
                          !attrs.has_q_num_heads && !attrs.has_kv_num_heads ? "both"
                          : !attrs.has_q_num_heads                          ? "'q_num_heads'"
                                                                            : "'kv_num_heads'",
                          ")");
  }
  out->rank = rank;
  if (out->mask_kind != MaskKind::none && mask.rank_known) out->mask_dims = mask.dims;
  if (rank < 0) return Status::ok();  // graph time, nothing more to check yet

  // Sizes. Each quantity binds to the first known source; later sources must agree.
  Dim batch{"batch"}, q_heads{"q_num_heads"}, kv_heads{"kv_num_heads"}, q_len{"q_seq"}, kv_len{"kv_seq"},
      head_dim{"head_dim"}, v_head_dim{"v_head_dim"}, past_len{"past_seq"};
  const bool three_d = rank == 3;
  if (three_d) {
    bind_attr(&q_heads, attrs.q_num_heads, "q_num_heads");
    bind_attr(&kv_heads, attrs.kv_num_heads, "kv_num_heads");
  }
  auto dim = [](const TensorDesc& t, int axis) { return t.rank_known ? t.dims[size_t(axis)] : int64_t(-1); };
  if (packed) {
    // [B, S, (Hq + 2 * Hkv) * D]: S is both q_seq and kv_seq, D both head dims.
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&batch, dim(q, 0), ATTN_Q, q, 0));
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&q_len, dim(q, 1), ATTN_Q, q, 1));
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&kv_len, dim(q, 1), ATTN_Q, q, 1));
    const int64_t heads = attrs.q_num_heads + 2 * attrs.kv_num_heads;
    const int64_t last = dim(q, 2);
    if (last >= 0 && last % heads != 0) {
      return Status::errorf(OP, ": with packed_qkv=1, Q's last dim (", last,
                            ") must be (q_num_heads + 2 * kv_num_heads) * head_dim = (", attrs.q_num_heads, " + 2 * ",
                            attrs.kv_num_heads, ") * D = ", heads, " * D (", in_ref(ATTN_Q), " has shape ",
                            format_dims(q.dims), ")");
    }
    const int64_t d = last >= 0 ? last / heads : -1;
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&head_dim, d, ATTN_Q, q, 2, heads));
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&v_head_dim, d, ATTN_Q, q, 2, heads));
  }
  for (int i : {ATTN_Q, ATTN_K, ATTN_V}) {
    const TensorDesc& t = in(i);
    if (packed || !t.rank_known) continue;
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&batch, dim(t, 0), i, t, 0));
    Dim* heads = i == ATTN_Q ? &q_heads : &kv_heads;
    Dim* seq = i == ATTN_Q ? &q_len : &kv_len;
    Dim* hd = i == ATTN_V ? &v_head_dim : &head_dim;
    if (three_d) {
      TRT_FASTOPS_RETURN_IF_ERROR(bind(seq, dim(t, 1), i, t, 1));
      int64_t d = -1;
      TRT_FASTOPS_RETURN_IF_ERROR(split_hidden(i, t, heads->v, heads->src_attr, &d));
      TRT_FASTOPS_RETURN_IF_ERROR(bind(hd, d, i, t, 2, heads->v));
    } else {
      TRT_FASTOPS_RETURN_IF_ERROR(bind(heads, dim(t, 1), i, t, 1));
      TRT_FASTOPS_RETURN_IF_ERROR(bind(seq, dim(t, 2), i, t, 2));
      TRT_FASTOPS_RETURN_IF_ERROR(bind(hd, dim(t, 3), i, t, 3));
    }
  }
  for (int i : {ATTN_PAST_KEY, ATTN_PAST_VALUE}) {
    const TensorDesc& t = in(i);
    if (!t.present || !t.rank_known) continue;
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&batch, dim(t, 0), i, t, 0));
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&kv_heads, dim(t, 1), i, t, 1));
    TRT_FASTOPS_RETURN_IF_ERROR(bind(&past_len, dim(t, 2), i, t, 2));
    TRT_FASTOPS_RETURN_IF_ERROR(bind(i == ATTN_PAST_KEY ? &head_dim : &v_head_dim, dim(t, 3), i, t, 3));
  }
  for (const Dim* h : {&q_heads, &kv_heads}) {
    if (h->v == 0) return Status::errorf(OP, ": ", h->what, " is 0 (from ", source(*h), "), expected >= 1");
  }
  if (q_heads.v > 0 && kv_heads.v > 0 && q_heads.v % kv_heads.v != 0) {
    return Status::errorf(OP, ": q_num_heads ", q_heads.v, " (from ", source(q_heads),
                          ") is not a multiple of kv_num_heads ", kv_heads.v, " (from ", source(kv_heads),
                          "); GQA / MQA need q heads to be a multiple of kv heads");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(check_head_dim(head_dim));
  TRT_FASTOPS_RETURN_IF_ERROR(check_head_dim(v_head_dim));
  if (!out->has_past) past_len.v = 0;
  const int64_t total = (past_len.v >= 0 && kv_len.v >= 0) ? past_len.v + kv_len.v : -1;

  // Mask: right-aligned broadcast to [batch, q_heads, q_seq, total]; the last
  // dim may be shorter than total (padded as masked).
  if (out->mask_kind != MaskKind::none && mask.rank_known) {
    const int64_t target[4] = {batch.v, q_heads.v, q_len.v, total};
    const char* names[4] = {"batch", "q_num_heads", "q_seq", "total_seq (past + kv)"};
    const int r = int(mask.dims.size());
    for (int m = 0; m < r; ++m) {
      const int t = 4 - r + m;
      const int64_t d = mask.dims[size_t(m)];
      if (d < 0 || target[t] < 0) continue;
      const bool ok = t == 3 ? d <= target[t] : (d == 1 || d == target[t]);
      if (!ok) {
        return Status::errorf(OP, ": ", in_ref(ATTN_MASK), " has shape ", format_dims(mask.dims), ": its dim ", m, " is ",
                              d, ", expected ",
                              t == 3 ? str_cat("at most ", target[t]) : str_cat("1 or ", target[t]), " (", names[t],
                              "; the mask broadcasts right-aligned to [batch, q_num_heads, q_seq, total_seq] = ",
                              format_dims(std::vector<int64_t>(target, target + 4)),
                              t == 3 ? ", a shorter last dim is padded as masked)" : ")");
      }
    }
  }

  out->batch = batch.v;
  out->q_heads = q_heads.v;
  out->kv_heads = kv_heads.v;
  out->q_len = q_len.v;
  out->kv_len = kv_len.v;
  out->past_len = past_len.v;
  out->total_len = total;
  out->head_dim = head_dim.v;
  out->v_head_dim = v_head_dim.v;

  auto mul = [](int64_t a, int64_t b) { return a < 0 || b < 0 ? int64_t(-1) : a * b; };
  if (three_d) {
    out->y_dims = {batch.v, q_len.v, mul(q_heads.v, v_head_dim.v)};
  } else {
    out->y_dims = {batch.v, q_heads.v, q_len.v, v_head_dim.v};
  }
  out->present_key_dims = {batch.v, kv_heads.v, total, head_dim.v};
  out->present_value_dims = {batch.v, kv_heads.v, total, v_head_dim.v};

  // Element counts must fit int64 (the params index with it).
  bool overflow = false;
  for (const std::vector<int64_t>* dims : {&out->y_dims, &out->present_key_dims, &out->present_value_dims}) {
    int64_t n = 1;
    for (int64_t d : *dims)
      if (d >= 0) n = checked_mul(n, d, &overflow);
  }
  for (int i = 0; i < s.num_inputs; ++i) {
    const TensorDesc& t = in(i);
    if (!t.present || !t.rank_known) continue;
    int64_t n = 1;
    for (int64_t d : t.dims)
      if (d >= 0) n = checked_mul(n, d, &overflow);
  }
  if (overflow) return Status::errorf(OP, ": the tensors have more elements than fit in int64");
  return Status::ok();
}

Status attention_cuda_dtype_refusal(const AttentionShapes& shapes) {
  if (shapes.dtype == DType::f16 || shapes.dtype == DType::bf16) return Status::ok();
  return Status::errorf(OP, ": ", in_ref(ATTN_Q), " is ", dtype_name(shapes.dtype),
                        "; the CUDA kernel supports float16 and bfloat16 only (cast the attention inputs to float16 or "
                        "bfloat16, or run this node on CPUExecutionProvider)");
}

Status attention_cuda_refusal(const AttentionParams& p) {
  const char* why = attention_unsupported_reason(p);
  if (why == nullptr) return Status::ok();
  return Status::errorf(OP, ": the CUDA kernel cannot run this node: ", why);
}

size_t attention_launch_workspace_bytes(const AttentionAttrs& attrs, const AttentionShapes& shapes) {
  AttentionParams p;
  p.dtype = shapes.dtype;
  p.causal = attrs.is_causal != 0;
  return attention_workspace_bytes(p);
}

Status attention_cuda_error(const char* what, const std::string& error) {
  return Status::errorf(OP, ": ", what, " failed: ", error);
}

Status make_attention_params(const AttentionAttrs& attrs, const AttentionShapes& sh, const AttentionBuffers& buf,
                             AttentionParams* out, AttentionCopies* copies) {
  if (!sh.fully_known()) {
    return Status::errorf(OP, ": internal error: make_attention_params needs fully known shapes (rank ", sh.rank,
                          ", batch ", sh.batch, ", heads ", sh.q_heads, "/", sh.kv_heads, ", seq ", sh.q_len, "/",
                          sh.kv_len, ", head dims ", sh.head_dim, "/", sh.v_head_dim, ")");
  }
  const bool three_d = sh.rank == 3;
  const bool packed = attrs.packed_qkv != 0;
  if (packed && (!three_d || sh.kv_len != sh.q_len || sh.v_head_dim != sh.head_dim)) {
    return Status::errorf(OP, ": internal error: packed_qkv shapes (rank ", sh.rank, ", seq ", sh.q_len, "/",
                          sh.kv_len, ", head dims ", sh.head_dim, "/", sh.v_head_dim, ")");
  }
  AttentionParams p;
  p.dtype = sh.dtype;
  p.batch = sh.batch;
  p.q_heads = sh.q_heads;
  p.kv_heads = sh.kv_heads;
  p.q_len = sh.q_len;
  p.kv_len = sh.total_len;
  p.head_dim = sh.head_dim;
  p.v_head_dim = sh.v_head_dim;
  p.scale = attrs.has_scale ? attrs.scale : float(1.0 / std::sqrt(double(sh.head_dim)));
  p.softcap = attrs.softcap;
  p.causal = attrs.is_causal != 0;
  p.causal_offset = sh.past_len;
  p.workspace = buf.workspace;
  p.workspace_bytes = buf.workspace_bytes;  // unused without a workspace (launch_kernel)

  p.q = buf.inputs[ATTN_Q];
  p.out = buf.outputs[ATTN_Y];
  p.out_view = view_of(three_d, sh.q_heads, sh.q_len, sh.v_head_dim);
  // The new K / V: their own inputs, or (packed) the parts of Q after the Q
  // heads, read in place through Q's row stride.
  const void* k_in = buf.inputs[ATTN_K];
  const void* v_in = buf.inputs[ATTN_V];
  TensorView k_in_view, v_in_view;
  if (packed) {
    p.q_view = k_in_view = v_in_view = packed_view(sh.q_heads, sh.kv_heads, sh.q_len, sh.head_dim);
    k_in = offset_bytes(p.q, sh.q_heads * sh.head_dim, sh.dtype);
    v_in = offset_bytes(p.q, (sh.q_heads + sh.kv_heads) * sh.head_dim, sh.dtype);
  } else {
    p.q_view = view_of(three_d, sh.q_heads, sh.q_len, sh.head_dim);
    k_in_view = view_of(three_d, sh.kv_heads, sh.kv_len, sh.head_dim);
    v_in_view = view_of(three_d, sh.kv_heads, sh.kv_len, sh.v_head_dim);
  }
  const TensorView pk_view = view_of(false, sh.kv_heads, sh.total_len, sh.head_dim);
  const TensorView pv_view = view_of(false, sh.kv_heads, sh.total_len, sh.v_head_dim);
  const TensorView past_k_view = view_of(false, sh.kv_heads, sh.past_len, sh.head_dim);
  const TensorView past_v_view = view_of(false, sh.kv_heads, sh.past_len, sh.v_head_dim);

  // present buffers: the outputs, or scratch when past comes without them.
  void* present[2] = {sh.present_key_out ? buf.outputs[ATTN_PRESENT_KEY] : buf.present_scratch[0],
                      sh.present_value_out ? buf.outputs[ATTN_PRESENT_VALUE] : buf.present_scratch[1]};
  const bool needs[2] = {sh.needs_present_key(), sh.needs_present_value()};

  AttentionCopies c;
  auto add_copy = [&](const void* src, TensorView src_view, void* dst, TensorView dst_view, int64_t seq, int64_t dim) {
    if (sh.batch == 0 || sh.kv_heads == 0 || seq == 0) return;
    AttentionCopy& a = c.items[c.count++];
    a.dtype = sh.dtype;
    a.src = src;
    a.src_view = src_view;
    a.dst = dst;
    a.dst_view = dst_view;
    a.batch = sh.batch;
    a.heads = sh.kv_heads;
    a.seq = seq;
    a.dim = dim;
  };
  for (int which = 0; which < 2; ++which) {
    if (!needs[which]) continue;
    const int64_t dim = which ? sh.v_head_dim : sh.head_dim;
    const TensorView dst_view = which ? pv_view : pk_view;
    if (sh.has_past) {
      add_copy(buf.inputs[which ? ATTN_PAST_VALUE : ATTN_PAST_KEY], which ? past_v_view : past_k_view, present[which],
               dst_view, sh.past_len, dim);
    }
    add_copy(which ? v_in : k_in, which ? v_in_view : k_in_view,
             offset_bytes(present[which], sh.past_len * dim, sh.dtype), dst_view, sh.kv_len, dim);
  }

  // Attend over present when past is given, else over K / V directly.
  if (sh.has_past) {
    p.k = present[0];
    p.k_view = pk_view;
    p.v = present[1];
    p.v_view = pv_view;
  } else {
    p.k = k_in;
    p.k_view = k_in_view;
    p.v = v_in;
    p.v_view = v_in_view;
  }

  // Mask: contiguous strides of its own dims, mapped right-aligned onto
  // [batch, q_heads, q_seq, kv]; size-1 and missing dims broadcast (stride 0).
  int64_t mask_numel = 0;
  p.mask_kind = sh.mask_kind;
  if (sh.mask_kind != MaskKind::none) {
    p.mask_dtype = sh.mask_kind == MaskKind::additive ? sh.mask_dtype : DType::f16;
    p.mask = buf.inputs[ATTN_MASK];
    const int r = int(sh.mask_dims.size());
    if (r < 1 || r > 4) return Status::errorf(OP, ": internal error: mask rank ", r, " in make_attention_params");
    int64_t strides[4] = {0, 0, 0, 0};
    int64_t stride = 1;
    mask_numel = 1;
    for (int m = r - 1; m >= 0; --m) {
      const int64_t d = sh.mask_dims[size_t(m)];
      const int t = 4 - r + m;
      strides[t] = (d == 1 && t != 3) ? 0 : stride;
      stride *= d;
      mask_numel *= d;
    }
    p.mask_stride_b = strides[0];
    p.mask_stride_h = strides[1];
    p.mask_stride_q = strides[2];
    p.mask_stride_k = 1;
    p.mask_kv_len = sh.mask_dims[size_t(r - 1)];
    // No elements but keys in its last dim: a leading dim is 0, so it broadcasts
    // to a 0-sized dim and the problem is empty. Nothing is read; drop it so a
    // null data pointer is not mistaken for a missing mask.
    if (mask_numel == 0 && p.mask_kv_len > 0) {
      p.mask_kind = MaskKind::none;
      p.mask = nullptr;
      p.mask_kv_len = 0;
    }
  }

  // Tensors that hold data must have it (messages built only on failure: hot path).
  auto missing = [](const std::string& ref) { return Status::errorf(OP, ": ", ref, " has no data (null pointer)"); };
  const bool any_q = sh.batch > 0 && sh.q_len > 0;
  const bool any_kv = sh.batch > 0 && sh.kv_len > 0;
  if (any_q && p.q == nullptr) return missing(in_ref(ATTN_Q));
  if (any_q && p.out == nullptr) return missing(out_ref(ATTN_Y));
  // Packed K / V are Q's data (null exactly when Q's is).
  if (any_kv && k_in == nullptr) return missing(in_ref(packed ? ATTN_Q : ATTN_K));
  if (any_kv && v_in == nullptr) return missing(in_ref(packed ? ATTN_Q : ATTN_V));
  if (sh.has_past && sh.batch > 0 && sh.past_len > 0) {
    if (buf.inputs[ATTN_PAST_KEY] == nullptr) return missing(in_ref(ATTN_PAST_KEY));
    if (buf.inputs[ATTN_PAST_VALUE] == nullptr) return missing(in_ref(ATTN_PAST_VALUE));
  }
  if (mask_numel > 0 && p.mask == nullptr) return missing(in_ref(ATTN_MASK));
  if (sh.batch > 0 && sh.total_len > 0) {
    for (int which = 0; which < 2; ++which) {
      if (needs[which] && present[which] == nullptr) {
        const int slot = which ? ATTN_PRESENT_VALUE : ATTN_PRESENT_KEY;
        if (which ? sh.present_value_out : sh.present_key_out) return missing(out_ref(slot));
        return Status::errorf(OP, ": internal error: no scratch buffer for ", sig().outputs[slot].name,
                              " (past is given, the output is not requested)");
      }
    }
  }
  *out = p;
  *copies = c;
  return Status::ok();
}

}  // namespace trt_fastops::attention
