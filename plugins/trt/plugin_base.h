// Base classes for trt_fastops' TensorRT IPluginV3 plugins.
//
// PluginBase implements every IPluginV3 / IPluginV3OneCore / IPluginV3OneBuild
// / IPluginV3OneRuntime method as a noexcept wrapper around one protected hook
// that returns a Status (hooks may throw; the wrapper catches). A failing hook
// is reported with the op (and layer) name through the error recorder of the
// execution context (attachToContext), else the TensorRT logger, and the
// method returns its error value (-1, nullptr, false). Adding an op = one
// PluginBase subclass with its hooks + one CreatorBase subclass.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"
#include "plugins/trt/trt_common.h"

namespace trt_fastops::trt {

// ---------------------------------------------------------------------------
// Plugin fields

// One scalar field as handed to createPlugin, widened. Ints may come as kINT32
// or kINT64, floats as kFLOAT32 or kFLOAT64; anything else is `other`, with
// `found` describing it for messages ("a string", "a list of 2 ints").
struct FieldValue {
  enum class Kind { integer, floating, other } kind = Kind::other;
  int64_t i = 0;
  double f = 0.0;
  std::string found;  // "an int", "a float", "a string", ...
};
FieldValue read_field(const nv::PluginField& field);

// A list-of-ints field (ONNX INTS attributes: the parser passes kINT32 with
// `length` values; kINT64 is accepted too). A scalar int field is a list of
// one (the parser cannot tell INT from INTS of length 1). False for any other
// kind; `found` then describes it ("a float", "a string", ...).
bool read_int_list(const nv::PluginField& field, std::vector<int64_t>* values, std::string* found);
// A string field (kCHAR): `length` chars, trailing NULs dropped (the ONNX
// parser passes the characters without a terminator, getFieldsToSerialize
// with one). False for any other kind; `found` then describes it.
bool read_string(const nv::PluginField& field, std::string* value, std::string* found);

// Owns the storage behind a PluginFieldCollection (names and values), for
// getFieldsToSerialize and getFieldNames.
class FieldList {
 public:
  FieldList() = default;
  // A copy starts empty: the fields point into their owner's storage.
  FieldList(const FieldList&) {}
  FieldList& operator=(const FieldList&) = delete;

  void clear();
  void add_int32(const char* name, int32_t value);
  void add_int64(const char* name, int64_t value);
  void add_float32(const char* name, float value);
  void add_int64_list(const char* name, const std::vector<int64_t>& values);
  // Stored with its NUL terminator (length = size + 1).
  void add_string(const char* name, const std::string& value);
  // Declares a field for getFieldNames (no data).
  void declare(const char* name, nv::PluginFieldType type);
  const nv::PluginFieldCollection* collection();

 private:
  std::deque<std::string> names_;  // deque: stable addresses as it grows
  std::deque<int64_t> ints_;
  std::deque<int32_t> int32s_;
  std::deque<float> floats_;
  std::deque<std::vector<int64_t>> lists_;
  std::deque<std::string> strings_;
  std::vector<nv::PluginField> fields_;
  nv::PluginFieldCollection collection_{};
};

// ---------------------------------------------------------------------------
// TensorRT descriptions -> the op layer's TensorDesc (shared by every plugin)

// Run-time or profile dims (negative -> -1, unknown).
void set_desc_dims(const nv::Dims& dims, TensorDesc* d);
// Build-time expressions: constants known, symbolic dims -1.
void set_desc_dims(const nv::DimsExprs& dims, TensorDesc* d);
// A type the ops do not support is kept by name for the op's message.
void set_desc_dtype(nv::DataType t, TensorDesc* d);
// "<op>: TensorRT passed no <what> (count n)" when p is null for n > 0.
Status need_array(const void* p, int32_t n, const char* op, const char* what);

// ---------------------------------------------------------------------------
// Plugin-level 'inputs' / 'outputs' fields: bitmasks over an op's slots, for
// ops with optional inputs in the middle or several outputs. TensorRT graphs
// cannot hold empty-name inputs, so the layer's inputs are the set slots in
// slot order; the ONNX parser maps outputs by position, so the plugin has
// (highest set bit + 1) outputs and clear bits inside are placeholders.
constexpr const char* FIELD_INPUTS = "inputs";
constexpr const char* FIELD_OUTPUTS = "outputs";

// Parses an 'inputs' (inputs = true) or 'outputs' field: an int in
// [0, 2^count), 'outputs' with bit 0 set. Messages name the op and the slots.
Status read_slot_mask(const char* op, const nv::PluginField& field, bool inputs, const TensorSlot* slots, int count,
                      int32_t* mask);
// "23 (X, Skip, Scale, Bias)"
std::string describe_mask(int32_t mask, const TensorSlot* slots, int count);
// The op slot of each of the layer's nb_inputs inputs: the set bits of
// `mask`, or the leading slots when mask < 0 (field not given).
Status layer_input_slots(const char* op, int32_t mask, const TensorSlot* slots, int count, int32_t nb_inputs,
                         std::vector<int>* out);
// Number of plugin outputs for an 'outputs' mask (highest set bit + 1).
int32_t nb_outputs_of_mask(int32_t mask);

// The 'inputs' / 'outputs' masks of a plugin whose op has optional slots
// (norms, Attention) applied to the layer TensorRT hands over: the op slot of
// each layer input, which outputs exist, and the message when the counts
// disagree. Built on the fly from the op's signature and the plugin's fields.
struct SlotLayout {
  const char* op = "";
  const TensorSlot* inputs = nullptr;
  int num_inputs = 0;
  const TensorSlot* outputs = nullptr;
  int num_outputs = 0;
  int32_t inputs_mask = -1;  // -1: not given (leading slots)
  int32_t outputs_mask = 1;  // Y only

  // The layer's output count must be the one the 'outputs' field implies.
  Status check_nb_outputs(int32_t nb_outputs) const;
  // One flag per plugin output (clear bits are placeholders).
  std::vector<bool> outputs_present() const;
  // The op slot of each of the layer's nb_inputs inputs.
  Status input_slots(int32_t nb_inputs, std::vector<int>* slots) const {
    return layer_input_slots(op, inputs_mask, inputs, num_inputs, nb_inputs, slots);
  }
  // One TensorDesc per op slot (one per layer input when there is no 'inputs'
  // field and too many inputs, so the op's inference reports the count);
  // fill(i, desc) describes layer input i; slots[i] = its op slot.
  template <typename Fill>
  Status layer_inputs(int32_t nb_inputs, Fill&& fill, std::vector<TensorDesc>* descs, std::vector<int>* slots) const {
    TRT_FASTOPS_RETURN_IF_ERROR(input_slots(nb_inputs, slots));
    descs->assign(std::max<size_t>(size_t(num_inputs), slots->size()), TensorDesc());
    for (int32_t i = 0; i < nb_inputs; ++i) {
      TensorDesc& d = (*descs)[size_t((*slots)[i])];
      d.present = true;
      fill(i, &d);
    }
    return Status::ok();
  }
  // The common prologue of configurePlugin / onShapeChange: both arrays
  // present, the output count right, one desc per op slot from each layer
  // input's dims (-1 where a profile leaves them open) and type.
  template <typename Desc>  // nv::DynamicPluginTensorDesc or nv::PluginTensorDesc
  Status layer_descs(const Desc* in, int32_t nb_inputs, const Desc* out, int32_t nb_outputs,
                     std::vector<TensorDesc>* descs, std::vector<int>* slots) const {
    TRT_FASTOPS_RETURN_IF_ERROR(need_array(in, nb_inputs, op, "input descriptions"));
    TRT_FASTOPS_RETURN_IF_ERROR(need_array(out, nb_outputs, op, "output descriptions"));
    TRT_FASTOPS_RETURN_IF_ERROR(check_nb_outputs(nb_outputs));
    return layer_inputs(
        nb_inputs,
        [&](int32_t i, TensorDesc* d) {
          const nv::PluginTensorDesc& t = plain_desc(in[i]);
          set_desc_dims(t.dims, d);
          set_desc_dtype(t.type, d);
        },
        descs, slots);
  }

 private:
  static const nv::PluginTensorDesc& plain_desc(const nv::DynamicPluginTensorDesc& d) { return d.desc; }
  static const nv::PluginTensorDesc& plain_desc(const nv::PluginTensorDesc& d) { return d; }
};

// ---------------------------------------------------------------------------
// Output dims as IExprBuilder expressions. Constants handed to the builder
// are never negative (a negative offset becomes a kSUB); a null expression
// from the builder is remembered and reported by status().
class ExprMaker {
 public:
  using E = const nv::IDimensionExpr*;
  ExprMaker(nv::IExprBuilder& b, const char* op) : b_(b), op_(op) {}

  E constant(int64_t v) { return check(b_.constant(v)); }
  E bin(nv::DimensionOperation o, E x, E y) {
    if (x == nullptr || y == nullptr) return nullptr;
    return check(b_.operation(o, *x, *y));
  }
  E add(E x, int64_t v) {
    if (v == 0) return x;
    return v > 0 ? bin(nv::DimensionOperation::kSUM, x, constant(v)) : bin(nv::DimensionOperation::kSUB, x, constant(-v));
  }
  E mul(E x, int64_t v) { return v == 1 ? x : bin(nv::DimensionOperation::kPROD, x, constant(v)); }
  E floor_div(E x, int64_t v) { return v == 1 ? x : bin(nv::DimensionOperation::kFLOOR_DIV, x, constant(v)); }
  E ceil_div(E x, int64_t v) { return v == 1 ? x : bin(nv::DimensionOperation::kCEIL_DIV, x, constant(v)); }
  // `e` itself when it is constant or `known` is unknown (< 0), else constant(known).
  E known_or(int64_t known, E e) { return (e != nullptr && e->isConstant()) || known < 0 ? e : constant(known); }
  Status status() const {
    return failed_ ? Status::errorf(op_, ": IExprBuilder returned no expression") : Status::ok();
  }

 private:
  E check(E e) {
    failed_ = failed_ || e == nullptr;
    return e;
  }
  nv::IExprBuilder& b_;
  const char* op_;
  bool failed_ = false;
};

// ---------------------------------------------------------------------------
// Plugin

class PluginBase : public nv::IPluginV3,
                   public nv::IPluginV3OneCore,
                   public nv::IPluginV3OneBuild,
                   public nv::IPluginV3OneRuntime {
 public:
  // op_name: plugin name = op type; layer_name: the name createPlugin got
  // (the ONNX node name), used in messages.
  PluginBase(std::string op_name, std::string layer_name);
  ~PluginBase() override = default;
  PluginBase(const PluginBase&) = default;
  PluginBase& operator=(const PluginBase&) = delete;

  // IPluginV3
  nv::IPluginCapability* getCapabilityInterface(nv::PluginCapabilityType type) noexcept override;
  nv::IPluginV3* clone() noexcept override;

  // IPluginV3OneCore
  const char* getPluginName() const noexcept override { return op_name_.c_str(); }
  const char* getPluginVersion() const noexcept override { return PLUGIN_VERSION; }
  const char* getPluginNamespace() const noexcept override { return PLUGIN_NAMESPACE; }

  // IPluginV3OneBuild
  int32_t configurePlugin(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs,
                          const nv::DynamicPluginTensorDesc* out, int32_t nb_outputs) noexcept override;
  int32_t getOutputDataTypes(nv::DataType* output_types, int32_t nb_outputs, const nv::DataType* input_types,
                             int32_t nb_inputs) const noexcept override;
  int32_t getOutputShapes(const nv::DimsExprs* inputs, int32_t nb_inputs, const nv::DimsExprs* shape_inputs,
                          int32_t nb_shape_inputs, nv::DimsExprs* outputs, int32_t nb_outputs,
                          nv::IExprBuilder& builder) noexcept override;
  bool supportsFormatCombination(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                                 int32_t nb_outputs) noexcept override;
  int32_t getNbOutputs() const noexcept override;
  size_t getWorkspaceSize(const nv::DynamicPluginTensorDesc* inputs, int32_t nb_inputs,
                          const nv::DynamicPluginTensorDesc* outputs, int32_t nb_outputs) const noexcept override;

  // IPluginV3OneRuntime
  int32_t onShapeChange(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                        int32_t nb_outputs) noexcept override;
  int32_t enqueue(const nv::PluginTensorDesc* input_desc, const nv::PluginTensorDesc* output_desc,
                  const void* const* inputs, void* const* outputs, void* workspace,
                  cudaStream_t stream) noexcept override;
  nv::IPluginV3* attachToContext(nv::IPluginResourceContext* context) noexcept override;
  const nv::PluginFieldCollection* getFieldsToSerialize() noexcept override;

 protected:
  // Hooks, one per TensorRT call. Errors are returned as Status (messages
  // start with the op name); the base adds the layer name and reports them.
  virtual std::unique_ptr<PluginBase> clone_plugin() const = 0;
  virtual int32_t nb_outputs() const = 0;  // fixed at creation
  virtual Status output_data_types(nv::DataType* output_types, int32_t nb_outputs,
                                   const nv::DataType* input_types, int32_t nb_inputs) const = 0;
  // shape_inputs are refused by the base (none of our ops takes them).
  virtual Status output_shapes(const nv::DimsExprs* inputs, int32_t nb_inputs, nv::DimsExprs* outputs,
                               int32_t nb_outputs, nv::IExprBuilder& builder) = 0;
  // Format negotiation: false is an answer, not an error; a Status error
  // (a malformed call) is reported and answers false.
  virtual Status supports_format(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                                 int32_t nb_outputs, bool* supported) const = 0;
  virtual Status configure(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs,
                           const nv::DynamicPluginTensorDesc* out, int32_t nb_outputs) = 0;
  virtual Status workspace_size(const nv::DynamicPluginTensorDesc* inputs, int32_t nb_inputs,
                                const nv::DynamicPluginTensorDesc* outputs, int32_t nb_outputs,
                                size_t* bytes) const;  // default 0
  virtual Status shape_change(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                              int32_t nb_outputs) = 0;
  // Enqueue only: no allocation, no synchronisation.
  virtual Status run(const nv::PluginTensorDesc* input_desc, const nv::PluginTensorDesc* output_desc,
                     const void* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) = 0;
  virtual void serialize_fields(FieldList* fields) const = 0;

  const std::string& op_name() const { return op_name_; }
  const std::string& layer_name() const { return layer_name_; }
  // Reports a failure (adds the layer name); never throws.
  void report(const Status& st, nv::ErrorCode code = nv::ErrorCode::kINVALID_ARGUMENT) const noexcept;

 private:
  template <typename F>
  int32_t guarded(const char* method, nv::ErrorCode code, F&& body) const noexcept;
  void report_exception(const char* method, const char* what) const noexcept;

  std::string op_name_;
  std::string layer_name_;
  nv::IErrorRecorder* recorder_ = nullptr;  // from attachToContext; owned by the context
  FieldList serialized_;                    // backs getFieldsToSerialize
};

// ---------------------------------------------------------------------------
// Creator

class CreatorBase : public nv::IPluginCreatorV3One {
 public:
  explicit CreatorBase(std::string op_name) : op_name_(std::move(op_name)) {}

  nv::IPluginV3* createPlugin(const char* name, const nv::PluginFieldCollection* fc,
                              nv::TensorRTPhase phase) noexcept override;
  const nv::PluginFieldCollection* getFieldNames() noexcept override { return field_names_.collection(); }
  const char* getPluginName() const noexcept override { return op_name_.c_str(); }
  const char* getPluginVersion() const noexcept override { return PLUGIN_VERSION; }
  const char* getPluginNamespace() const noexcept override { return PLUGIN_NAMESPACE; }

 protected:
  // Builds the plugin from the fields (build phase: from the node's
  // attributes; runtime phase: from getFieldsToSerialize).
  virtual Status create(const std::string& layer_name, const nv::PluginFieldCollection& fc,
                        nv::TensorRTPhase phase, std::unique_ptr<PluginBase>* plugin) const = 0;
  FieldList field_names_;  // filled by the subclass' constructor

 private:
  void report_exception(const std::string& layer, const char* what) const noexcept;
  std::string op_name_;
};

// "LayerNorm: ..." + " (layer 'enc/ln_1')" when the layer has a name.
std::string with_layer(const std::string& message, const std::string& layer_name);

}  // namespace trt_fastops::trt
