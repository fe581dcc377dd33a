#include "plugins/trt/attention_plugin.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_copy.h"
#include "plugins/common/cuda_status.h"

namespace trt_fastops::trt {
namespace {

namespace at = attention;

constexpr size_t SCRATCH_ALIGN = 256;

size_t align_up(size_t v) { return (v + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN; }

const at::AttentionSignature& sig() { return at::attention_signature(); }

// Bytes of the present_key (which = 0) / present_value (1) scratch buffer;
// 0 when that buffer is an output or not needed.
size_t scratch_bytes(const at::AttentionShapes& s, int which) {
  if (!s.has_past || (which ? s.present_value_out : s.present_key_out)) return 0;
  const int64_t b = s.present_bytes(which != 0);
  return b > 0 ? static_cast<size_t>(b) : 0;
}

// Plugin-level field: the engine's workspace has room for the launcher's.
constexpr const char* FIELD_SCHEDULE_WORKSPACE = "schedule_workspace";

// Bytes of the launcher's part of the workspace (0 for configs without it).
size_t launcher_bytes(const AttentionPluginConfig& cfg, const at::AttentionShapes& s) {
  return cfg.schedule_workspace ? at::attention_launch_workspace_bytes(cfg.attrs, s) : 0;
}

std::vector<int64_t> dims_of(const nv::Dims& d) {
  std::vector<int64_t> v;
  for (int32_t j = 0; j < d.nbDims && j < nv::Dims::MAX_DIMS; ++j) v.push_back(d.d[j]);
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------
// Fields

Status attention_config_from_fields(const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                                    AttentionPluginConfig* cfg) {
  const char* name_op = sig().name;
  *cfg = AttentionPluginConfig();
  cfg->schedule_workspace = phase == nv::TensorRTPhase::kBUILD;
  if (fc.nbFields < 0 || (fc.nbFields > 0 && fc.fields == nullptr)) {
    return Status::errorf(name_op, ": malformed PluginFieldCollection (", fc.nbFields, " fields)");
  }
  for (int32_t k = 0; k < fc.nbFields; ++k) {
    const nv::PluginField& f = fc.fields[k];
    if (f.name == nullptr) return Status::errorf(name_op, ": field ", k, " has no name");
    const std::string name = f.name;
    if (name == FIELD_INPUTS || name == FIELD_OUTPUTS) {
      // Plugin-level fields (which slots the layer has), not op attributes.
      const bool inputs = name == FIELD_INPUTS;
      TRT_FASTOPS_RETURN_IF_ERROR(read_slot_mask(name_op, f, inputs, inputs ? sig().inputs : sig().outputs,
                                                 inputs ? sig().num_inputs : sig().num_outputs,
                                                 inputs ? &cfg->inputs_mask : &cfg->outputs_mask));
      continue;
    }
    if (name == FIELD_SCHEDULE_WORKSPACE) {
      const FieldValue v = read_field(f);
      if (v.kind != FieldValue::Kind::integer || (v.i != 0 && v.i != 1)) {
        return Status::errorf(name_op, ": field '", name, "' is ",
                              v.kind == FieldValue::Kind::integer ? std::to_string(v.i) : v.found, ", expected 0 or 1");
      }
      cfg->schedule_workspace = v.i != 0;
      continue;
    }
    const FieldValue v = read_field(f);
    if (v.kind == FieldValue::Kind::integer) {
      TRT_FASTOPS_RETURN_IF_ERROR(at::set_attention_attr_int(name, v.i, &cfg->attrs));
    } else if (v.kind == FieldValue::Kind::floating) {
      TRT_FASTOPS_RETURN_IF_ERROR(at::set_attention_attr_float(name, v.f, &cfg->attrs));
    } else {
      // Unknown names are refused by the op layer with the list of attributes.
      return at::attention_attr_type_error(name, v.found.c_str());
    }
  }
  TRT_FASTOPS_RETURN_IF_ERROR(at::validate_attention_attrs(cfg->attrs));

  // The op's rules on which inputs / outputs exist (Q, K, V required, or Q
  // alone with packed_qkv; past_key with past_value; qk_matmul_output not
  // supported) can be checked now. Without 'inputs' the layer is Q, K, V (Q
  // alone when packed: more inputs need the field, see check_layer_inputs).
  const bool packed = cfg->attrs.packed_qkv != 0;
  std::vector<TensorDesc> descs(size_t(sig().num_inputs));
  for (int i = 0; i < sig().num_inputs; ++i) {
    const int last_default = packed ? at::ATTN_Q : at::ATTN_V;
    descs[i].present = cfg->inputs_mask >= 0 ? (cfg->inputs_mask >> i & 1) != 0 : i <= last_default;
    descs[i].rank_known = false;
  }
  std::vector<bool> outs(size_t(sig().num_outputs));
  for (int k = 0; k < sig().num_outputs; ++k) outs[k] = cfg->outputs_mask >> k & 1;
  at::AttentionShapes unused;
  return at::infer_attention(cfg->attrs, descs, outs, &unused);
}

size_t attention_workspace_bytes(const AttentionPluginConfig& cfg, const at::AttentionShapes& shapes) {
  return align_up(scratch_bytes(shapes, 0)) + align_up(scratch_bytes(shapes, 1)) +
         align_up(launcher_bytes(cfg, shapes));
}

// ---------------------------------------------------------------------------
// AttentionPlugin

AttentionPlugin::AttentionPlugin(const AttentionPluginConfig& cfg, std::string layer_name)
    : PluginBase(sig().name, std::move(layer_name)), cfg_(cfg) {
  nb_outputs_ = nb_outputs_of_mask(cfg_.outputs_mask);
}

Status AttentionPlugin::check_layer_inputs(int32_t nb_inputs) const {
  // TensorRT's ONNX parser drops omitted inputs, so without 'inputs' a packed
  // layer's second input could be attn_mask or past_key: refuse the guess.
  if (cfg_.attrs.packed_qkv == 0 || cfg_.inputs_mask >= 0 || nb_inputs <= 1) return Status::ok();
  return Status::errorf(sig().name, ": with packed_qkv=1 the layer has ", nb_inputs,
                        " inputs but no field 'inputs'; TensorRT drops the omitted K and V, so say which slots the "
                        "inputs are (a bitmask over Q, K, V, attn_mask, past_key, past_value: e.g. inputs=9 for Q and "
                        "attn_mask; the rewriter's --plugin-attributes writes it)");
}

SlotLayout AttentionPlugin::slot_layout() const {
  return SlotLayout{sig().name, sig().inputs, sig().num_inputs, sig().outputs, sig().num_outputs, cfg_.inputs_mask,
                    cfg_.outputs_mask};
}

std::unique_ptr<PluginBase> AttentionPlugin::clone_plugin() const {
  return std::make_unique<AttentionPlugin>(*this);
}

Status AttentionPlugin::output_data_types(nv::DataType* output_types, int32_t nb_outputs,
                                          const nv::DataType* input_types, int32_t nb_inputs) const {
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(input_types, nb_inputs, sig().name, "input types"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(output_types, nb_outputs, sig().name, "output types"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  TRT_FASTOPS_RETURN_IF_ERROR(check_layer_inputs(nb_inputs));
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_inputs(
      nb_inputs,
      [&](int32_t i, TensorDesc* d) {
        d->rank_known = false;  // types only
        set_desc_dtype(input_types[i], d);
      },
      &descs, &slots));
  at::AttentionShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(cfg_.attrs, descs, slot_layout().outputs_present(), &shapes));
  // The plugin runs the CUDA kernel: a float32 Q is refused as the ORT CUDA op refuses it.
  TRT_FASTOPS_RETURN_IF_ERROR(at::attention_cuda_dtype_refusal(shapes));
  for (int32_t k = 0; k < nb_outputs; ++k) output_types[k] = trt_dtype_of(shapes.dtype);
  return Status::ok();
}

Status AttentionPlugin::output_shapes(const nv::DimsExprs* inputs, int32_t nb_inputs, nv::DimsExprs* outputs,
                                      int32_t nb_outputs, nv::IExprBuilder& builder) {
  const char* name = sig().name;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(inputs, nb_inputs, name, "input shapes"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(outputs, nb_outputs, name, "output shapes"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  TRT_FASTOPS_RETURN_IF_ERROR(check_layer_inputs(nb_inputs));
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_inputs(
      nb_inputs, [&](int32_t i, TensorDesc* d) { set_desc_dims(inputs[i], d); }, &descs, &slots));
  at::AttentionShapes s;
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(cfg_.attrs, descs, slot_layout().outputs_present(), &s));
  if (s.rank != 3 && s.rank != 4) return Status::errorf(name, ": internal error: rank of Q, K, V unknown");

  const bool packed = cfg_.attrs.packed_qkv != 0;
  const nv::DimsExprs* by_slot[at::ATTENTION_MAX_INPUTS] = {};
  for (int32_t i = 0; i < nb_inputs; ++i) by_slot[slots[size_t(i)]] = &inputs[i];
  for (int slot : {at::ATTN_Q, at::ATTN_K, at::ATTN_V}) {
    if (packed && slot != at::ATTN_Q) continue;  // Q holds K and V
    const nv::DimsExprs* e = by_slot[slot];
    if (e == nullptr || e->nbDims != s.rank) return Status::errorf(name, ": internal error: input slot ", slot);
    for (int32_t j = 0; j < e->nbDims; ++j)
      if (e->d[j] == nullptr) return Status::errorf(name, ": TensorRT passed a null dimension");
  }
  // Packed: K's and V's seq and hidden dims are Q's ([B, S, (Hq + 2 * Hkv) * D]).
  const nv::DimsExprs& q = *by_slot[at::ATTN_Q];
  const nv::DimsExprs& k = packed ? q : *by_slot[at::ATTN_K];
  const nv::DimsExprs& v = packed ? q : *by_slot[at::ATTN_V];
  const int64_t kv_hidden_heads = packed ? s.q_heads + 2 * s.kv_heads : s.kv_heads;
  const bool four = s.rank == 4;

  ExprMaker e(builder, name);
  using E = ExprMaker::E;
  // Known values become constants unless an input's own expression already is one.
  const E batch = e.known_or(s.batch, q.d[0]);
  const E kv_seq = e.known_or(s.kv_len, four ? k.d[2] : k.d[1]);
  E total = kv_seq;
  if (s.has_past) {
    const nv::DimsExprs* pk = by_slot[at::ATTN_PAST_KEY];
    if (pk == nullptr || pk->nbDims != 4 || pk->d[2] == nullptr) {
      return Status::errorf(name, ": internal error: past_key has no usable shape");
    }
    total = s.total_len >= 0 ? e.constant(s.total_len) : e.bin(nv::DimensionOperation::kSUM, pk->d[2], kv_seq);
  }
  // 3-D: the head dims come from the hidden sizes and the head-count attributes.
  const E head_dim = four ? e.known_or(s.head_dim, k.d[3])
                          : (s.head_dim >= 0 ? e.constant(s.head_dim) : e.floor_div(k.d[2], kv_hidden_heads));
  const E v_head_dim = four ? e.known_or(s.v_head_dim, v.d[3])
                            : (s.v_head_dim >= 0 ? e.constant(s.v_head_dim) : e.floor_div(v.d[2], kv_hidden_heads));
  const E kv_heads = four ? e.known_or(s.kv_heads, k.d[1]) : e.constant(s.kv_heads);
  for (int32_t o = 0; o < nb_outputs; ++o) {
    nv::DimsExprs& y = outputs[o];
    if (o == at::ATTN_Y) {
      if (four) {
        y.nbDims = 4;
        y.d[0] = batch;
        y.d[1] = e.known_or(s.q_heads, q.d[1]);
        y.d[2] = e.known_or(s.q_len, q.d[2]);
        y.d[3] = v_head_dim;
      } else {
        y.nbDims = 3;
        y.d[0] = batch;
        y.d[1] = e.known_or(s.q_len, q.d[1]);
        y.d[2] = s.y_dims[2] >= 0 ? e.constant(s.y_dims[2]) : e.mul(v_head_dim, s.q_heads);
      }
    } else if (o == at::ATTN_PRESENT_KEY || o == at::ATTN_PRESENT_VALUE) {
      // [batch, kv_heads, past + kv_seq, head dim], 4-D whatever Q, K, V are.
      y.nbDims = 4;
      y.d[0] = batch;
      y.d[1] = kv_heads;
      y.d[2] = total;
      y.d[3] = o == at::ATTN_PRESENT_KEY ? head_dim : v_head_dim;
    } else {
      return Status::errorf(name, ": internal error: output ", o, " (qk_matmul_output) is not supported");
    }
  }
  TRT_FASTOPS_RETURN_IF_ERROR(e.status());
  for (int32_t o = 0; o < nb_outputs; ++o) {
    for (int32_t j = 0; j < outputs[o].nbDims; ++j)
      if (outputs[o].d[j] == nullptr) return Status::errorf(name, ": internal error: output ", o, " dim ", j);
  }
  return Status::ok();
}

Status AttentionPlugin::supports_format(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                                        int32_t nb_outputs, bool* supported) const {
  *supported = false;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(in_out, nb_inputs + nb_outputs, sig().name, "tensor descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  TRT_FASTOPS_RETURN_IF_ERROR(check_layer_inputs(nb_inputs));
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(
      slot_layout().input_slots(nb_inputs, &slots));
  const bool packed = cfg_.attrs.packed_qkv != 0;
  if (nb_inputs < (packed ? 1 : 3) || nb_inputs > sig().num_inputs || slots[0] != at::ATTN_Q) {
    return Status::errorf(sig().name, ": the layer has ", nb_inputs, " inputs, expected ",
                          packed ? "Q (packed_qkv=1) and up to 3 more" : "Q, K, V and up to 3 more");
  }
  if (pos < 0 || pos >= nb_inputs + nb_outputs) {
    return Status::errorf(sig().name, ": supportsFormatCombination: position ", pos, " is out of range [0, ",
                          nb_inputs + nb_outputs, ")");
  }
  const nv::PluginTensorDesc& d = in_out[pos].desc;
  if (d.format != nv::TensorFormat::kLINEAR) return Status::ok();
  const nv::DataType q = in_out[0].desc.type;
  if (pos == 0) {
    *supported = d.type == nv::DataType::kHALF || d.type == nv::DataType::kBF16;  // the CUDA kernel's types
  } else if (pos < nb_inputs && slots[size_t(pos)] == at::ATTN_MASK) {
    *supported = d.type == nv::DataType::kBOOL || d.type == q;  // boolean or additive
  } else {
    *supported = d.type == q;  // K, V, past_*, Y, present_*
  }
  return Status::ok();
}

Status AttentionPlugin::configure(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs,
                                  const nv::DynamicPluginTensorDesc* out, int32_t nb_outputs) {
  TRT_FASTOPS_RETURN_IF_ERROR(check_layer_inputs(nb_inputs));
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_descs(in, nb_inputs, out, nb_outputs, &descs, &slots));
  at::AttentionShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(cfg_.attrs, descs, slot_layout().outputs_present(), &shapes));
  return at::attention_cuda_dtype_refusal(shapes);
}

Status AttentionPlugin::workspace_size(const nv::DynamicPluginTensorDesc* inputs, int32_t nb_inputs,
                                       const nv::DynamicPluginTensorDesc* outputs, int32_t nb_outputs,
                                       size_t* bytes) const {
  *bytes = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(inputs, nb_inputs, sig().name, "input descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(need_array(outputs, nb_outputs, sig().name, "output descriptions"));
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().check_nb_outputs(nb_outputs));
  TRT_FASTOPS_RETURN_IF_ERROR(check_layer_inputs(nb_inputs));
  std::vector<TensorDesc> descs;
  std::vector<int> slots;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_inputs(
      nb_inputs,
      [&](int32_t i, TensorDesc* d) {
        set_desc_dims(inputs[i].max, d);  // the profile's largest shapes: the scratch grows with them
        set_desc_dtype(inputs[i].desc.type, d);
      },
      &descs, &slots));
  at::AttentionShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(cfg_.attrs, descs, slot_layout().outputs_present(), &shapes));
  if (shapes.has_past && !shapes.fully_known()) {
    return Status::errorf(sig().name, ": getWorkspaceSize got open dims in the profile's maximum shapes");
  }
  *bytes = attention_workspace_bytes(cfg_, shapes);
  return Status::ok();
}

Status AttentionPlugin::shape_change(const nv::PluginTensorDesc* in, int32_t nb_inputs,
                                     const nv::PluginTensorDesc* out, int32_t nb_outputs) {
  shapes_ready_ = false;
  TRT_FASTOPS_RETURN_IF_ERROR(check_layer_inputs(nb_inputs));
  std::vector<TensorDesc> descs;
  TRT_FASTOPS_RETURN_IF_ERROR(slot_layout().layer_descs(in, nb_inputs, out, nb_outputs, &descs, &run_slots_));
  TRT_FASTOPS_RETURN_IF_ERROR(at::infer_attention(cfg_.attrs, descs, slot_layout().outputs_present(), &shapes_));
  TRT_FASTOPS_RETURN_IF_ERROR(at::attention_cuda_dtype_refusal(shapes_));
  if (!shapes_.fully_known()) {
    return Status::errorf(sig().name, ": onShapeChange got a dynamic dim (Q ",
                          format_dims(descs[at::ATTN_Q].dims), ")");
  }
  const std::vector<int64_t>* want[3] = {&shapes_.y_dims, &shapes_.present_key_dims, &shapes_.present_value_dims};
  for (int32_t o = 0; o < nb_outputs && o < 3; ++o) {
    if (!(cfg_.outputs_mask >> o & 1)) continue;  // placeholders are not written
    const std::vector<int64_t> got = dims_of(out[o].dims);
    if (got != *want[o]) {
      return Status::errorf(sig().name, ": ", output_ref(sig(), o), " has shape ", format_dims(got), ", expected ",
                            format_dims(*want[o]));
    }
  }
  shapes_ready_ = true;
  return Status::ok();
}

Status AttentionPlugin::run(const nv::PluginTensorDesc*, const nv::PluginTensorDesc*, const void* const* inputs,
                            void* const* outputs, void* workspace, cudaStream_t stream) {
  // Everything shape-dependent was derived in onShapeChange; this maps
  // pointers to slots and enqueues (no allocation, no synchronisation).
  const char* name = sig().name;
  if (!shapes_ready_) return Status::errorf(name, ": enqueue called without a successful onShapeChange");
  if (inputs == nullptr || outputs == nullptr) return Status::errorf(name, ": enqueue got no input or output pointers");
  at::AttentionBuffers buffers;
  for (size_t i = 0; i < run_slots_.size(); ++i) buffers.inputs[run_slots_[i]] = inputs[i];
  for (int32_t k = 0; k < nb_outputs_; ++k) {
    if (cfg_.outputs_mask >> k & 1) buffers.outputs[k] = outputs[k];  // placeholders stay null: not written
  }
  // Scratch for present K / V that are needed but not outputs, then the
  // launcher's (workspace_size's layout).
  const size_t key_bytes = align_up(scratch_bytes(shapes_, 0));
  const size_t value_bytes = align_up(scratch_bytes(shapes_, 1));
  if ((key_bytes + value_bytes) > 0 && workspace == nullptr) {
    return Status::errorf(name, ": enqueue got no workspace, but past_key / past_value need ", key_bytes + value_bytes,
                          " bytes of scratch for present_key / present_value");
  }
  if (key_bytes > 0) buffers.present_scratch[0] = workspace;
  if (value_bytes > 0) buffers.present_scratch[1] = static_cast<char*>(workspace) + key_bytes;
  // Without it (a caller that skipped getWorkspaceSize, an engine from before
  // it) the launcher takes a computed tile order.
  const size_t launcher = launcher_bytes(cfg_, shapes_);
  if (workspace != nullptr && launcher > 0) {
    buffers.workspace = static_cast<char*>(workspace) + key_bytes + value_bytes;
    buffers.workspace_bytes = launcher;
  }

  at::AttentionParams p;
  at::AttentionCopies copies;
  TRT_FASTOPS_RETURN_IF_ERROR(at::make_attention_params(cfg_.attrs, shapes_, buffers, &p, &copies));
  TRT_FASTOPS_RETURN_IF_ERROR(at::attention_cuda_refusal(p));
  for (int i = 0; i < copies.count; ++i) {
    const cudaError_t err = at::launch_attention_copy(copies.items[i], stream);
    if (err != cudaSuccess) return at::attention_cuda_error("the present K/V copy", cuda_error_string(err));
  }
  const cudaError_t err = at::launch_attention(p, stream);
  if (err != cudaSuccess) {
    return at::attention_cuda_error(str_cat("CUDA kernel ", at::attention_kernel_name(p)).c_str(),
                                    cuda_error_string(err));
  }
  return Status::ok();
}

void AttentionPlugin::serialize_fields(FieldList* fields) const {
  const at::AttentionAttrs& a = cfg_.attrs;
  fields->add_int64("is_causal", a.is_causal);
  if (a.has_q_num_heads) fields->add_int64("q_num_heads", a.q_num_heads);
  if (a.has_kv_num_heads) fields->add_int64("kv_num_heads", a.kv_num_heads);
  fields->add_int64("qk_matmul_output_mode", a.qk_matmul_output_mode);
  if (a.has_scale) fields->add_float32("scale", a.scale);
  fields->add_float32("softcap", a.softcap);
  if (a.has_softmax_precision) fields->add_int64("softmax_precision", a.softmax_precision);
  if (a.packed_qkv != 0) fields->add_int64("packed_qkv", a.packed_qkv);  // absent = 0, as engines before it
  if (cfg_.inputs_mask >= 0) fields->add_int32(FIELD_INPUTS, cfg_.inputs_mask);
  fields->add_int32(FIELD_OUTPUTS, cfg_.outputs_mask);
  if (cfg_.schedule_workspace) fields->add_int32(FIELD_SCHEDULE_WORKSPACE, 1);
}

// ---------------------------------------------------------------------------
// Creator

AttentionPluginCreator::AttentionPluginCreator() : CreatorBase(sig().name) {
  for (const std::string& name : at::attention_attr_names()) {
    field_names_.declare(name.c_str(), at::attention_attr_is_int(name) ? nv::PluginFieldType::kINT64
                                                                       : nv::PluginFieldType::kFLOAT32);
  }
  field_names_.declare(FIELD_INPUTS, nv::PluginFieldType::kINT32);
  field_names_.declare(FIELD_OUTPUTS, nv::PluginFieldType::kINT32);
  field_names_.declare(FIELD_SCHEDULE_WORKSPACE, nv::PluginFieldType::kINT32);
}

Status AttentionPluginCreator::create(const std::string& layer_name, const nv::PluginFieldCollection& fc,
                                      nv::TensorRTPhase phase, std::unique_ptr<PluginBase>* plugin) const {
  AttentionPluginConfig cfg;
  TRT_FASTOPS_RETURN_IF_ERROR(attention_config_from_fields(fc, phase, &cfg));
  *plugin = std::make_unique<AttentionPlugin>(cfg, layer_name);
  return Status::ok();
}

void append_attention_creators(std::vector<nv::IPluginCreatorInterface*>* out) {
  static AttentionPluginCreator attention_creator;
  out->push_back(&attention_creator);
}

}  // namespace trt_fastops::trt
