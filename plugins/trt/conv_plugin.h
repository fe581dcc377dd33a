// TensorRT plugins for Conv and ConvTranspose: thin adapters over
// plugins/conv/conv_op.h (attributes, shape rules, messages) and the conv
// launcher (plugins/conv/conv_launch.h: plan cache, cuDNN or trt_fastops'
// kernels).
//
// Fields (the node's ONNX attributes, or what getFieldsToSerialize wrote):
//   kernel_shape, strides, dilations, pads  int lists (kINT32 / kINT64, any length)
//   output_padding, output_shape, output_crop  int lists, ConvTranspose only
//   group                                  int
//   auto_pad, activation                   strings (kCHAR, with or without a NUL)
//   max_workspace_mb  optional int >= 0: the cuDNN workspace the plugin asks
//                     TensorRT for, in MiB. Absent at build time: the
//                     launcher's TRT_FASTOPS_CONV_MAX_WORKSPACE_MB, else 256.
//                     Always serialized, so the engine keeps the build's value.
// Inputs X, W, B? (the layer has 2 or 3 inputs); one output Y.
//
// Workspace. The launcher plans a convolution for its exact signature (sizes
// and pointer alignments) on the first call and caches the plan; the plan
// says how much workspace it needs. TensorRT instead fixes the workspace at
// build time (getWorkspaceSize, from the profile's largest shapes, without
// pointers), and enqueue gets only the pointer. So the plugin asks for
//   bound(shapes) = max(fallback kernel's workspace, max_workspace_mb MiB)
// (the launcher's conv_workspace_bound query, conv_launch.h),
// a function that only grows with the shapes, and at run time recomputes the
// bound for the actual shapes (<= what TensorRT allocated). A planned
// convolution (cuDNN, chosen with the launcher's own workspace limit) that
// needs more than that bound runs on trt_fastops' kernels instead, whose
// workspace is always within it. The launcher's workspace is always the one
// TensorRT passes to enqueue; it allocates nothing per call.
//
// Planning happens in the first enqueue of each signature (cuDNN heuristics,
// autotuning on the real buffers, a stream synchronisation). It cannot run
// while the stream is captured into a CUDA graph: then the launcher refuses
// with a message saying to run once without capture first (trtexec
// --useCudaGraph does such a warm-up enqueue).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "plugins/conv/conv_op.h"
#include "plugins/trt/plugin_base.h"

namespace trt_fastops::trt {

struct ConvPluginConfig {
  conv::ConvOp op = conv::ConvOp::conv;
  conv::ConvAttrs attrs;
  int64_t max_workspace_mb = 256;
};

// Reads and validates the fields (unknown names, wrong kinds and bad values
// are refused with conv_op's messages). `phase` kBUILD takes the default
// max_workspace_mb from the environment.
Status conv_config_from_fields(conv::ConvOp op, const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                               ConvPluginConfig* cfg);

// bound(shapes) above, for fully known shapes; dtype from the shapes.
Status conv_workspace_bound(const ConvPluginConfig& cfg, const conv::ConvShapes& shapes, size_t* bytes);

class ConvPlugin final : public PluginBase {
 public:
  ConvPlugin(const ConvPluginConfig& cfg, std::string layer_name);
  ConvPlugin(const ConvPlugin&) = default;

 protected:
  std::unique_ptr<PluginBase> clone_plugin() const override;
  int32_t nb_outputs() const override { return 1; }
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
  const conv::ConvSignature& sig() const { return conv::conv_signature(cfg_.op); }
  Status check_counts(int32_t nb_inputs, int32_t nb_outputs) const;

  ConvPluginConfig cfg_;
  // Run-time state from onShapeChange, used by enqueue.
  bool shapes_ready_ = false;
  conv::ConvShapes shapes_;
  size_t workspace_bound_ = 0;  // bound(actual shapes) <= the workspace TensorRT allocated
};

class ConvPluginCreator final : public CreatorBase {
 public:
  explicit ConvPluginCreator(conv::ConvOp op);

 protected:
  Status create(const std::string& layer_name, const nv::PluginFieldCollection& fc, nv::TensorRTPhase phase,
                std::unique_ptr<PluginBase>* plugin) const override;

 private:
  conv::ConvOp op_;
};

// Appends the Conv and ConvTranspose creators (static storage) to `out`.
void append_conv_creators(std::vector<nv::IPluginCreatorInterface*>* out);

}  // namespace trt_fastops::trt
