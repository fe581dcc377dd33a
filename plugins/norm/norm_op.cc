#include "plugins/norm/norm_op.h"

#include <cmath>
#include <limits>

namespace trt_fastops::norm {
namespace {

// Signatures. Index fields are -1 where the op lacks the role.
const NormSignature SIGNATURES[NORM_OP_COUNT] = {
    {NormOp::layer_norm, "LayerNorm", NormKind::layer, 3, 3,
     {{"X", false}, {"Scale", false}, {"B", true}},
     {{"Y", false}, {"Mean", true}, {"InvStdDev", true}},
     /*x*/ 0, /*skip*/ -1, /*scale*/ 1, /*b*/ 2, /*bias*/ -1,
     /*y*/ 0, /*mean*/ 1, /*inv_std_dev*/ 2, /*sum*/ -1,
     /*has_stash_type*/ true},
    {NormOp::skip_layer_norm, "SkipLayerNorm", NormKind::layer, 5, 4,
     {{"X", false}, {"Skip", false}, {"Scale", false}, {"B", true}, {"Bias", true}},
     {{"Y", false}, {"Mean", true}, {"InvStdDev", true}, {"Sum", true}},
     0, 1, 2, 3, 4,
     0, 1, 2, 3,
     false},
    {NormOp::rms_norm, "RMSNorm", NormKind::rms, 4, 2,
     {{"X", false}, {"Scale", false}, {"Skip", true}, {"Bias", true}},
     {{"Y", false}, {"Sum", true}},
     0, 2, 1, -1, 3,
     0, -1, -1, 1,
     true},
};

bool all_known(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) return false;
  return true;
}

std::vector<int64_t> strip_leading_ones(const std::vector<int64_t>& dims, size_t begin = 0) {
  size_t i = begin;
  while (i < dims.size() && dims[i] == 1) ++i;
  return std::vector<int64_t>(dims.begin() + i, dims.end());
}

std::string input_list(const NormSignature& sig) {
  std::string s;
  for (int i = 0; i < sig.num_inputs; ++i) {
    if (i) s += ", ";
    s += sig.inputs[i].name;
    if (sig.inputs[i].optional) s += "?";
  }
  return s;
}

std::string output_list(const NormSignature& sig) {
  std::string s;
  for (int i = 0; i < sig.num_outputs; ++i) {
    if (i) s += ", ";
    s += sig.outputs[i].name;
    if (sig.outputs[i].optional) s += "?";
  }
  return s;
}

// Scale / B / Bias: one element (when allowed), or equal to the normalized
// shape once leading 1s are dropped from both.
Status check_param_shape(const NormSignature& sig, int idx, const TensorDesc& t,
                         const std::vector<int64_t>& x_dims, int64_t axis, bool allow_scalar,
                         bool* scalar) {
  *scalar = false;
  if (!t.rank_known || axis < 0) return Status::ok();
  std::vector<int64_t> normalized(x_dims.begin() + axis, x_dims.end());
  if (!all_known(t.dims) || !all_known(normalized)) return Status::ok();  // decided at run time
  bool overflow = false;
  int64_t numel = dims_product(t.dims, 0, t.dims.size(), &overflow);
  if (allow_scalar && numel == 1) {
    *scalar = true;
    return Status::ok();
  }
  if (strip_leading_ones(t.dims) == strip_leading_ones(normalized)) return Status::ok();
  return Status::errorf(sig.name, ": ", input_ref(sig, idx), " has shape ", format_dims(t.dims),
                        ", expected the normalized shape ", format_dims(normalized), " of X (dims [",
                        axis, ", ", x_dims.size(), "))", allow_scalar ? " or a single element" : "");
}

// Skip: after dropping leading 1s, a suffix of X's shape that covers every
// normalized dim of size > 1 (broadcast over leading dims only), so that Skip
// viewed as [skip_rows, cols] serves row r from row r % skip_rows.
Status check_skip_shape(const NormSignature& sig, int idx, const TensorDesc& t,
                        const std::vector<int64_t>& x_dims, int64_t axis, int64_t cols,
                        int64_t* skip_rows) {
  *skip_rows = -1;
  if (!t.rank_known || axis < 0) return Status::ok();
  if (!all_known(t.dims) || !all_known(x_dims)) return Status::ok();
  std::vector<int64_t> s = strip_leading_ones(t.dims);
  const size_t rank = x_dims.size();
  bool ok = s.size() <= rank;
  for (size_t i = 0; ok && i < s.size(); ++i) ok = s[i] == x_dims[rank - s.size() + i];
  // Normalized dims left uncovered by the stripped suffix must be 1s.
  for (size_t i = size_t(axis); ok && i + s.size() < rank; ++i) ok = x_dims[i] == 1;
  if (!ok) {
    return Status::errorf(sig.name, ": ", input_ref(sig, idx), " has shape ", format_dims(t.dims),
                          ", expected X's shape ", format_dims(x_dims),
                          " or a suffix of it that covers the normalized dims [", axis, ", ", rank,
                          ") (Skip broadcasts over leading dims only; its leading 1s are ignored)");
  }
  bool overflow = false;
  int64_t numel = dims_product(t.dims, 0, t.dims.size(), &overflow);
  *skip_rows = cols > 0 ? numel / cols : 0;
  return Status::ok();
}

}  // namespace

const NormSignature& norm_signature(NormOp op) { return signature_at(SIGNATURES, op); }

bool norm_op_from_name(const std::string& name, NormOp* op) { return op_from_name(SIGNATURES, name, op); }

// ---------------------------------------------------------------------------
// Attributes

std::vector<std::string> norm_attr_names(NormOp op) {
  std::vector<std::string> names = {"axis", "epsilon"};
  if (norm_signature(op).has_stash_type) names.push_back("stash_type");
  return names;
}

bool norm_attr_is_int(const std::string& name) { return name == "axis" || name == "stash_type"; }

static Status unknown_attr(NormOp op, const std::string& name) {
  return unknown_attr_error(norm_op_name(op), name, norm_attr_names(op));
}

Status set_norm_attr_int(NormOp op, const std::string& name, int64_t value, NormAttrs* attrs) {
  if (name == "axis") {
    attrs->axis = value;  // range depends on X's rank: checked by infer_norm
    return Status::ok();
  }
  if (name == "stash_type" && norm_signature(op).has_stash_type) {
    attrs->stash_type = value;
    return validate_norm_attrs(op, *attrs);
  }
  if (name == "epsilon") return norm_attr_type_error(op, name, "an int");
  return unknown_attr(op, name);
}

Status set_norm_attr_float(NormOp op, const std::string& name, double value, NormAttrs* attrs) {
  if (name == "epsilon") {
    attrs->epsilon = static_cast<float>(value);
    if (!std::isfinite(value) || value < 0 || !std::isfinite(attrs->epsilon)) {
      return Status::errorf(norm_op_name(op), ": attribute 'epsilon' is ", value,
                            ", expected a finite float >= 0");
    }
    return Status::ok();
  }
  bool known = name == "axis" || (name == "stash_type" && norm_signature(op).has_stash_type);
  if (known) return norm_attr_type_error(op, name, "a float");
  return unknown_attr(op, name);
}

Status norm_attr_type_error(NormOp op, const std::string& name, const char* found_kind) {
  return attr_kind_error(norm_op_name(op), name, found_kind, norm_attr_is_int(name) ? "an int" : "a float");
}

Status validate_norm_attrs(NormOp op, const NormAttrs& attrs) {
  const char* name = norm_op_name(op);
  if (!std::isfinite(attrs.epsilon) || attrs.epsilon < 0) {
    return Status::errorf(name, ": attribute 'epsilon' is ", attrs.epsilon,
                          ", expected a finite float >= 0");
  }
  if (norm_signature(op).has_stash_type && attrs.stash_type != 1) {
    return Status::errorf(name, ": attribute 'stash_type' is ", attrs.stash_type,
                          ", expected 1 (float32 statistics; other values are not supported)");
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Shape and dtype inference

Status infer_norm(NormOp op, const NormAttrs& attrs, const std::vector<TensorDesc>& inputs,
                  const std::vector<bool>& outputs_present, NormShapes* out) {
  const NormSignature& sig = norm_signature(op);
  *out = NormShapes();
  if (inputs.size() > size_t(sig.num_inputs)) {
    return Status::errorf(sig.name, ": got ", inputs.size(), " inputs, expected at most ",
                          sig.num_inputs, " (", input_list(sig), ")");
  }
  if (outputs_present.size() > size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": got ", outputs_present.size(), " outputs, expected at most ",
                          sig.num_outputs, " (", output_list(sig), ")");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(validate_norm_attrs(op, attrs));

  auto in = [&](int idx) -> const TensorDesc& { return desc_at(inputs, idx); };
  auto out_present = [&](int idx) -> bool {
    if (idx < 0) return false;
    if (outputs_present.empty()) return idx == sig.y;  // nothing said: Y only
    return size_t(idx) < outputs_present.size() && outputs_present[idx];
  };

  TRT_FASTOPS_RETURN_IF_ERROR(check_required_inputs(sig.name, sig.inputs, sig.num_inputs, inputs));
  if (!out_present(sig.y)) {
    return Status::errorf(sig.name, ": ", output_ref(sig, sig.y), " is missing; it is required");
  }

  // dtypes: X decides, everything else follows it.
  const TensorDesc& x = in(sig.x);
  TRT_FASTOPS_RETURN_IF_ERROR(check_input_dtypes(sig.name, sig.inputs, sig.num_inputs, sig.x, inputs));
  out->dtype = x.dtype;

  // Which optional pieces are used.
  out->has_skip = sig.skip >= 0 && in(sig.skip).present;
  out->has_bias = sig.bias >= 0 && in(sig.bias).present;
  out->has_beta = sig.b >= 0 && in(sig.b).present;
  if (op == NormOp::rms_norm && !out->has_skip) {
    if (out->has_bias) {
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.bias), " is given without ",
                            input_ref(sig, sig.skip), "; Bias is added together with Skip");
    }
    if (out_present(sig.sum)) {
      return Status::errorf(sig.name, ": ", output_ref(sig, sig.sum), " is requested without ",
                            input_ref(sig, sig.skip), "; Sum is X + Skip (+ Bias)");
    }
  }

  // X: rank, axis, rows/cols.
  if (!x.rank_known) return Status::ok();  // graph time, nothing more to check yet
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (rank == 0) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.x),
                          " is a scalar (shape []), expected a tensor of rank >= 1");
  }
  if (attrs.axis < -rank || attrs.axis >= rank) {
    return Status::errorf(sig.name, ": attribute 'axis' is ", attrs.axis, ", expected a value in [",
                          -rank, ", ", rank, ") for ", input_ref(sig, sig.x), " of rank ", rank,
                          " (shape ", format_dims(x.dims), ")");
  }
  const int64_t axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
  bool overflow = false;
  const int64_t rows = dims_product(x.dims, 0, size_t(axis), &overflow);
  const int64_t cols = dims_product(x.dims, size_t(axis), size_t(rank), &overflow);
  bool total_overflow = false;
  dims_product(x.dims, 0, size_t(rank), &total_overflow);
  if (overflow || total_overflow) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.x), " has shape ", format_dims(x.dims),
                          ", more elements than fit in int64");
  }
  if (cols == 0) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.x), " has shape ", format_dims(x.dims),
                          "; its normalized dims [", axis, ", ", rank,
                          ") hold no elements, expected at least one");
  }
  out->rank = rank;
  out->axis = axis;
  out->rows = rows;
  out->cols = cols;
  out->y_dims = x.dims;
  out->stat_dims.assign(x.dims.begin(), x.dims.begin() + axis);
  out->stat_dims.resize(size_t(rank), 1);

  TRT_FASTOPS_RETURN_IF_ERROR(
      check_param_shape(sig, sig.scale, in(sig.scale), x.dims, axis, true, &out->gamma_scalar));
  if (out->has_beta) {
    TRT_FASTOPS_RETURN_IF_ERROR(
        check_param_shape(sig, sig.b, in(sig.b), x.dims, axis, true, &out->beta_scalar));
  }
  if (out->has_bias) {
    bool unused = false;
    TRT_FASTOPS_RETURN_IF_ERROR(
        check_param_shape(sig, sig.bias, in(sig.bias), x.dims, axis, false, &unused));
  }
  if (out->has_skip) {
    TRT_FASTOPS_RETURN_IF_ERROR(
        check_skip_shape(sig, sig.skip, in(sig.skip), x.dims, axis, cols, &out->skip_rows));
  }
  return Status::ok();
}

Status make_norm_params(NormOp op, const NormAttrs& attrs, const NormShapes& shapes,
                        const NormBuffers& buffers, NormParams* out) {
  const NormSignature& sig = norm_signature(op);
  if (shapes.rank < 1 || shapes.rows < 0 || shapes.cols <= 0 ||
      (shapes.has_skip && shapes.skip_rows < 0)) {
    return Status::errorf(sig.name, ": internal error: make_norm_params needs fully known shapes "
                          "(rank ", shapes.rank, ", rows ", shapes.rows, ", cols ", shapes.cols, ")");
  }
  NormParams p;
  p.kind = sig.kind;
  p.dtype = shapes.dtype;
  p.rows = shapes.rows;
  p.cols = shapes.cols;
  p.epsilon = attrs.epsilon;
  p.gamma_scalar = shapes.gamma_scalar;
  p.beta_scalar = shapes.beta_scalar;
  p.x = buffers.inputs[sig.x];
  p.gamma = buffers.inputs[sig.scale];
  if (shapes.has_beta) p.beta = buffers.inputs[sig.b];
  if (shapes.has_skip) {
    p.skip = buffers.inputs[sig.skip];
    p.skip_rows = shapes.skip_rows;
  }
  if (shapes.has_bias) p.bias = buffers.inputs[sig.bias];
  p.y = buffers.outputs[sig.y];
  if (sig.mean >= 0) p.mean_out = static_cast<float*>(buffers.outputs[sig.mean]);
  if (sig.inv_std_dev >= 0) p.rstd_out = static_cast<float*>(buffers.outputs[sig.inv_std_dev]);
  if (sig.sum >= 0) p.sum_out = buffers.outputs[sig.sum];

  if (p.rows > 0) {  // tensors that hold data must have it (messages built only on failure: hot path)
    auto missing_input = [&](int idx) {
      return Status::errorf(sig.name, ": ", input_ref(sig, idx), " has no data (null pointer)");
    };
    if (p.x == nullptr) return missing_input(sig.x);
    if (p.gamma == nullptr) return missing_input(sig.scale);
    if (shapes.has_beta && p.beta == nullptr) return missing_input(sig.b);
    if (shapes.has_skip) {
      if (p.skip == nullptr) return missing_input(sig.skip);
      if (p.skip_rows <= 0 || p.rows % p.skip_rows != 0) {
        return Status::errorf(sig.name, ": internal error: skip_rows ", p.skip_rows,
                              " does not divide rows ", p.rows);
      }
    }
    if (shapes.has_bias && p.bias == nullptr) return missing_input(sig.bias);
    if (p.y == nullptr) {
      return Status::errorf(sig.name, ": ", output_ref(sig, sig.y), " has no data (null pointer)");
    }
  }
  *out = p;
  return Status::ok();
}

}  // namespace trt_fastops::norm
