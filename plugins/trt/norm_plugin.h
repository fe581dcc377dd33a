// TensorRT plugins for LayerNorm, SkipLayerNorm and RMSNorm: thin adapters
// over plugins/norm/norm_op.h (semantics, messages) and launch_norm (kernels).
//
// Fields (ONNX attributes of the node, or what getFieldsToSerialize wrote):
//   axis, epsilon[, stash_type]  the op's attributes (norm_op.h)
//   inputs   optional int bitmask over the op's input slots: bit i set = slot i
//            is one of the layer's inputs. The layer's inputs are the set slots
//            in slot order. Absent: the layer's inputs are the first
//            nbInputs slots (only trailing optional inputs omitted).
//   outputs  optional int bitmask over the op's output slots, bit 0 (Y) always
//            set; default 1 (Y only). The plugin has (highest set bit + 1)
//            outputs, slot k at position k, as the ONNX parser maps node
//            outputs by position. Slots inside that range whose bit is clear
//            are placeholders: TensorRT allocates them, nothing writes them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plugins/norm/norm_op.h"
#include "plugins/trt/plugin_base.h"

namespace trt_fastops::trt {

struct NormPluginConfig {
  norm::NormOp op = norm::NormOp::layer_norm;
  norm::NormAttrs attrs;
  int32_t inputs_mask = -1;  // -1: not given (leading slots)
  int32_t outputs_mask = 1;  // Y only
};

// Reads and validates the fields (unknown names, wrong types and bad values
// are refused with norm_op's messages).
Status norm_config_from_fields(norm::NormOp op, const nv::PluginFieldCollection& fc, NormPluginConfig* cfg);

class NormPlugin final : public PluginBase {
 public:
  NormPlugin(const NormPluginConfig& cfg, std::string layer_name);
  NormPlugin(const NormPlugin&) = default;

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
  Status shape_change(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                      int32_t nb_outputs) override;
  Status run(const nv::PluginTensorDesc* input_desc, const nv::PluginTensorDesc* output_desc,
             const void* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) override;
  void serialize_fields(FieldList* fields) const override;

 private:
  const norm::NormSignature& sig() const { return norm::norm_signature(cfg_.op); }
  SlotLayout slot_layout() const {
    return SlotLayout{sig().name, sig().inputs, sig().num_inputs, sig().outputs, sig().num_outputs, cfg_.inputs_mask,
                      cfg_.outputs_mask};
  }
  bool is_stat_output(int slot) const { return slot == sig().mean || slot == sig().inv_std_dev; }

  NormPluginConfig cfg_;
  int32_t nb_outputs_ = 1;
  // Run-time state from onShapeChange, used by enqueue.
  bool shapes_ready_ = false;
  norm::NormShapes shapes_;
  std::vector<int> run_slots_;
};

class NormPluginCreator final : public CreatorBase {
 public:
  explicit NormPluginCreator(norm::NormOp op);

 protected:
  Status create(const std::string& layer_name, const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                std::unique_ptr<PluginBase>* plugin) const override;

 private:
  norm::NormOp op_;
};

// Appends the creators of the norm family (static storage) to `out`.
void append_norm_creators(std::vector<nv::IPluginCreatorInterface*>* out);

}  // namespace trt_fastops::trt
