#include "plugins/trt/plugin_base.h"

#include <exception>
#include <utility>

namespace trt_fastops::trt {

// ---------------------------------------------------------------------------
// Fields

FieldValue read_field(const nv::PluginField& field) {
  FieldValue v;
  const char* kind_int = "an int";
  const char* kind_float = "a float";
  switch (field.type) {
    case nv::PluginFieldType::kINT32:
    case nv::PluginFieldType::kINT64:
    case nv::PluginFieldType::kFLOAT32:
    case nv::PluginFieldType::kFLOAT64: {
      const bool is_int = field.type == nv::PluginFieldType::kINT32 || field.type == nv::PluginFieldType::kINT64;
      if (field.length != 1 || field.data == nullptr) {
        // ONNX INTS / FLOATS attributes arrive as lists; ours are scalars.
        v.found = field.data == nullptr ? std::string(is_int ? "an int" : "a float") + " field without data"
                                        : "a list of " + std::to_string(field.length) + (is_int ? " ints" : " floats");
        return v;
      }
      if (field.type == nv::PluginFieldType::kINT32) {
        v.kind = FieldValue::Kind::integer;
        v.i = *static_cast<const int32_t*>(field.data);
      } else if (field.type == nv::PluginFieldType::kINT64) {
        v.kind = FieldValue::Kind::integer;
        v.i = *static_cast<const int64_t*>(field.data);
      } else if (field.type == nv::PluginFieldType::kFLOAT32) {
        v.kind = FieldValue::Kind::floating;
        v.f = *static_cast<const float*>(field.data);
      } else {
        v.kind = FieldValue::Kind::floating;
        v.f = *static_cast<const double*>(field.data);
      }
      v.found = is_int ? kind_int : kind_float;
      return v;
    }
    case nv::PluginFieldType::kCHAR: v.found = "a string"; return v;
    case nv::PluginFieldType::kDIMS: v.found = "a Dims field"; return v;
    case nv::PluginFieldType::kINT8:
    case nv::PluginFieldType::kINT16: v.found = "a narrow int field (kINT8/kINT16; use kINT32 or kINT64)"; return v;
    case nv::PluginFieldType::kFLOAT16:
    case nv::PluginFieldType::kBF16: v.found = "a 16-bit float field (use kFLOAT32 or kFLOAT64)"; return v;
    default: v.found = "a field of type " + std::to_string(static_cast<int>(field.type)); return v;
  }
}

bool read_int_list(const nv::PluginField& field, std::vector<int64_t>* values, std::string* found) {
  values->clear();
  const bool is_int = field.type == nv::PluginFieldType::kINT32 || field.type == nv::PluginFieldType::kINT64;
  if (!is_int || field.length < 0 || (field.length > 0 && field.data == nullptr)) {
    *found = is_int ? std::string("an int field with ") + (field.length < 0 ? "a negative length" : "no data")
                    : read_field(field).found;
    return false;
  }
  for (int32_t i = 0; i < field.length; ++i) {
    values->push_back(field.type == nv::PluginFieldType::kINT32 ? int64_t{static_cast<const int32_t*>(field.data)[i]}
                                                                : static_cast<const int64_t*>(field.data)[i]);
  }
  return true;
}

bool read_string(const nv::PluginField& field, std::string* value, std::string* found) {
  value->clear();
  if (field.type != nv::PluginFieldType::kCHAR) {
    *found = read_field(field).found;
    return false;
  }
  if (field.length < 0 || (field.length > 0 && field.data == nullptr)) {
    *found = "a string field without data";
    return false;
  }
  const char* chars = static_cast<const char*>(field.data);
  size_t n = static_cast<size_t>(field.length);
  while (n > 0 && chars[n - 1] == '\0') --n;
  value->assign(chars, n);
  if (value->find('\0') != std::string::npos) {
    *found = "a string with an embedded NUL";
    return false;
  }
  return true;
}

void FieldList::clear() {
  names_.clear();
  ints_.clear();
  int32s_.clear();
  floats_.clear();
  lists_.clear();
  strings_.clear();
  fields_.clear();
}

void FieldList::add_int32(const char* name, int32_t value) {
  names_.emplace_back(name);
  int32s_.push_back(value);
  fields_.emplace_back(names_.back().c_str(), &int32s_.back(), nv::PluginFieldType::kINT32, 1);
}

void FieldList::add_int64(const char* name, int64_t value) {
  names_.emplace_back(name);
  ints_.push_back(value);
  fields_.emplace_back(names_.back().c_str(), &ints_.back(), nv::PluginFieldType::kINT64, 1);
}

void FieldList::add_float32(const char* name, float value) {
  names_.emplace_back(name);
  floats_.push_back(value);
  fields_.emplace_back(names_.back().c_str(), &floats_.back(), nv::PluginFieldType::kFLOAT32, 1);
}

void FieldList::add_int64_list(const char* name, const std::vector<int64_t>& values) {
  names_.emplace_back(name);
  lists_.push_back(values);
  fields_.emplace_back(names_.back().c_str(), lists_.back().data(), nv::PluginFieldType::kINT64,
                       static_cast<int32_t>(values.size()));
}

void FieldList::add_string(const char* name, const std::string& value) {
  names_.emplace_back(name);
  strings_.push_back(value);
  fields_.emplace_back(names_.back().c_str(), strings_.back().c_str(), nv::PluginFieldType::kCHAR,
                       static_cast<int32_t>(value.size() + 1));
}

void FieldList::declare(const char* name, nv::PluginFieldType type) {
  names_.emplace_back(name);
  fields_.emplace_back(names_.back().c_str(), nullptr, type, 1);
}

const nv::PluginFieldCollection* FieldList::collection() {
  collection_.nbFields = static_cast<int32_t>(fields_.size());
  collection_.fields = fields_.data();
  return &collection_;
}

void set_desc_dims(const nv::Dims& dims, TensorDesc* d) {
  d->rank_known = dims.nbDims >= 0;
  d->dims.clear();
  for (int32_t i = 0; i < dims.nbDims && i < nv::Dims::MAX_DIMS; ++i) d->dims.push_back(dims.d[i] < 0 ? -1 : dims.d[i]);
}

void set_desc_dims(const nv::DimsExprs& dims, TensorDesc* d) {
  d->rank_known = dims.nbDims >= 0;
  d->dims.clear();
  for (int32_t i = 0; i < dims.nbDims && i < nv::Dims::MAX_DIMS; ++i) {
    const nv::IDimensionExpr* x = dims.d[i];
    d->dims.push_back(x != nullptr && x->isConstant() ? x->getConstantValue() : -1);
  }
}

void set_desc_dtype(nv::DataType t, TensorDesc* d) {
  if (!dtype_from_trt(t, &d->dtype)) d->unsupported_dtype = trt_dtype_name(t);
}

Status need_array(const void* p, int32_t n, const char* op, const char* what) {
  if (n < 0 || (n > 0 && p == nullptr)) return Status::errorf(op, ": TensorRT passed no ", what, " (count ", n, ")");
  return Status::ok();
}

// ---------------------------------------------------------------------------
// Slot masks

std::string describe_mask(int32_t mask, const TensorSlot* slots, int count) {
  std::string s = std::to_string(mask) + " (";
  bool first = true;
  for (int i = 0; i < count; ++i) {
    if (!(mask >> i & 1)) continue;
    s += first ? "" : ", ";
    s += slots[i].name;
    first = false;
  }
  return s + ")";
}

Status read_slot_mask(const char* op, const nv::PluginField& field, bool inputs, const TensorSlot* slots, int count,
                      int32_t* mask) {
  const char* name = inputs ? FIELD_INPUTS : FIELD_OUTPUTS;
  const FieldValue v = read_field(field);
  if (v.kind != FieldValue::Kind::integer) {
    return Status::errorf(op, ": field '", name, "' is ", v.found, ", expected an int (a bitmask of ",
                          inputs ? "input" : "output", " slots)");
  }
  if (v.i < 0 || v.i >= (int64_t{1} << count) || (!inputs && !(v.i & 1))) {
    std::string names;
    for (int i = 0; i < count; ++i) names += str_cat(i ? ", " : "", "bit ", i, " ", slots[i].name);
    return Status::errorf(op, ": field '", name, "' is ", v.i, ", expected a bitmask over the ", count, " ",
                          inputs ? "input" : "output", " slots (", names, ")",
                          inputs ? "" : str_cat(" with bit 0 (", slots[0].name, ") set"));
  }
  *mask = static_cast<int32_t>(v.i);
  return Status::ok();
}

Status layer_input_slots(const char* op, int32_t mask, const TensorSlot* slots, int count, int32_t nb_inputs,
                         std::vector<int>* out) {
  out->clear();
  if (mask < 0) {
    for (int32_t i = 0; i < nb_inputs; ++i) out->push_back(i);  // leading slots
    return Status::ok();
  }
  const int named = __builtin_popcount(static_cast<uint32_t>(mask));
  if (nb_inputs != named) {
    return Status::errorf(op, ": the layer has ", nb_inputs, " inputs, but field 'inputs' = ",
                          describe_mask(mask, slots, count), " names ", named);
  }
  for (int s = 0; s < count; ++s)
    if (mask >> s & 1) out->push_back(s);
  return Status::ok();
}

int32_t nb_outputs_of_mask(int32_t mask) { return 32 - __builtin_clz(static_cast<uint32_t>(mask | 1)); }

std::string with_layer(const std::string& message, const std::string& layer_name) {
  if (layer_name.empty()) return message;
  return message + " (layer '" + layer_name + "')";
}

Status SlotLayout::check_nb_outputs(int32_t nb_outputs) const {
  const int32_t expected = nb_outputs_of_mask(outputs_mask);
  if (nb_outputs == expected) return Status::ok();
  return Status::errorf(op, ": the layer has ", nb_outputs, " outputs, but the plugin was created with ", expected,
                        " (field 'outputs' = ", describe_mask(outputs_mask, outputs, num_outputs), ")");
}

std::vector<bool> SlotLayout::outputs_present() const {
  std::vector<bool> present(static_cast<size_t>(nb_outputs_of_mask(outputs_mask)));
  for (size_t k = 0; k < present.size(); ++k) present[k] = outputs_mask >> k & 1;
  return present;
}

// ---------------------------------------------------------------------------
// PluginBase

PluginBase::PluginBase(std::string op_name, std::string layer_name)
    : op_name_(std::move(op_name)), layer_name_(std::move(layer_name)) {}

void PluginBase::report(const Status& st, nv::ErrorCode code) const noexcept {
  try {
    report_error(recorder_, code, with_layer(st.message(), layer_name_).c_str());
  } catch (...) {
    report_error(recorder_, code, st.message().c_str());  // no memory for the layer name
  }
}

void PluginBase::report_exception(const char* method, const char* what) const noexcept {
  try {
    report(Status::errorf(op_name_, ": internal error in ", method, ": ", what), nv::ErrorCode::kINTERNAL_ERROR);
  } catch (...) {
    report_error(recorder_, nv::ErrorCode::kINTERNAL_ERROR, what);
  }
}

// Runs `body` (returning Status), turns exceptions into reports. 0 on
// success, -1 after reporting a failure.
template <typename F>
int32_t PluginBase::guarded(const char* method, nv::ErrorCode code, F&& body) const noexcept {
  try {
    Status st = body();
    if (st.is_ok()) return 0;
    report(st, code);
  } catch (const std::exception& e) {
    report_exception(method, e.what());
  } catch (...) {
    report_exception(method, "unknown exception");
  }
  return -1;
}

nv::IPluginCapability* PluginBase::getCapabilityInterface(nv::PluginCapabilityType type) noexcept {
  // Each capability is a distinct base; cast to it before going up to
  // IPluginCapability (PluginBase has three IPluginCapability subobjects).
  nv::IPluginCapability* cap = nullptr;
  guarded("getCapabilityInterface", nv::ErrorCode::kINVALID_ARGUMENT, [&] {
    switch (type) {
      case nv::PluginCapabilityType::kCORE: cap = static_cast<nv::IPluginV3OneCore*>(this); return Status::ok();
      case nv::PluginCapabilityType::kBUILD: cap = static_cast<nv::IPluginV3OneBuild*>(this); return Status::ok();
      case nv::PluginCapabilityType::kRUNTIME: cap = static_cast<nv::IPluginV3OneRuntime*>(this); return Status::ok();
    }
    return Status::errorf(op_name_, ": getCapabilityInterface: unknown capability type ", static_cast<int>(type));
  });
  return cap;
}

nv::IPluginV3* PluginBase::clone() noexcept {
  std::unique_ptr<PluginBase> copy;
  if (guarded("clone", nv::ErrorCode::kINTERNAL_ERROR, [&] {
        copy = clone_plugin();
        return copy ? Status::ok() : Status::errorf(op_name_, ": clone failed");
      }) != 0) {
    return nullptr;
  }
  return static_cast<nv::IPluginV3*>(copy.release());
}

int32_t PluginBase::configurePlugin(const nv::DynamicPluginTensorDesc* in, int32_t nb_inputs,
                                    const nv::DynamicPluginTensorDesc* out, int32_t nb_outputs) noexcept {
  return guarded("configurePlugin", nv::ErrorCode::kINVALID_ARGUMENT,
                 [&] { return configure(in, nb_inputs, out, nb_outputs); });
}

int32_t PluginBase::getOutputDataTypes(nv::DataType* output_types, int32_t nb_outputs,
                                       const nv::DataType* input_types, int32_t nb_inputs) const noexcept {
  return guarded("getOutputDataTypes", nv::ErrorCode::kINVALID_ARGUMENT,
                 [&] { return output_data_types(output_types, nb_outputs, input_types, nb_inputs); });
}

int32_t PluginBase::getOutputShapes(const nv::DimsExprs* inputs, int32_t nb_inputs, const nv::DimsExprs* shape_inputs,
                                    int32_t nb_shape_inputs, nv::DimsExprs* outputs, int32_t nb_outputs,
                                    nv::IExprBuilder& builder) noexcept {
  return guarded("getOutputShapes", nv::ErrorCode::kINVALID_ARGUMENT, [&] {
    if (nb_shape_inputs != 0) {
      return Status::errorf(op_name_, ": got ", nb_shape_inputs, " shape inputs, expected none");
    }
    return output_shapes(inputs, nb_inputs, outputs, nb_outputs, builder);
  });
}

bool PluginBase::supportsFormatCombination(int32_t pos, const nv::DynamicPluginTensorDesc* in_out, int32_t nb_inputs,
                                           int32_t nb_outputs) noexcept {
  bool supported = false;
  const int32_t rc = guarded("supportsFormatCombination", nv::ErrorCode::kINVALID_ARGUMENT,
                             [&] { return supports_format(pos, in_out, nb_inputs, nb_outputs, &supported); });
  return rc == 0 && supported;
}

int32_t PluginBase::getNbOutputs() const noexcept { return nb_outputs(); }

size_t PluginBase::getWorkspaceSize(const nv::DynamicPluginTensorDesc* inputs, int32_t nb_inputs,
                                    const nv::DynamicPluginTensorDesc* outputs, int32_t nb_outputs) const noexcept {
  size_t bytes = 0;
  if (guarded("getWorkspaceSize", nv::ErrorCode::kINVALID_ARGUMENT,
              [&] { return workspace_size(inputs, nb_inputs, outputs, nb_outputs, &bytes); }) != 0) {
    return 0;  // the error is reported; TensorRT has no error value here
  }
  return bytes;
}

Status PluginBase::workspace_size(const nv::DynamicPluginTensorDesc*, int32_t, const nv::DynamicPluginTensorDesc*,
                                  int32_t, size_t* bytes) const {
  *bytes = 0;
  return Status::ok();
}

int32_t PluginBase::onShapeChange(const nv::PluginTensorDesc* in, int32_t nb_inputs, const nv::PluginTensorDesc* out,
                                  int32_t nb_outputs) noexcept {
  return guarded("onShapeChange", nv::ErrorCode::kINVALID_ARGUMENT,
                 [&] { return shape_change(in, nb_inputs, out, nb_outputs); });
}

int32_t PluginBase::enqueue(const nv::PluginTensorDesc* input_desc, const nv::PluginTensorDesc* output_desc,
                            const void* const* inputs, void* const* outputs, void* workspace,
                            cudaStream_t stream) noexcept {
  return guarded("enqueue", nv::ErrorCode::kFAILED_EXECUTION,
                 [&] { return run(input_desc, output_desc, inputs, outputs, workspace, stream); });
}

nv::IPluginV3* PluginBase::attachToContext(nv::IPluginResourceContext* context) noexcept {
  std::unique_ptr<PluginBase> copy;
  if (guarded("attachToContext", nv::ErrorCode::kINTERNAL_ERROR, [&] {
        copy = clone_plugin();
        return copy ? Status::ok() : Status::errorf(op_name_, ": attachToContext: clone failed");
      }) != 0) {
    return nullptr;
  }
  // Errors of this execution context's plugin go to its recorder.
  copy->recorder_ = context != nullptr ? context->getErrorRecorder() : nullptr;
  return static_cast<nv::IPluginV3*>(copy.release());
}

const nv::PluginFieldCollection* PluginBase::getFieldsToSerialize() noexcept {
  const nv::PluginFieldCollection* fc = nullptr;
  if (guarded("getFieldsToSerialize", nv::ErrorCode::kINTERNAL_ERROR, [&] {
        serialized_.clear();
        serialize_fields(&serialized_);
        fc = serialized_.collection();
        return Status::ok();
      }) != 0) {
    return nullptr;
  }
  return fc;
}

// ---------------------------------------------------------------------------
// CreatorBase

nv::IPluginV3* CreatorBase::createPlugin(const char* name, const nv::PluginFieldCollection* fc,
                                         nv::TensorRTPhase phase) noexcept {
  std::string layer;
  try {
    layer = name != nullptr ? name : "";
    static const nv::PluginFieldCollection empty{};
    std::unique_ptr<PluginBase> plugin;
    Status st = create(layer, fc != nullptr ? *fc : empty, phase, &plugin);
    if (st.is_ok() && plugin) return static_cast<nv::IPluginV3*>(plugin.release());
    if (st.is_ok()) st = Status::errorf(op_name_, ": createPlugin produced no plugin");
    // No execution context yet: the error goes to the TensorRT logger.
    report_error(nullptr, nv::ErrorCode::kINVALID_ARGUMENT, with_layer(st.message(), layer).c_str());
    return nullptr;
  } catch (const std::exception& e) {
    report_exception(layer, e.what());
  } catch (...) {
    report_exception(layer, "unknown exception");
  }
  return nullptr;
}

void CreatorBase::report_exception(const std::string& layer, const char* what) const noexcept {
  try {
    std::string msg = with_layer(op_name_ + ": internal error in createPlugin: " + what, layer);
    report_error(nullptr, nv::ErrorCode::kINTERNAL_ERROR, msg.c_str());
  } catch (...) {
    report_error(nullptr, nv::ErrorCode::kINTERNAL_ERROR, what);
  }
}

}  // namespace trt_fastops::trt
