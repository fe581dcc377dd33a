#include "plugins/trt/conv_plugin.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "plugins/conv/conv_launch.h"

namespace trt_fastops::trt {
namespace {

using conv::AutoPad;
using conv::ConvAttrKind;
using conv::ConvOp;
using conv::ConvShapes;

constexpr const char* FIELD_MAX_WORKSPACE = "max_workspace_mb";
constexpr int64_t DEFAULT_MAX_WORKSPACE_MB = 256;    // the launcher's default cuDNN limit
constexpr int64_t MAX_WORKSPACE_MB_LIMIT = int64_t(1) << 24;  // 16 TiB: keeps the byte count far from overflow

// The launcher's TRT_FASTOPS_CONV_MAX_WORKSPACE_MB (conv_launch.h), read the
// same way: a non-negative integer, else the default.
int64_t max_workspace_mb_from_env() {
  const char* v = std::getenv("TRT_FASTOPS_CONV_MAX_WORKSPACE_MB");
  if (v == nullptr || *v == '\0') return DEFAULT_MAX_WORKSPACE_MB;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 0) return DEFAULT_MAX_WORKSPACE_MB;
  return std::min<int64_t>(n, MAX_WORKSPACE_MB_LIMIT);
}

bool op_has_attr(ConvOp op, const std::string& name) {
  for (const std::string& n : conv::conv_attr_names(op))
    if (n == name) return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------
// Fields

Status conv_config_from_fields(ConvOp op, const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                               ConvPluginConfig* cfg) {
  const conv::ConvSignature& sig = conv::conv_signature(op);
  *cfg = ConvPluginConfig();
  cfg->op = op;
  // Build time: the environment's limit, as the launcher reads it. Run time:
  // the serialized value (always written), else the default.
  cfg->max_workspace_mb = phase == nv::TensorRTPhase::kBUILD ? max_workspace_mb_from_env() : DEFAULT_MAX_WORKSPACE_MB;
  if (fc.nbFields < 0 || (fc.nbFields > 0 && fc.fields == nullptr)) {
    return Status::errorf(sig.name, ": malformed PluginFieldCollection (", fc.nbFields, " fields)");
  }
  for (int32_t k = 0; k < fc.nbFields; ++k) {
    const nv::PluginField& f = fc.fields[k];
    if (f.name == nullptr) return Status::errorf(sig.name, ": field ", k, " has no name");
    const std::string name = f.name;
    if (name == FIELD_MAX_WORKSPACE) {
      // Plugin-level field (how much workspace to ask TensorRT for), not an op attribute.
      const FieldValue v = read_field(f);
      if (v.kind != FieldValue::Kind::integer || v.i < 0 || v.i > MAX_WORKSPACE_MB_LIMIT) {
        return Status::errorf(sig.name, ": field '", name, "' is ",
                              v.kind == FieldValue::Kind::integer ? std::to_string(v.i) : v.found,
                              ", expected an int in [0, ", MAX_WORKSPACE_MB_LIMIT, "] (MiB of cuDNN workspace)");
      }
      cfg->max_workspace_mb = v.i;
      continue;
    }
    ConvAttrKind kind = ConvAttrKind::ints;
    std::string found;
    if (!op_has_attr(op, name) || !conv::conv_attr_kind(name, &kind)) {
      // Not an attribute of this op: conv_op words the refusal.
      return conv::conv_attr_type_error(op, name, read_field(f).found.c_str());
    }
    switch (kind) {
      case ConvAttrKind::ints: {
        std::vector<int64_t> values;
        if (!read_int_list(f, &values, &found)) return conv::conv_attr_type_error(op, name, found.c_str());
        TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_ints(op, name, values, &cfg->attrs));
        break;
      }
      case ConvAttrKind::int_: {
        const FieldValue v = read_field(f);
        if (v.kind != FieldValue::Kind::integer) return conv::conv_attr_type_error(op, name, v.found.c_str());
        TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_int(op, name, v.i, &cfg->attrs));
        break;
      }
      case ConvAttrKind::string: {
        std::string value;
        if (!read_string(f, &value, &found)) return conv::conv_attr_type_error(op, name, found.c_str());
        TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_string(op, name, value, &cfg->attrs));
        break;
      }
    }
  }
  return conv::validate_conv_attrs(op, cfg->attrs);
}

Status conv_workspace_bound(const ConvPluginConfig& cfg, const ConvShapes& shapes, size_t* bytes) {
  *bytes = 0;
  // The launcher's bound depends on sizes only: no data pointers exist at build time.
  conv::ConvParams p;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::make_conv_size_params(cfg.op, cfg.attrs, shapes, &p));
  return conv::conv_workspace_bound(p, static_cast<size_t>(cfg.max_workspace_mb) << 20, bytes);
}

// ---------------------------------------------------------------------------
// ConvPlugin

ConvPlugin::ConvPlugin(const ConvPluginConfig& cfg, std::string layer_name)
    : PluginBase(conv::conv_op_name(cfg.op), std::move(layer_name)), cfg_(cfg) {}

std::unique_ptr<PluginBase> ConvPlugin::clone_plugin() const { return std::make_unique<ConvPlugin>(*this); }

Status ConvPlugin::check_counts(int32_t nb_inputs, int32_t nb_outputs) const {
  if (nb_outputs != 1) return Status::errorf(sig().name, ": the layer has ", nb_outputs, " outputs, expected 1 (Y)");
  if (nb_inputs < 0) return Status::errorf(sig().name, ": the layer has ", nb_inputs, " inputs");
  // 0, 1 or more than 3 inputs: infer_conv says what is missing or extra.
  return Status::ok();
}

Status ConvPlugin::output_data_types(nv::DataType* output_types, int32_t nb_outputs, const nv::DataType* input_types,
                                     int32_t nb_inputs) const {
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(input_types, nb_inputs, sig().name, "input types"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(output_types, nb_outputs, sig().name, "output types"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_counts(nb_inputs, nb_outputs));
  std::vector<TensorDesc> descs(static_cast<size_t>(nb_inputs));
  for (int32_t i = 0; i < nb_inputs; ++i) {
    descs[i].present = true;
    descs[i].rank_known = false;  // types only
    set_desc_dtype(input_types[i], &descs[i]);
  }
  ConvShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::infer_conv(cfg_.op, cfg_.attrs, descs, &shapes));
  output_types[0] = trt_dtype_of(shapes.dtype);
  return Status::ok();
}

Status ConvPlugin::output_shapes(const nv::DimsExprs* inputs, int32_t nb_inputs, nv::DimsExprs* outputs,
                                 int32_t nb_outputs, nv::IExprBuilder& builder) {
  const char* name = sig().name;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(inputs, nb_inputs, name, "input shapes"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(outputs, nb_outputs, name, "output shapes"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_counts(nb_inputs, nb_outputs));
  std::vector<TensorDesc> descs(static_cast<size_t>(nb_inputs));
  for (int32_t i = 0; i < nb_inputs; ++i) {
    descs[i].present = true;
    set_desc_dims(inputs[i], &descs[i]);  // constant dims are checked now, symbolic ones at run time
  }
  ConvShapes s;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::infer_conv(cfg_.op, cfg_.attrs, descs, &s));
  const nv::DimsExprs& x = inputs[sig().x];
  const nv::DimsExprs& w = inputs[sig().w];
  if (s.spatial < 1 || x.nbDims != s.spatial + 2 || w.nbDims != x.nbDims) {
    return Status::errorf(name, ": input 'X' has rank ", x.nbDims, " and 'W' rank ", w.nbDims,
                          ", expected both 3, 4 or 5");
  }
  for (int32_t j = 0; j < x.nbDims; ++j) {
    if (x.d[j] == nullptr || w.d[j] == nullptr) return Status::errorf(name, ": TensorRT passed a null dimension");
  }

  ExprMaker e(builder, name);
  nv::DimsExprs& y = outputs[0];
  y.nbDims = x.nbDims;
  y.d[0] = x.d[0];  // N
  // C_out: Conv W[0]; ConvTranspose W[1] * group.
  if (!sig().transpose) {
    y.d[1] = w.d[0];
  } else if (cfg_.attrs.group == 1) {
    y.d[1] = w.d[1];
  } else {
    y.d[1] = s.c_out >= 0 ? e.constant(s.c_out) : e.mul(w.d[1], cfg_.attrs.group);
  }
  const AutoPad pad = cfg_.attrs.auto_pad;
  const bool same = pad == AutoPad::same_upper || pad == AutoPad::same_lower;
  for (int i = 0; i < s.spatial; ++i) {
    if (s.out[i] >= 0) {  // known now (constant input, or output_shape)
      y.d[2 + i] = e.constant(s.out[i]);
      continue;
    }
    const ExprMaker::E in = x.d[2 + i];
    const int64_t st = s.stride[i], dl = s.dilation[i];
    // Dilated kernel dl * (k - 1) + 1: a constant when the kernel is known.
    const bool dk_known = s.kernel[i] >= 1;
    const int64_t dk = dk_known ? dl * (s.kernel[i] - 1) + 1 : -1;
    const ExprMaker::E dk_e = dk_known ? nullptr : e.add(e.mul(w.d[2 + i], dl), 1 - dl);
    if (!sig().transpose) {
      if (same) {
        y.d[2 + i] = e.ceil_div(in, st);  // ceil(in / stride)
      } else {
        // floor((in + pads - dk) / stride) + 1; pads are known without auto_pad SAME.
        const int64_t pads = s.pad_begin[i] + s.pad_end[i];
        const ExprMaker::E num =
            dk_known ? e.add(in, pads - dk) : e.bin(nv::DimensionOperation::kSUB, e.add(in, pads), dk_e);
        y.d[2 + i] = e.add(e.floor_div(num, st), 1);
      }
    } else {
      const int64_t op = cfg_.attrs.output_padding.empty() ? 0 : cfg_.attrs.output_padding[size_t(i)];
      const ExprMaker::E in_s = e.mul(in, st);
      // natural = stride * (in - 1) + output_padding + dk = in_s + (op + dk - stride)
      if (same) {
        // min(natural, in * stride)
        if (dk_known) {
          const int64_t extra = op + dk - st;
          y.d[2 + i] = extra >= 0 ? in_s : e.add(in_s, extra);
        } else {
          const ExprMaker::E natural = e.bin(nv::DimensionOperation::kSUM, in_s, e.add(dk_e, op - st));
          y.d[2 + i] = e.bin(nv::DimensionOperation::kMIN, in_s, natural);
        }
      } else {
        const int64_t pads = s.pad_begin[i] + s.pad_end[i];
        y.d[2 + i] = dk_known ? e.add(in_s, op + dk - pads - st)
                              : e.bin(nv::DimensionOperation::kSUM, in_s, e.add(dk_e, op - pads - st));
      }
    }
  }
  TRT_FASTOPS_RETURN_IF_ERROR(e.status());
  for (int32_t j = 0; j < y.nbDims; ++j) {
    if (y.d[j] == nullptr) return Status::errorf(name, ": internal error: output dim ", j, " has no expression");
  }
  return Status::ok();
}

Status ConvPlugin::supports_format(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                                   int32_t nb_outputs, bool* supported) const {
  *supported = false;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(in_out, nb_inputs + nb_outputs, sig().name, "tensor descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_counts(nb_inputs, nb_outputs));
  if (nb_inputs < 2 || nb_inputs > sig().num_inputs) {
    return Status::errorf(sig().name, ": the layer has ", nb_inputs, " inputs, expected 2 or 3 (X, W, B?)");
  }
  if (pos < 0 || pos >= nb_inputs + nb_outputs) {
    return Status::errorf(sig().name, ": supportsFormatCombination: position ", pos, " is out of range [0, ",
                          nb_inputs + nb_outputs, ")");
  }
  const nv::PluginTensorDesc& d = in_out[pos].desc;
  if (d.format != nv::TensorFormat::kLINEAR) return Status::ok();  // NCHW-style contiguous only
  if (pos == 0) {
    DType unused;
    *supported = dtype_from_trt(d.type, &unused);  // X decides
  } else {
    *supported = d.type == in_out[0].desc.type;  // W, B and Y follow X
  }
  return Status::ok();
}

Status ConvPlugin::configure(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs,
                             const nv::DynamicPluginTensorDesc* out, int32_t nb_outputs) {
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(in, nb_inputs, sig().name, "input descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(out, nb_outputs, sig().name, "output descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_counts(nb_inputs, nb_outputs));
  std::vector<TensorDesc> descs(static_cast<size_t>(nb_inputs));
  for (int32_t i = 0; i < nb_inputs; ++i) {
    descs[i].present = true;
    set_desc_dims(in[i].desc.dims, &descs[i]);  // -1 for dims the profile leaves open
    set_desc_dtype(in[i].desc.type, &descs[i]);
  }
  ConvShapes shapes;
  return conv::infer_conv(cfg_.op, cfg_.attrs, descs, &shapes);
}

Status ConvPlugin::workspace_size(const nv::DynamicPluginTensorDesc* inputs, int32_t nb_inputs,
                                  const nv::DynamicPluginTensorDesc* outputs, int32_t nb_outputs,
                                  size_t* bytes) const {
  *bytes = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(inputs, nb_inputs, sig().name, "input descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(outputs, nb_outputs, sig().name, "output descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_counts(nb_inputs, nb_outputs));
  // The profile's largest shapes: the bound only grows with the shapes, so
  // it covers every shape the engine will run (see conv_plugin.h).
  std::vector<TensorDesc> descs(static_cast<size_t>(nb_inputs));
  for (int32_t i = 0; i < nb_inputs; ++i) {
    descs[i].present = true;
    set_desc_dims(inputs[i].max, &descs[i]);
    set_desc_dtype(inputs[i].desc.type, &descs[i]);
  }
  ConvShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::infer_conv(cfg_.op, cfg_.attrs, descs, &shapes));
  if (!shapes.fully_known()) {
    return Status::errorf(sig().name, ": getWorkspaceSize got open dims in the profile's maximum shapes (X ",
                          format_dims(descs.empty() ? std::vector<int64_t>{} : descs[0].dims), ")");
  }
  return conv_workspace_bound(cfg_, shapes, bytes);
}

Status ConvPlugin::shape_change(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                                int32_t nb_outputs) {
  shapes_ready_ = false;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(in, nb_inputs, sig().name, "input descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(out, nb_outputs, sig().name, "output descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(check_counts(nb_inputs, nb_outputs));
  std::vector<TensorDesc> descs(static_cast<size_t>(nb_inputs));
  for (int32_t i = 0; i < nb_inputs; ++i) {
    descs[i].present = true;
    set_desc_dims(in[i].dims, &descs[i]);
    set_desc_dtype(in[i].type, &descs[i]);
  }
  TRT_FASTOPS_RETURN_IF_ERROR(conv::infer_conv(cfg_.op, cfg_.attrs, descs, &shapes_));
  if (!shapes_.fully_known()) {
    return Status::errorf(sig().name, ": onShapeChange got a dynamic dim (X ", format_dims(descs[0].dims), ", W ",
                          format_dims(descs[1].dims), ")");
  }
  std::vector<int64_t> y_dims;
  for (int32_t j = 0; j < out[0].dims.nbDims && j < nv::Dims::MAX_DIMS; ++j) y_dims.push_back(out[0].dims.d[j]);
  if (y_dims != shapes_.y_dims) {
    return Status::errorf(sig().name, ": output 'Y' has shape ", format_dims(y_dims), ", expected ",
                          format_dims(shapes_.y_dims));
  }
  TRT_FASTOPS_RETURN_IF_ERROR(conv_workspace_bound(cfg_, shapes_, &workspace_bound_));
  shapes_ready_ = true;
  return Status::ok();
}

Status ConvPlugin::run(const nv::PluginTensorDesc*, const nv::PluginTensorDesc*, const void* const* inputs,
                       void* const* outputs, void* workspace, cudaStream_t stream) {
  const char* name = sig().name;
  if (!shapes_ready_) return Status::errorf(name, ": enqueue called without a successful onShapeChange");
  if (inputs == nullptr || outputs == nullptr) return Status::errorf(name, ": enqueue got no input or output pointers");
  conv::ConvBuffers buffers;
  buffers.inputs[sig().x] = inputs[sig().x];
  buffers.inputs[sig().w] = inputs[sig().w];
  if (shapes_.has_bias) buffers.inputs[sig().b] = inputs[sig().b];
  buffers.outputs[sig().y] = outputs[0];
  conv::ConvParams p;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::make_conv_params(cfg_.op, cfg_.attrs, shapes_, buffers, &p));

  // A cache hit is a lookup; a miss plans (see conv_plugin.h).
  conv::ConvPlanHandle plan;
  size_t need = 0;
  Status st = conv::conv_prepare(p, stream, &plan, &need);
  if (st.is_ok() && need > workspace_bound_) {
    // cuDNN chose an engine needing more than TensorRT gave us: our kernels,
    // whose workspace is within the bound by construction.
    st = conv::conv_prepare(p, stream, &plan, &need, conv::ConvBackend::fallback);
    if (st.is_ok() && need > workspace_bound_) {
      st = Status::errorf(name, ": internal error: the fallback needs ", need, " bytes of workspace, the bound is ",
                          workspace_bound_);
    }
  }
  if (st.is_ok()) st = conv::conv_run(p, plan, need > 0 ? workspace : nullptr, need, stream);
  if (st.is_ok()) return Status::ok();
  if (st.message().rfind(name, 0) == 0) return st;  // launcher messages name the op already
  return Status::errorf(name, ": ", st.message());
}

void ConvPlugin::serialize_fields(FieldList* fields) const {
  const conv::ConvAttrs& a = cfg_.attrs;
  if (!a.kernel_shape.empty()) fields->add_int64_list("kernel_shape", a.kernel_shape);
  if (!a.strides.empty()) fields->add_int64_list("strides", a.strides);
  if (!a.dilations.empty()) fields->add_int64_list("dilations", a.dilations);
  if (!a.pads.empty()) fields->add_int64_list("pads", a.pads);
  fields->add_string("auto_pad", conv::auto_pad_name(a.auto_pad));
  fields->add_int64("group", a.group);
  fields->add_string("activation", conv::activation_name(a.activation));
  if (!a.output_padding.empty()) fields->add_int64_list("output_padding", a.output_padding);
  if (!a.output_shape.empty()) fields->add_int64_list("output_shape", a.output_shape);
  if (!a.output_crop.empty()) fields->add_int64_list("output_crop", a.output_crop);
  fields->add_int64(FIELD_MAX_WORKSPACE, cfg_.max_workspace_mb);
}

// ---------------------------------------------------------------------------
// Creator

ConvPluginCreator::ConvPluginCreator(ConvOp op) : CreatorBase(conv::conv_op_name(op)), op_(op) {
  for (const std::string& name : conv::conv_attr_names(op)) {
    ConvAttrKind kind = ConvAttrKind::ints;
    conv::conv_attr_kind(name, &kind);
    field_names_.declare(name.c_str(), kind == ConvAttrKind::string ? nv::PluginFieldType::kCHAR
                                                                    : nv::PluginFieldType::kINT64);
  }
  field_names_.declare(FIELD_MAX_WORKSPACE, nv::PluginFieldType::kINT64);
}

Status ConvPluginCreator::create(const std::string& layer_name, const nv::PluginFieldCollection& fc,
                                 nv::TensorRTPhase phase, std::unique_ptr<PluginBase>* plugin) const {
  ConvPluginConfig cfg;
  TRT_FASTOPS_RETURN_IF_ERROR(conv_config_from_fields(op_, fc, phase, &cfg));
  *plugin = std::make_unique<ConvPlugin>(cfg, layer_name);
  return Status::ok();
}

void append_conv_creators(std::vector<nv::IPluginCreatorInterface*>* out) {
  static ConvPluginCreator conv_creator(ConvOp::conv);
  static ConvPluginCreator conv_transpose_creator(ConvOp::conv_transpose);
  out->push_back(&conv_creator);
  out->push_back(&conv_transpose_creator);
}

}  // namespace trt_fastops::trt
