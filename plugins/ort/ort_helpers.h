// Plain-C-API helpers shared by the ORT custom ops of every family: the
// OrtApi pointer, Status -> OrtStatus*, ONNX element type -> DType, and
// TensorDesc readers for kernel creation, compute and shape inference. No
// exceptions cross into ORT: everything returns a Status or an OrtStatus*.
#pragma once

#include <onnxruntime_c_api.h>

#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"
#include "plugins/common/tensor_desc.h"

namespace trt_fastops::ort {

// Set once by RegisterCustomOps (the same value for the whole process).
void set_api(const OrtApi* api);
const OrtApi* api();

// Status -> OrtStatus* (nullptr for ok) with the given code.
OrtStatus* to_ort_status(const Status& st, OrtErrorCode code = ORT_INVALID_ARGUMENT);
// OrtStatus* -> Status, releasing it; `what` names the failed ORT call.
Status from_ort_status(OrtStatus* st, const char* what);
// True when the ORT call succeeded; a failure status is released (probing calls).
bool succeeded(OrtStatus* st);

// msg + " (node '<node_name>')" (so users find the node; nothing added for an
// unnamed node) as an OrtStatus* with the given code.
OrtStatus* node_error(OrtErrorCode code, const std::string& msg, const std::string& node_name);
// A refused node or input: ORT_INVALID_ARGUMENT with the node's name.
OrtStatus* invalid_argument(const Status& st, const std::string& node_name);
// "<op_name>: internal error: <what>" (an exception caught at the C boundary).
OrtStatus* internal_error(const char* op_name, const char* what);

// "float64", "int32", ... for messages.
const char* element_type_name(ONNXTensorElementDataType t);
ONNXTensorElementDataType element_type_of(DType t);
// Fills desc->dtype, or desc->unsupported_dtype with the type's name.
void set_desc_dtype(ONNXTensorElementDataType t, TensorDesc* desc);

// Run time: an input OrtValue (nullptr = absent) -> TensorDesc.
Status tensor_desc_from_value(const OrtValue* value, TensorDesc* desc);

// Graph time: what ORT knows about a node input at kernel creation. Unknown
// dims become -1; rank 0 counts as unknown (ORT reports a missing shape as
// rank 0, so a real scalar is only refused at run time).
Status tensor_desc_from_kernel_info(const OrtKernelInfo* info, size_t index, TensorDesc* desc);

// Node input/output names ("" for an omitted optional one).
Status kernel_info_input_name(const OrtKernelInfo* info, size_t index, std::string* name);
Status kernel_info_output_name(const OrtKernelInfo* info, size_t index, std::string* name);
// The node's name, "" when ORT has none (it only decorates messages).
std::string kernel_info_node_name(const OrtKernelInfo* info);
// Kernel creation: the node's input and output counts.
Status kernel_info_counts(const OrtKernelInfo* info, size_t* n_inputs, size_t* n_outputs);
// Kernel creation: one TensorDesc per node input (tensor_desc_from_kernel_info);
// a failure reads "<op_name>: <message>".
Status kernel_info_inputs(const OrtKernelInfo* info, size_t n_inputs, const char* op_name,
                          std::vector<TensorDesc>* descs);

// Compute: the context's inputs (at most max_inputs) as TensorDescs, and their
// data pointers in data[i] (left alone for an absent input).
Status context_inputs(OrtKernelContext* ctx, size_t max_inputs, std::vector<TensorDesc>* descs, const void** data);
// Compute: output `index` with shape `dims`; *data is left alone when ORT has
// no value for it.
Status context_output(OrtKernelContext* ctx, size_t index, const std::vector<int64_t>& dims, void** data);

// Shape inference: the node's inputs (at most max_inputs) as TensorDescs
// (omitted optional inputs absent, a missing shape as an unknown rank), and the
// symbolic names of input x's dims ("" where none; empty when X's rank is unknown).
Status shape_infer_inputs(OrtShapeInferContext* ctx, size_t max_inputs, int x, std::vector<TensorDesc>* descs,
                          std::vector<std::string>* x_symbols);
// Shape inference: a new symbolic dim name ("trt_fastops_unk_17") for an output dim that is
// unknown and unrelated to any other dim. One counter for every op: ORT equates dims that share
// a symbol, so two ops' counters must not both hand out "trt_fastops_unk_0".
std::string fresh_dim_symbol();
// Shape inference: output `index` gets dtype and dims; names[i] is dim i's
// symbol ("" for a known dim; ORT records an unnamed unknown dim as -1).
Status set_shape_infer_output(OrtShapeInferContext* ctx, size_t index, DType dtype, const std::vector<int64_t>& dims,
                              const std::vector<const char*>& names);

// ---------------------------------------------------------------------------
// The 'inputs' / 'outputs' node attributes: int bitmasks of an op's input /
// output slots, the TensorRT plugins' fields (plugins/trt/README.md) that let
// one file leave out a middle optional input without an empty name. ORT maps
// node inputs by position, so with 'inputs' given, node input k is the k-th
// set slot. One implementation for every op family.

// What the slot-mask helpers need of a family's Signature (see slot_layout).
struct SlotLayout {
  const char* op_name;
  int num_inputs;
  int num_outputs;
  const TensorSlot* outputs;  // num_outputs entries, for messages
};
template <typename Signature>
SlotLayout slot_layout(const Signature& sig) {
  return SlotLayout{sig.name, sig.num_inputs, sig.num_outputs, sig.outputs};
}

// Kernel creation, for a node with n_in inputs: reads 'inputs' and 'outputs'
// (absent: -1 in *outputs_mask; not an int, or not a bitmask over the slots
// (outputs: with bit 0 set): refused) and maps positions to slots: node input
// k is slot (*input_slots)[k]; empty without 'inputs' (positions are slots).
// A mask naming a different number of slots than the node has inputs is refused.
Status read_slot_masks(const OrtKernelInfo* info, const SlotLayout& layout, size_t n_in, std::vector<int>* input_slots,
                       int64_t* outputs_mask);
// Kernel creation: (*present)[i] = node output i is named. A named output
// outside outputs_mask (>= 0) is refused: TensorRT would leave it unwritten.
Status kernel_info_outputs_present(const OrtKernelInfo* info, const SlotLayout& layout, size_t n_out,
                                   int64_t outputs_mask, std::vector<bool>* present);
// Descs (and, when data is not null, data pointers; data has room for
// num_inputs) by node position -> by slot; slots the node lacks stay absent.
// Empty input_slots: left as they are.
void inputs_to_slots(const std::vector<int>& input_slots, int num_inputs, std::vector<TensorDesc>* descs,
                     const void** data);
// Shape inference: applies the node's 'inputs' attribute, if any, to `descs`
// (X stays slot 0). False when the attribute is unusable (kernel creation
// words the refusal; shape inference then says nothing).
bool shape_infer_inputs_to_slots(OrtShapeInferContext* ctx, const SlotLayout& layout, std::vector<TensorDesc>* descs);

// Scratch blocks from ORT's allocator for the memory of one of the node's
// inputs (so device memory on the CUDA EP, host memory on the CPU EP), freed
// when the guard goes: after the enqueue, as ORT's own CUDA kernels do with
// their scratch (later users of a block are ordered on the same stream).
// `what` names the block in the error ("a 33554432-byte cuBLASLt workspace").
class KernelScratch {
 public:
  KernelScratch(OrtKernelContext* ctx, size_t input, const char* op_name) : ctx_(ctx), input_(input), op_(op_name) {}
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;
  ~KernelScratch();
  Status alloc(size_t bytes, const std::string& what, void** data);

 private:
  OrtKernelContext* ctx_;
  size_t input_;
  const char* op_;
  OrtAllocator* allocator_ = nullptr;
  // The most any op asks for: Attention's present_key / present_value and its launcher's workspace.
  static constexpr size_t MAX_BLOCKS = 3;
  void* blocks_[MAX_BLOCKS] = {};
};

}  // namespace trt_fastops::ort
