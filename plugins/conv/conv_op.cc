#include "plugins/conv/conv_op.h"

#include <algorithm>

namespace trt_fastops::conv {
namespace {

const ConvSignature SIGNATURES[CONV_OP_COUNT] = {
    {ConvOp::conv, "Conv", false, 3, 1, {{"X", false}, {"W", false}, {"B", true}}, {{"Y", false}},
     /*x*/ 0, /*w*/ 1, /*b*/ 2, /*y*/ 0},
    {ConvOp::conv_transpose, "ConvTranspose", true, 3, 1, {{"X", false}, {"W", false}, {"B", true}},
     {{"Y", false}}, 0, 1, 2, 0},
};

// Attribute values as given (format_dims would show negatives as "?").
std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += str_cat(i ? ", " : "", v[i]);
  return s + "]";
}

// "spatial dim 1 (axis 3 of X)" for messages.
std::string spatial_ref(int i) { return str_cat("spatial dim ", i, " (axis ", i + 2, " of X)"); }

bool all_at_least(const std::vector<int64_t>& v, int64_t lo) {
  return std::all_of(v.begin(), v.end(), [lo](int64_t x) { return x >= lo; });
}

// a * b + c with overflow detection; false on overflow.
bool mul_add(int64_t a, int64_t b, int64_t c, int64_t* r) {
  int64_t m = 0;
  return !__builtin_mul_overflow(a, b, &m) && !__builtin_add_overflow(m, c, r);
}

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

struct AttrInfo {
  const char* name;
  ConvAttrKind kind;
  bool transpose_only;
};

const AttrInfo ATTRS[] = {
    {"kernel_shape", ConvAttrKind::ints, false}, {"strides", ConvAttrKind::ints, false},
    {"dilations", ConvAttrKind::ints, false},    {"pads", ConvAttrKind::ints, false},
    {"auto_pad", ConvAttrKind::string, false},   {"group", ConvAttrKind::int_, false},
    {"activation", ConvAttrKind::string, false}, {"output_padding", ConvAttrKind::ints, true},
    {"output_shape", ConvAttrKind::ints, true},  {"output_crop", ConvAttrKind::ints, true},
};

const AttrInfo* find_attr(ConvOp op, const std::string& name) {
  for (const AttrInfo& a : ATTRS) {
    if (name == a.name && (!a.transpose_only || conv_signature(op).transpose)) return &a;
  }
  return nullptr;
}

Status unknown_attr(ConvOp op, const std::string& name) {
  return unknown_attr_error(conv_op_name(op), name, conv_attr_names(op));
}

}  // namespace

const ConvSignature& conv_signature(ConvOp op) { return signature_at(SIGNATURES, op); }

bool conv_op_from_name(const std::string& name, ConvOp* op) { return op_from_name(SIGNATURES, name, op); }

const char* auto_pad_name(AutoPad p) {
  switch (p) {
    case AutoPad::notset: return "NOTSET";
    case AutoPad::same_upper: return "SAME_UPPER";
    case AutoPad::same_lower: return "SAME_LOWER";
    case AutoPad::valid: return "VALID";
  }
  return "unknown";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::none: return "";
    case Activation::relu: return "Relu";
    case Activation::silu: return "Silu";
    case Activation::gelu: return "Gelu";
  }
  return "unknown";
}

bool ConvShapes::fully_known() const {
  if (spatial < 1 || spatial > CONV_MAX_SPATIAL || n < 0 || c_in < 0 || c_out < 0 || group < 1) return false;
  for (int i = 0; i < spatial; ++i) {
    if (in[i] < 0 || out[i] < 0 || kernel[i] < 1 || pad_begin[i] < 0 || pad_end[i] < 0) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Attributes

std::vector<std::string> conv_attr_names(ConvOp op) {
  std::vector<std::string> names;
  for (const AttrInfo& a : ATTRS)
    if (!a.transpose_only || conv_signature(op).transpose) names.emplace_back(a.name);
  return names;
}

bool conv_attr_kind(const std::string& name, ConvAttrKind* kind) {
  for (const AttrInfo& a : ATTRS) {
    if (name == a.name) {
      *kind = a.kind;
      return true;
    }
  }
  return false;
}

const char* conv_attr_kind_name(ConvAttrKind kind) {
  switch (kind) {
    case ConvAttrKind::ints: return "a list of ints";
    case ConvAttrKind::int_: return "an int";
    case ConvAttrKind::string: return "a string";
  }
  return "unknown";
}

Status conv_attr_type_error(ConvOp op, const std::string& name, const char* found_kind) {
  ConvAttrKind kind = ConvAttrKind::ints;
  if (!find_attr(op, name) || !conv_attr_kind(name, &kind)) return unknown_attr(op, name);
  return attr_kind_error(conv_op_name(op), name, found_kind, conv_attr_kind_name(kind));
}

Status set_conv_attr_ints(ConvOp op, const std::string& name, const std::vector<int64_t>& values,
                          ConvAttrs* attrs) {
  const AttrInfo* a = find_attr(op, name);
  if (!a) return unknown_attr(op, name);
  if (a->kind != ConvAttrKind::ints) return conv_attr_type_error(op, name, conv_attr_kind_name(ConvAttrKind::ints));
  if (name == "kernel_shape") attrs->kernel_shape = values;
  else if (name == "strides") attrs->strides = values;
  else if (name == "dilations") attrs->dilations = values;
  else if (name == "pads") attrs->pads = values;
  else if (name == "output_padding") attrs->output_padding = values;
  else if (name == "output_shape") attrs->output_shape = values;
  else if (name == "output_crop") attrs->output_crop = values;
  return validate_conv_attrs(op, *attrs);
}

Status set_conv_attr_int(ConvOp op, const std::string& name, int64_t value, ConvAttrs* attrs) {
  const AttrInfo* a = find_attr(op, name);
  if (!a) return unknown_attr(op, name);
  if (a->kind != ConvAttrKind::int_) return conv_attr_type_error(op, name, conv_attr_kind_name(ConvAttrKind::int_));
  attrs->group = value;
  return validate_conv_attrs(op, *attrs);
}

Status set_conv_attr_string(ConvOp op, const std::string& name, const std::string& value, ConvAttrs* attrs) {
  const char* op_name = conv_op_name(op);
  const AttrInfo* a = find_attr(op, name);
  if (!a) return unknown_attr(op, name);
  if (a->kind != ConvAttrKind::string)
    return conv_attr_type_error(op, name, conv_attr_kind_name(ConvAttrKind::string));
  if (name == "auto_pad") {
    if (value.empty()) {  // as ONNX Runtime reads it
      attrs->auto_pad = AutoPad::notset;
      return validate_conv_attrs(op, *attrs);
    }
    for (AutoPad p : {AutoPad::notset, AutoPad::same_upper, AutoPad::same_lower, AutoPad::valid}) {
      if (value == auto_pad_name(p)) {
        attrs->auto_pad = p;
        return validate_conv_attrs(op, *attrs);
      }
    }
    return Status::errorf(op_name, ": attribute 'auto_pad' is '", value,
                          "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  for (Activation act : {Activation::none, Activation::relu, Activation::silu, Activation::gelu}) {
    if (value == activation_name(act)) {
      attrs->activation = act;
      return Status::ok();
    }
  }
  return Status::errorf(op_name, ": attribute 'activation' is '", value,
                        "', expected '' (none), 'Relu', 'Silu' or 'Gelu'");
}

Status validate_conv_attrs(ConvOp op, const ConvAttrs& attrs) {
  const ConvSignature& sig = conv_signature(op);
  const char* name = sig.name;
  if (attrs.group < 1) return Status::errorf(name, ": attribute 'group' is ", attrs.group, ", expected >= 1");
  if (!all_at_least(attrs.kernel_shape, 1))
    return Status::errorf(name, ": attribute 'kernel_shape' is ", list(attrs.kernel_shape), ", expected values >= 1");
  if (!all_at_least(attrs.strides, 1))
    return Status::errorf(name, ": attribute 'strides' is ", list(attrs.strides), ", expected values >= 1");
  if (!all_at_least(attrs.dilations, 1))
    return Status::errorf(name, ": attribute 'dilations' is ", list(attrs.dilations), ", expected values >= 1");
  if (!all_at_least(attrs.pads, 0))
    return Status::errorf(name, ": attribute 'pads' is ", list(attrs.pads), ", expected values >= 0");
  if (!attrs.pads.empty() && attrs.auto_pad != AutoPad::notset) {
    return Status::errorf(name, ": attributes 'pads' (", list(attrs.pads), ") and 'auto_pad' (",
                          auto_pad_name(attrs.auto_pad),
                          ") cannot be used together (ONNX computes the pads from auto_pad); remove one");
  }
  if (!sig.transpose && (!attrs.output_padding.empty() || !attrs.output_shape.empty() || !attrs.output_crop.empty())) {
    return unknown_attr(op, !attrs.output_padding.empty() ? "output_padding"
                            : !attrs.output_shape.empty() ? "output_shape"
                                                          : "output_crop");
  }
  if (!all_at_least(attrs.output_padding, 0))
    return Status::errorf(name, ": attribute 'output_padding' is ", list(attrs.output_padding),
                          ", expected values >= 0");
  if (!all_at_least(attrs.output_shape, 1))
    return Status::errorf(name, ": attribute 'output_shape' is ", list(attrs.output_shape), ", expected values >= 1");
  if (!all_at_least(attrs.output_crop, 0))
    return Status::errorf(name, ": attribute 'output_crop' is ", list(attrs.output_crop), ", expected values >= 0");
  if (!attrs.output_crop.empty() && attrs.auto_pad != AutoPad::notset) {
    return Status::errorf(name, ": attribute 'output_crop' (", list(attrs.output_crop), ") adds to explicit pads; it "
                          "cannot be used with auto_pad=", auto_pad_name(attrs.auto_pad));
  }
  if (!attrs.output_crop.empty() && !attrs.output_shape.empty()) {
    return Status::errorf(name, ": attributes 'output_crop' (", list(attrs.output_crop), ") and 'output_shape' (",
                          list(attrs.output_shape), ") cannot be used together (output_shape decides the pads)");
  }
  if (attrs.activation != Activation::none && attrs.activation != Activation::relu &&
      attrs.activation != Activation::silu && attrs.activation != Activation::gelu)
    return Status::errorf(name, ": activation ", int(attrs.activation), " is not none, Relu, Silu or Gelu");
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Shape and dtype inference

namespace {

// Checks the length of a per-spatial-dim attribute.
Status check_len(const char* op, const char* attr, const std::vector<int64_t>& v, size_t want, int spatial,
                 const char* what) {
  if (v.empty() || v.size() == want) return Status::ok();
  return Status::errorf(op, ": attribute '", attr, "' has ", v.size(), " values ", list(v), ", expected ", want,
                        " (", what, " for X's ", spatial, " spatial dim", spatial == 1 ? "" : "s", ")");
}

// One spatial dim of Conv. -1 inputs are unknown; outputs -1 where they depend on them.
Status infer_conv_dim(const ConvSignature& sig, const ConvAttrs& attrs, int i, int spatial, ConvShapes* s) {
  const int64_t in = s->in[i], k = s->kernel[i], st = s->stride[i], d = s->dilation[i];
  const int64_t dk = k >= 1 ? d * (k - 1) + 1 : -1;
  if (attrs.auto_pad == AutoPad::same_upper || attrs.auto_pad == AutoPad::same_lower) {
    s->out[i] = in >= 0 ? (in + st - 1) / st : -1;
    if (in < 0 || dk < 0) {
      s->pad_begin[i] = s->pad_end[i] = -1;
    } else {
      const int64_t total = std::max<int64_t>(0, (s->out[i] - 1) * st + dk - in);
      s->pad_begin[i] = attrs.auto_pad == AutoPad::same_upper ? total / 2 : total - total / 2;
      s->pad_end[i] = total - s->pad_begin[i];
    }
    if (s->out[i] == 0) {
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.x), " has size 0 along ", spatial_ref(i),
                            "; auto_pad=", auto_pad_name(attrs.auto_pad), " gives no output");
    }
    return Status::ok();
  }
  if (attrs.auto_pad == AutoPad::valid) {
    s->pad_begin[i] = s->pad_end[i] = 0;
  } else {
    s->pad_begin[i] = attrs.pads.empty() ? 0 : attrs.pads[i];
    s->pad_end[i] = attrs.pads.empty() ? 0 : attrs.pads[i + spatial];
  }
  if (in < 0 || dk < 0) {
    s->out[i] = -1;
    return Status::ok();
  }
  const int64_t padded = in + s->pad_begin[i] + s->pad_end[i];
  if (padded < dk) {
    return Status::errorf(sig.name, ": no output along ", spatial_ref(i), ": input size ", in, " + pads ",
                          s->pad_begin[i], " + ", s->pad_end[i], " = ", padded, " is smaller than the dilated kernel ",
                          dk, " (kernel ", k, ", dilation ", d, ")");
  }
  s->out[i] = (padded - dk) / st + 1;
  return Status::ok();
}

// One spatial dim of ConvTranspose.
Status infer_transpose_dim(const ConvSignature& sig, const ConvAttrs& attrs, int i, int spatial, ConvShapes* s) {
  const int64_t in = s->in[i], k = s->kernel[i], st = s->stride[i], d = s->dilation[i];
  const int64_t op = attrs.output_padding.empty() ? 0 : attrs.output_padding[i];
  const int64_t dk = k >= 1 ? d * (k - 1) + 1 : -1;
  if (op >= std::max(st, d)) {
    return Status::errorf(sig.name, ": attribute 'output_padding' is ", list(attrs.output_padding),
                          ", expected each value < max(stride, dilation); along ", spatial_ref(i), " it is ", op,
                          " with stride ", st, " and dilation ", d);
  }
  if (in == 0) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.x), " has size 0 along ", spatial_ref(i),
                          ", expected >= 1");
  }
  s->output_padding[i] = op;
  const bool known = in >= 1 && dk >= 1;
  int64_t natural = -1;  // s * (in - 1) + output_padding + dk
  if (known && !mul_add(st, in - 1, op + dk, &natural)) {
    return Status::errorf(sig.name, ": output size along ", spatial_ref(i), " does not fit in int64");
  }
  if (!attrs.output_shape.empty()) {
    const size_t off = attrs.output_shape.size() == size_t(spatial) ? 0 : 2;
    const int64_t want = attrs.output_shape[off + i];
    s->out[i] = want;
    if (!known) {
      s->pad_begin[i] = s->pad_end[i] = -1;
      return Status::ok();
    }
    const int64_t total = natural - want;
    if (total >= 0) {
      s->pad_begin[i] = attrs.auto_pad == AutoPad::same_upper ? total / 2 : total - total / 2;
      s->pad_end[i] = total - s->pad_begin[i];
    } else {
      // Larger than the natural size: the extra elements come after it (output_padding).
      s->pad_begin[i] = s->pad_end[i] = 0;
      s->output_padding[i] = op - total;
    }
  } else if (attrs.auto_pad == AutoPad::same_upper || attrs.auto_pad == AutoPad::same_lower) {
    if (!known) {
      s->out[i] = in >= 1 ? in * st : -1;  // unless the clamp below applies, which needs the kernel
      s->pad_begin[i] = s->pad_end[i] = -1;
      if (dk < 0) s->out[i] = -1;
      return Status::ok();
    }
    const int64_t total = std::max<int64_t>(0, natural - in * st);
    s->pad_begin[i] = attrs.auto_pad == AutoPad::same_upper ? total / 2 : total - total / 2;
    s->pad_end[i] = total - s->pad_begin[i];
    s->out[i] = natural - total;
  } else {
    if (attrs.auto_pad == AutoPad::valid) {
      s->pad_begin[i] = s->pad_end[i] = 0;
    } else {
      s->pad_begin[i] = attrs.pads.empty() ? 0 : attrs.pads[i];
      s->pad_end[i] = attrs.pads.empty() ? 0 : attrs.pads[i + spatial];
      if (!attrs.output_crop.empty()) {  // (validated: only here, with auto_pad NOTSET)
        if (__builtin_add_overflow(s->pad_begin[i], attrs.output_crop[i], &s->pad_begin[i]) ||
            __builtin_add_overflow(s->pad_end[i], attrs.output_crop[i + spatial], &s->pad_end[i])) {
          return Status::errorf(sig.name, ": pads + output_crop along ", spatial_ref(i), " do not fit in int64");
        }
      }
    }
    if (!known) {
      s->out[i] = -1;
      return Status::ok();
    }
    s->out[i] = natural - s->pad_begin[i] - s->pad_end[i];
    if (s->out[i] <= 0) {
      return Status::errorf(sig.name, ": no output along ", spatial_ref(i), ": stride ", st, " * (input size ", in,
                            " - 1) + output_padding ", op, " + dilated kernel ", dk, " (kernel ", k, ", dilation ",
                            d, ") - pads ", s->pad_begin[i], " - ", s->pad_end[i],
                            attrs.output_crop.empty() ? "" : " (pads + output_crop)", " = ", s->out[i],
                            ", expected >= 1");
    }
  }
  // The adjoint rule: a forward conv with the same parameters maps Y's size back to X's.
  const int64_t back = floor_div(s->out[i] + s->pad_begin[i] + s->pad_end[i] - dk, st) + 1;
  if (back != in) {
    const int64_t extra = s->out[i] - (natural - op) + 1 - st;  // > 0 when output_shape asks too much
    if (!attrs.output_shape.empty() && extra > 0) {
      return Status::errorf(sig.name, ": attribute 'output_shape' is ", list(attrs.output_shape), ", but along ",
                            spatial_ref(i), " at most ", natural - op + st - 1, " fits input size ", in,
                            " (stride ", st, ", dilated kernel ", dk, "); got ", s->out[i]);
    }
    return Status::errorf(sig.name, ": output size ", s->out[i], " along ", spatial_ref(i),
                          " is inconsistent with input size ", in, ": a Conv with stride ", st, ", dilated kernel ",
                          dk, " and pads ", s->pad_begin[i], ", ", s->pad_end[i], " maps it to ", back,
                          " (output_padding ", s->output_padding[i], " must be smaller than the stride)");
  }
  return Status::ok();
}

}  // namespace

Status infer_conv(ConvOp op, const ConvAttrs& attrs, const std::vector<TensorDesc>& inputs, ConvShapes* out) {
  const ConvSignature& sig = conv_signature(op);
  *out = ConvShapes();
  if (inputs.size() > size_t(sig.num_inputs)) {
    return Status::errorf(sig.name, ": got ", inputs.size(), " inputs, expected at most ", sig.num_inputs,
                          " (X, W, B?)");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(validate_conv_attrs(op, attrs));
  auto in = [&](int idx) -> const TensorDesc& { return desc_at(inputs, idx); };
  TRT_FASTOPS_RETURN_IF_ERROR(check_required_inputs(sig.name, sig.inputs, sig.num_inputs, inputs));

  // dtypes: X decides, W and B follow it.
  const TensorDesc& x = in(sig.x);
  const TensorDesc& w = in(sig.w);
  const TensorDesc& b = in(sig.b);
  TRT_FASTOPS_RETURN_IF_ERROR(check_input_dtypes(sig.name, sig.inputs, sig.num_inputs, sig.x, inputs));
  out->dtype = x.dtype;
  out->has_bias = b.present;
  out->group = attrs.group;

  // Ranks: X's, else W's (same rank), 3 to 5.
  auto check_rank = [&](int idx, const TensorDesc& t) -> Status {
    const size_t r = t.dims.size();
    if (r < 3 || r > 2 + size_t(CONV_MAX_SPATIAL)) {
      return Status::errorf(sig.name, ": ", input_ref(sig, idx), " has shape ", format_dims(t.dims), " (rank ", r,
                            "), expected rank 3, 4 or 5 ([N, C, D1], [N, C, D1, D2] or [N, C, D1, D2, D3])");
    }
    return Status::ok();
  };
  if (x.rank_known) TRT_FASTOPS_RETURN_IF_ERROR(check_rank(sig.x, x));
  if (w.rank_known) {
    if (!x.rank_known) TRT_FASTOPS_RETURN_IF_ERROR(check_rank(sig.w, w));
    else if (w.dims.size() != x.dims.size())
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.w), " has shape ", format_dims(w.dims), " (rank ",
                            w.dims.size(), "), expected rank ", x.dims.size(), " like X (shape ",
                            format_dims(x.dims), ")");
  }
  if (b.present && b.rank_known && b.dims.size() != 1) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.b), " has shape ", format_dims(b.dims),
                          ", expected a 1-D tensor [C_out]");
  }
  if (!x.rank_known && !w.rank_known) return Status::ok();  // graph time, rank unknown
  const int spatial = int((x.rank_known ? x.dims.size() : w.dims.size()) - 2);
  out->spatial = spatial;

  // Attribute lengths.
  const size_t sp = size_t(spatial);
  TRT_FASTOPS_RETURN_IF_ERROR(check_len(sig.name, "kernel_shape", attrs.kernel_shape, sp, spatial, "one value"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_len(sig.name, "strides", attrs.strides, sp, spatial, "one value"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_len(sig.name, "dilations", attrs.dilations, sp, spatial, "one value"));
  TRT_FASTOPS_RETURN_IF_ERROR(
      check_len(sig.name, "pads", attrs.pads, 2 * sp, spatial, "begin values, then end values,"));
  TRT_FASTOPS_RETURN_IF_ERROR(
      check_len(sig.name, "output_padding", attrs.output_padding, sp, spatial, "one value"));
  TRT_FASTOPS_RETURN_IF_ERROR(
      check_len(sig.name, "output_crop", attrs.output_crop, 2 * sp, spatial, "begin values, then end values,"));
  if (!attrs.output_shape.empty() && attrs.output_shape.size() != sp && attrs.output_shape.size() != sp + 2) {
    return Status::errorf(sig.name, ": attribute 'output_shape' has ", attrs.output_shape.size(), " values ",
                          list(attrs.output_shape), ", expected ", sp, " (the spatial dims) or ", sp + 2,
                          " (N, C and the spatial dims)");
  }

  auto xdim = [&](size_t i) -> int64_t { return x.rank_known ? x.dims[i] : -1; };
  auto wdim = [&](size_t i) -> int64_t { return w.rank_known ? w.dims[i] : -1; };
  const int64_t g = attrs.group;
  out->n = xdim(0);
  out->c_in = xdim(1);
  const int64_t w0 = wdim(0), w1 = wdim(1);

  if (out->c_in >= 0 && out->c_in % g != 0) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.x), " has ", out->c_in, " channels (dim 1 of shape ",
                          format_dims(x.dims), "), not divisible by group ", g);
  }
  if (!sig.transpose) {
    // W: [C_out, C_in / group, kernel...]
    if (out->c_in >= 0 && w1 >= 0 && w1 != out->c_in / g) {
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.w), " has shape ", format_dims(w.dims), "; dim 1 is ",
                            w1, ", expected ", out->c_in / g, " (X's ", out->c_in, " channels / group ", g, ")");
    }
    if (w0 >= 0 && w0 % g != 0) {
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.w), " has shape ", format_dims(w.dims), "; its ",
                            w0, " output channels (dim 0) are not divisible by group ", g);
    }
    out->c_out = w0;
  } else {
    // W: [C_in, C_out / group, kernel...]
    if (out->c_in >= 0 && w0 >= 0 && w0 != out->c_in) {
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.w), " has shape ", format_dims(w.dims), "; dim 0 is ",
                            w0, ", expected ", out->c_in, " (the channels of X)");
    }
    out->c_out = w1 >= 0 ? w1 * g : -1;
  }
  if (b.present && b.rank_known && out->c_out >= 0 && b.dims[0] >= 0 && b.dims[0] != out->c_out) {
    return Status::errorf(sig.name, ": ", input_ref(sig, sig.b), " has shape ", format_dims(b.dims), ", expected [",
                          out->c_out, "] (the output channels: ",
                          sig.transpose ? "group * dim 1 of W)" : "dim 0 of W)");
  }

  // Kernel: W's dims, checked against kernel_shape when both are there.
  for (int i = 0; i < spatial; ++i) {
    const int64_t wk = wdim(size_t(2 + i));
    if (wk == 0) {
      return Status::errorf(sig.name, ": ", input_ref(sig, sig.w), " has shape ", format_dims(w.dims),
                            "; kernel dims (2 on) must be >= 1");
    }
    if (!attrs.kernel_shape.empty() && wk >= 0 && wk != attrs.kernel_shape[i]) {
      std::vector<int64_t> wk_dims(w.dims.begin() + 2, w.dims.end());
      return Status::errorf(sig.name, ": attribute 'kernel_shape' is ", list(attrs.kernel_shape), ", but ",
                            input_ref(sig, sig.w), " has shape ", format_dims(w.dims), " (kernel dims ",
                            format_dims(wk_dims), ")");
    }
    out->kernel[i] = wk >= 0 ? wk : (attrs.kernel_shape.empty() ? -1 : attrs.kernel_shape[i]);
    out->stride[i] = attrs.strides.empty() ? 1 : attrs.strides[i];
    out->dilation[i] = attrs.dilations.empty() ? 1 : attrs.dilations[i];
    out->in[i] = xdim(size_t(2 + i));
  }

  for (int i = 0; i < spatial; ++i) {
    TRT_FASTOPS_RETURN_IF_ERROR(sig.transpose ? infer_transpose_dim(sig, attrs, i, spatial, out)
                                              : infer_conv_dim(sig, attrs, i, spatial, out));
  }

  out->y_dims = {out->n, out->c_out};
  for (int i = 0; i < spatial; ++i) out->y_dims.push_back(out->out[i]);
  // Element counts must fit int64 (the launchers index with it).
  for (const std::vector<int64_t>* dims : {&x.dims, &w.dims, const_cast<const std::vector<int64_t>*>(&out->y_dims)}) {
    int64_t total = 1;
    bool unknown = false, overflow = false;
    for (int64_t v : *dims) {
      if (v < 0) unknown = true;
      else if (__builtin_mul_overflow(total, v, &total)) overflow = true;
    }
    if (overflow && !unknown) {
      return Status::errorf(sig.name, ": shape ", format_dims(*dims), " has more elements than fit in int64");
    }
  }
  return Status::ok();
}

// Every param but the data pointers; `caller` names the API for the internal error.
static Status fill_size_params(ConvOp op, const ConvAttrs& attrs, const ConvShapes& shapes, const char* caller,
                               ConvParams* out) {
  const ConvSignature& sig = conv_signature(op);
  if (!shapes.fully_known()) {
    return Status::errorf(sig.name, ": internal error: ", caller, " needs fully known shapes (Y ",
                          format_dims(shapes.y_dims), ")");
  }
  ConvParams p;
  p.dtype = shapes.dtype;
  p.transpose = sig.transpose;
  p.spatial = shapes.spatial;
  p.n = shapes.n;
  p.c_in = shapes.c_in;
  p.c_out = shapes.c_out;
  p.group = shapes.group;
  for (int i = 0; i < CONV_MAX_SPATIAL; ++i) {
    const bool used = i < shapes.spatial;
    p.in[i] = used ? shapes.in[i] : 1;
    p.out[i] = used ? shapes.out[i] : 1;
    p.kernel[i] = used ? shapes.kernel[i] : 1;
    p.stride[i] = used ? shapes.stride[i] : 1;
    p.dilation[i] = used ? shapes.dilation[i] : 1;
    p.pad_begin[i] = used ? shapes.pad_begin[i] : 0;
    p.pad_end[i] = used ? shapes.pad_end[i] : 0;
    p.output_padding[i] = used && sig.transpose ? shapes.output_padding[i] : 0;
  }
  p.activation = attrs.activation;
  *out = p;
  return Status::ok();
}

Status make_conv_size_params(ConvOp op, const ConvAttrs& attrs, const ConvShapes& shapes, ConvParams* out) {
  return fill_size_params(op, attrs, shapes, "make_conv_size_params", out);
}

Status make_conv_params(ConvOp op, const ConvAttrs& attrs, const ConvShapes& shapes, const ConvBuffers& buffers,
                        ConvParams* out) {
  const ConvSignature& sig = conv_signature(op);
  ConvParams p;
  TRT_FASTOPS_RETURN_IF_ERROR(fill_size_params(op, attrs, shapes, "make_conv_params", &p));
  p.x = buffers.inputs[sig.x];
  p.w = buffers.inputs[sig.w];
  p.bias = shapes.has_bias ? buffers.inputs[sig.b] : nullptr;
  p.y = buffers.outputs[sig.y];

  int64_t x_elems = p.n * p.c_in, y_elems = p.n * p.c_out;
  int64_t w_elems = sig.transpose ? p.c_in * (p.c_out / p.group) : p.c_out * (p.c_in / p.group);
  for (int i = 0; i < p.spatial; ++i) {
    x_elems *= p.in[i];
    y_elems *= p.out[i];
    w_elems *= p.kernel[i];
  }
  if (y_elems > 0) {
    // Messages are built only on failure (this runs on every compute).
    auto missing = [&](const char* what) { return Status::errorf(sig.name, ": ", what, " has no data (null pointer)"); };
    if (p.x == nullptr && x_elems > 0) return missing("input 'X' (index 0)");
    if (p.w == nullptr && w_elems > 0) return missing("input 'W' (index 1)");
    if (shapes.has_bias && p.bias == nullptr) return missing("input 'B' (index 2)");
    if (p.y == nullptr) return missing("output 'Y' (index 0)");
  }
  *out = p;
  return Status::ok();
}

}  // namespace trt_fastops::conv
