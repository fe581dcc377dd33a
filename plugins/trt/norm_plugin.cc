#include "plugins/trt/norm_plugin.h"

#include <algorithm>
#include <string>

#include "plugins/common/cuda_status.h"
#include "plugins/norm/norm.h"

namespace trt_fastops::trt {
namespace {

using norm::NormOp;
using norm::NormSignature;
using norm::TensorDesc;

}  // namespace

// ---------------------------------------------------------------------------
// Fields

Status norm_config_from_fields(NormOp op, const nv::PluginFieldCollection& fc, NormPluginConfig* cfg) {
  const NormSignature& sig = norm::norm_signature(op);
  *cfg = NormPluginConfig();
  cfg->op = op;
  if (fc.nbFields < 0 || (fc.nbFields > 0 && fc.fields == nullptr)) {
    return Status::errorf(sig.name, ": malformed PluginFieldCollection (", fc.nbFields, " fields)");
  }
  for (int32_t k = 0; k < fc.nbFields; ++k) {
    const nv::PluginField& f = fc.fields[k];
    if (f.name == nullptr) return Status::errorf(sig.name, ": field ", k, " has no name");
    const std::string name = f.name;
    const FieldValue v = read_field(f);
    if (name == FIELD_INPUTS || name == FIELD_OUTPUTS) {
      // Plugin-level fields (which slots the layer has), not op attributes.
      const bool inputs = name == FIELD_INPUTS;
      TRT_FASTOPS_RETURN_IF_ERROR(read_slot_mask(sig.name, f, inputs, inputs ? sig.inputs : sig.outputs,
                                                 inputs ? sig.num_inputs : sig.num_outputs,
                                                 inputs ? &cfg->inputs_mask : &cfg->outputs_mask));
      continue;
    }
    if (v.kind == FieldValue::Kind::integer) {
      TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_int(op, name, v.i, &cfg->attrs));
    } else if (v.kind == FieldValue::Kind::floating) {
      TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_float(op, name, v.f, &cfg->attrs));
    } else {
      bool known = false;
      for (const std::string& n : norm::norm_attr_names(op)) known = known || n == name;
      if (known) return norm::norm_attr_type_error(op, name, v.found.c_str());
      // Not an attribute of the op: let norm_op word the refusal.
      norm::NormAttrs scratch;
      TRT_FASTOPS_RETURN_IF_ERROR(norm::set_norm_attr_int(op, name, 0, &scratch));
      return Status::errorf(sig.name, ": unknown field '", name, "'");
    }
  }
  TRT_FASTOPS_RETURN_IF_ERROR(norm::validate_norm_attrs(op, cfg->attrs));

  // With both masks known, the op's rules on which inputs/outputs exist
  // (required slots, Sum or Bias without Skip) can be checked now.
  if (cfg->inputs_mask >= 0) {
    std::vector<TensorDesc> descs(size_t(sig.num_inputs));
    for (int i = 0; i < sig.num_inputs; ++i) {
      descs[i].present = cfg->inputs_mask >> i & 1;
      descs[i].rank_known = false;
    }
    std::vector<bool> outs(size_t(sig.num_outputs));
    for (int k = 0; k < sig.num_outputs; ++k) outs[k] = cfg->outputs_mask >> k & 1;
    norm::NormShapes unused;
    TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_norm(op, cfg->attrs, descs, outs, &unused));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------
// NormPlugin

NormPlugin::NormPlugin(const NormPluginConfig& cfg, std::string layer_name)
    : PluginBase(norm::norm_op_name(cfg.op), std::move(layer_name)), cfg_(cfg) {
  nb_outputs_ = nb_outputs_of_mask(cfg_.outputs_mask);
}

std::unique_ptr<PluginBase> NormPlugin::clone_plugin() const { return std::make_unique<NormPlugin>(*this); }

Status NormPlugin::output_data_types(nv::DataType* output_types, int32_t nb_outputs, const nv::DataType* input_types,
                                     int32_t nb_inputs) const {
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(input_types, nb_inputs, sig().name, "input types"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(output_types, nb_outputs, sig().name, "output types"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_inputs(
      nb_inputs,
      [&](int32_t i, TensorDesc* d) {
        d->rank_known = false;  // types only
        set_desc_dtype(input_types[i], d);
      },
      &descs, &slots));
  norm::NormShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_norm(cfg_.op, cfg_.attrs, descs, slot_layout().outputs_present(), &shapes));
  for (int32_t k = 0; k < nb_outputs; ++k)
    output_types[k] = is_stat_output(k) ? nv::DataType::kFLOAT : trt_dtype_of(shapes.dtype);
  return Status::ok();
}

Status NormPlugin::output_shapes(const nv::DimsExprs* inputs, int32_t nb_inputs, nv::DimsExprs* outputs,
                                 int32_t nb_outputs, nv::IExprBuilder& builder) {
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(inputs, nb_inputs, sig().name, "input shapes"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(outputs, nb_outputs, sig().name, "output shapes"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_inputs(
      nb_inputs,
      [&](int32_t i, TensorDesc* d) {
        // Build time: constant dims are checked now, symbolic ones at run time.
        const nv::DimsExprs& e = inputs[i];
        d->rank_known = e.nbDims >= 0;
        for (int32_t j = 0; j < e.nbDims && j < nv::Dims::MAX_DIMS; ++j) {
          const nv::IDimensionExpr* x = e.d[j];
          d->dims.push_back(x != nullptr && x->isConstant() ? x->getConstantValue() : -1);
        }
      },
      &descs, &slots));
  norm::NormShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_norm(cfg_.op, cfg_.attrs, descs, slot_layout().outputs_present(), &shapes));

  // X is slot 0 and required, so it is the layer's input 0.
  const nv::DimsExprs& x = inputs[0];
  const int32_t rank = x.nbDims;
  if (rank < 1 || rank > nv::Dims::MAX_DIMS || shapes.axis < 0) {
    return Status::errorf(sig().name, ": input 'X' has rank ", rank, ", expected 1 to ", nv::Dims::MAX_DIMS);
  }
  const nv::IDimensionExpr* one = nullptr;
  for (int32_t k = 0; k < nb_outputs; ++k) {
    nv::DimsExprs& o = outputs[k];
    o.nbDims = rank;
    for (int32_t j = 0; j < rank; ++j) {
      if (is_stat_output(k) && j >= shapes.axis) {
        // Mean / InvStdDev: X.shape[:axis] + [1] * (rank - axis)
        if (one == nullptr) one = builder.constant(1);
        if (one == nullptr) return Status::errorf(sig().name, ": IExprBuilder::constant(1) failed");
        o.d[j] = one;
      } else {
        o.d[j] = x.d[j];  // Y, Sum: X's dims
      }
    }
  }
  return Status::ok();
}

Status NormPlugin::supports_format(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                                   int32_t nb_outputs, bool* supported) const {
  *supported = false;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(in_out, nb_inputs + nb_outputs, sig().name, "tensor descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().input_slots(nb_inputs, &slots));
  if (nb_inputs > sig().num_inputs || nb_inputs < 1) {
    return Status::errorf(sig().name, ": the layer has ", nb_inputs, " inputs, expected 1 to ", sig().num_inputs);
  }
  if (pos < 0 || pos >= nb_inputs + nb_outputs) {
    return Status::errorf(sig().name, ": supportsFormatCombination: position ", pos, " is out of range [0, ",
                          nb_inputs + nb_outputs, ")");
  }
  const nv::PluginTensorDesc& d = in_out[pos].desc;
  if (d.format != nv::TensorFormat::kLINEAR) return Status::ok();
  if (pos >= nb_inputs && is_stat_output(pos - nb_inputs)) {
    *supported = d.type == nv::DataType::kFLOAT;  // Mean / InvStdDev are float32
  } else if (pos == 0) {
    DType unused;
    *supported = dtype_from_trt(d.type, &unused);  // X decides
  } else {
    *supported = d.type == in_out[0].desc.type;  // everything else follows X
  }
  return Status::ok();
}

Status NormPlugin::configure(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs,
                             const nv::DynamicPluginTensorDesc* out, int32_t nb_outputs) {
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_descs(in, nb_inputs, out, nb_outputs, &descs, &slots));
  norm::NormShapes shapes;
  return norm::infer_norm(cfg_.op, cfg_.attrs, descs, slot_layout().outputs_present(), &shapes);
}

Status NormPlugin::shape_change(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                                int32_t nb_outputs) {
  shapes_ready_ = false;
  std::vector<TensorDesc> descs;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_descs(in, nb_inputs, out, nb_outputs, &descs, &run_slots_));
  TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_norm(cfg_.op, cfg_.attrs, descs, slot_layout().outputs_present(), &shapes_));
  for (int64_t d : shapes_.y_dims) {
    if (d < 0) return Status::errorf(sig().name, ": onShapeChange got a dynamic dim in X ", norm::format_dims(shapes_.y_dims));
  }
  shapes_ready_ = true;
  return Status::ok();
}

Status NormPlugin::run(const nv::PluginTensorDesc*, const nv::PluginTensorDesc*, const void* const* inputs,
                       void* const* outputs, void*, cudaStream_t stream) {
  // Everything shape-dependent was derived in onShapeChange; this only maps
  // pointers to slots and launches (no allocation, no synchronisation).
  if (!shapes_ready_) {
    return Status::errorf(sig().name, ": enqueue called without a successful onShapeChange");
  }
  const int32_t nb_inputs = static_cast<int32_t>(run_slots_.size());
  if ((nb_inputs > 0 && inputs == nullptr) || outputs == nullptr) {
    return Status::errorf(sig().name, ": enqueue got no input or output pointers");
  }
  norm::NormBuffers buffers;
  for (int32_t i = 0; i < nb_inputs; ++i) buffers.inputs[run_slots_[size_t(i)]] = inputs[i];
  for (int32_t k = 0; k < nb_outputs_; ++k) {
    if (cfg_.outputs_mask >> k & 1) buffers.outputs[k] = outputs[k];  // placeholders stay null: not written
  }
  norm::NormParams p;
  TRT_FASTOPS_RETURN_IF_ERROR(norm::make_norm_params(cfg_.op, cfg_.attrs, shapes_, buffers, &p));
  const cudaError_t err = norm::launch_norm(p, stream);
  if (err != cudaSuccess) {
    return Status::errorf(sig().name, ": CUDA kernel ", norm::norm_kernel_name(p),
                          " failed: ", cuda_error_string(err));
  }
  return Status::ok();
}

void NormPlugin::serialize_fields(FieldList* fields) const {
  fields->add_int64("axis", cfg_.attrs.axis);
  fields->add_float32("epsilon", cfg_.attrs.epsilon);
  if (sig().has_stash_type) fields->add_int64("stash_type", cfg_.attrs.stash_type);
  if (cfg_.inputs_mask >= 0) fields->add_int32(FIELD_INPUTS, cfg_.inputs_mask);
  fields->add_int32(FIELD_OUTPUTS, cfg_.outputs_mask);
}

// ---------------------------------------------------------------------------
// Creator

NormPluginCreator::NormPluginCreator(NormOp op) : CreatorBase(norm::norm_op_name(op)), op_(op) {
  for (const std::string& name : norm::norm_attr_names(op)) {
    field_names_.declare(name.c_str(), norm::norm_attr_is_int(name) ? nv::PluginFieldType::kINT64
                                                                    : nv::PluginFieldType::kFLOAT32);
  }
  field_names_.declare(FIELD_INPUTS, nv::PluginFieldType::kINT32);
  field_names_.declare(FIELD_OUTPUTS, nv::PluginFieldType::kINT32);
}

Status NormPluginCreator::create(const std::string& layer_name, const nv::PluginFieldCollection& fc,
                                 nv::TensorRTPhase, std::unique_ptr<PluginBase>* plugin) const {
  // Both phases read the same fields: at build time the node's attributes,
  // at run time what getFieldsToSerialize wrote into the engine.
  NormPluginConfig cfg;
  TRT_FASTOPS_RETURN_IF_ERROR(norm_config_from_fields(op_, fc, &cfg));
  *plugin = std::make_unique<NormPlugin>(cfg, layer_name);
  return Status::ok();
}

void append_norm_creators(std::vector<nv::IPluginCreatorInterface*>* out) {
  static NormPluginCreator layer_norm(NormOp::layer_norm);
  static NormPluginCreator skip_layer_norm(NormOp::skip_layer_norm);
  static NormPluginCreator rms_norm(NormOp::rms_norm);
  out->push_back(&layer_norm);
  out->push_back(&skip_layer_norm);
  out->push_back(&rms_norm);
}

}  // namespace trt_fastops::trt
