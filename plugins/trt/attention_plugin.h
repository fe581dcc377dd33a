// TensorRT plugin for Attention (ONNX Attention-23 semantics): a thin adapter
// over plugins/attention/attention_op.h (attributes, shape rules, messages)
// and the CUDA launchers launch_attention / launch_attention_copy.
//
// Fields (the node's ONNX attributes, or what getFieldsToSerialize wrote):
//   is_causal, q_num_heads, kv_num_heads, qk_matmul_output_mode,
//   softmax_precision, left_window_size, right_window_size   ints (kINT32/kINT64)
//   packed_qkv (trt_fastops extension: Q holds Q, K and V)   int, 0 or 1
//   scale, softcap                                          floats (kFLOAT32/kFLOAT64)
//   inputs   optional int bitmask over the input slots Q, K, V, attn_mask,
//            past_key, past_value (bit i = slot i is one of the layer's
//            inputs, in slot order); absent: the first nbInputs slots
//            (with packed_qkv = 1: Q alone; a packed layer with more inputs
//            needs the field, since the parser drops the omitted K and V).
//   outputs  optional int bitmask over Y, present_key, present_value,
//            qk_matmul_output (bit 0 set; bit 3 is refused by the op layer);
//            default 1. The plugin has (highest set bit + 1) outputs; clear
//            bits inside are placeholders (allocated by TensorRT, not written).
//
// Types: Q float16 or bfloat16 (the CUDA kernel's; a float32 Q is refused
// with the op's message, as the ORT CUDA op does); K, V, past_* and every
// output follow Q; attn_mask is bool or Q's type (additive).
//
// Workspace: when past_key / past_value are given but present_key /
// present_value are not outputs, the concatenated K / V are built in the
// workspace (present_bytes each, 256-byte aligned); otherwise none.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "plugins/attention/attention_op.h"
#include "plugins/trt/plugin_base.h"

namespace trt_fastops::trt {

struct AttentionPluginConfig {
  attention::AttentionAttrs attrs;
  int32_t inputs_mask = -1;  // -1: not given (leading slots)
  int32_t outputs_mask = 1;  // Y only
  // The launcher's workspace (a tile counter) follows the present scratch.
  // Engines serialized before it existed carry no "schedule_workspace" field
  // and were given no room for it: those run without it.
  bool schedule_workspace = true;
};

// Reads and validates the fields (unknown names, wrong kinds, bad values and
// impossible slot combinations are refused with attention_op's messages).
// `phase` kBUILD gives the plugin the launcher's workspace; kRUNTIME takes it
// from the serialized "schedule_workspace" field (absent: none).
Status attention_config_from_fields(const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                                    AttentionPluginConfig* cfg);

// Workspace for a plugin's config and shapes (fully known where past is
// given): scratch for the present buffers that are needed but not outputs,
// then the launcher's (attention_launch_workspace_bytes, where the config has
// schedule_workspace), each 256-byte aligned.
size_t attention_workspace_bytes(const AttentionPluginConfig& cfg, const attention::AttentionShapes& shapes);

class AttentionPlugin final : public PluginBase {
 public:
  AttentionPlugin(const AttentionPluginConfig& cfg, std::string layer_name);
  AttentionPlugin(const AttentionPlugin&) = default;

 protected:
  std::unique_ptr<PluginBase> clone_plugin() const override;
  int32_t nb_outputs() const override { return nb_outputs_; }
  Status output_data_types(nv::DataType* output_types, int32_t nb_outputs, const nv::DataType* input_types,
                           int32_t nb_inputs) const override;
  Status output_shapes(const nv::DimsExprs* inputs, int32_t nb_inputs, nv::DimsExprs* outputs, int32_t nb_outputs,
                       nv::IExprBuilder& builder) override;
  Status supports_format(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                         int32_t nb_outputs, bool* supported) const override;
  Status configure(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs, const nv::DynamicPluginTensorDesc* out,
                   int32_t nb_outputs) override;
  Status workspace_size(const nv::DynamicPluginTensorDesc* inputs, int32_t nb_inputs,
                        const nv::DynamicPluginTensorDesc* outputs, int32_t nb_outputs, size_t* bytes) const override;
  Status shape_change(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                      int32_t nb_outputs) override;
  Status run(const nv::PluginTensorDesc* input_desc, const nv::PluginTensorDesc* output_desc,
             const void* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) override;
  void serialize_fields(FieldList* fields) const override;

 private:
  SlotLayout slot_layout() const;
  // A packed_qkv layer with more inputs than Q needs the 'inputs' field.
  Status check_layer_inputs(int32_t nb_inputs) const;

  AttentionPluginConfig cfg_;
  int32_t nb_outputs_ = 1;
  // Run-time state from onShapeChange, used by enqueue.
  bool shapes_ready_ = false;
  attention::AttentionShapes shapes_;
  std::vector<int> run_slots_;
};

class AttentionPluginCreator final : public CreatorBase {
 public:
  AttentionPluginCreator();

 protected:
  Status create(const std::string& layer_name, const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                std::unique_ptr<PluginBase>* plugin) const override;
};

// Appends the Attention creator (static storage) to `out`.
void append_attention_creators(std::vector<nv::IPluginCreatorInterface*>* out);

}  // namespace trt_fastops::trt
