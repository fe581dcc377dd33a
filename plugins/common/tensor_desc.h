// Framework-free pieces shared by every op family's semantics (norm_op, conv_op):
// the tensor description adapters fill, signature slots, dims formatting and
// the checks and messages that read the same for every op ("input 'W' (index 1)
// is missing; it is required", "... is float32, expected float16 (the dtype of X)",
// unknown / wrong-kind attributes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"

namespace trt_fastops {

// One input as an adapter sees it. At graph-build time dims may be unknown
// (-1) and the rank may be unknown (rank_known = false); at run time
// everything is known.
struct TensorDesc {
  bool present = false;
  DType dtype = DType::f32;
  // Non-empty: the element type is not one we support; this is its name
  // ("float64", "int32"), used in the error message. dtype is then ignored.
  std::string unsupported_dtype;
  bool rank_known = true;
  std::vector<int64_t> dims;  // -1: unknown dimension

  static TensorDesc absent() { return TensorDesc(); }
  static TensorDesc of(DType t, std::vector<int64_t> d) {
    TensorDesc r;
    r.present = true;
    r.dtype = t;
    r.dims = std::move(d);
    return r;
  }
};

// One input or output of an op's signature.
struct TensorSlot {
  const char* name = nullptr;  // ONNX input/output name, e.g. "Scale"
  bool optional = false;
};

// "[2, 3, 768]" (unknown dims as "?"), for messages.
std::string format_dims(const std::vector<int64_t>& dims);

// inputs[idx], or an absent desc for idx < 0 or past the end (omitted trailing inputs).
const TensorDesc& desc_at(const std::vector<TensorDesc>& inputs, int idx);

// "input 'Scale' (index 1)" / "output 'Mean' (index 1)".
std::string slot_ref(const char* kind, const TensorSlot* slots, int idx);
template <typename Signature>
std::string input_ref(const Signature& sig, int idx) {
  return slot_ref("input", sig.inputs, idx);
}
template <typename Signature>
std::string output_ref(const Signature& sig, int idx) {
  return slot_ref("output", sig.outputs, idx);
}

// Every non-optional slot present: "<op>: input 'W' (index 1) is missing; it is required".
Status check_required_inputs(const char* op_name, const TensorSlot* slots, int num_slots,
                             const std::vector<TensorDesc>& inputs);
// X (slot x) is float32/float16/bfloat16 and every other present input has X's dtype.
Status check_input_dtypes(const char* op_name, const TensorSlot* slots, int num_slots, int x,
                          const std::vector<TensorDesc>& inputs);

// "<op>: unknown attribute '<name>', expected one of a, b, c"
Status unknown_attr_error(const char* op_name, const std::string& name, const std::vector<std::string>& known);
// "<op>: attribute '<name>' is <found_kind>, expected <expected_kind>"
Status attr_kind_error(const char* op_name, const std::string& name, const char* found_kind,
                       const char* expected_kind);

// An op family's signature table, indexed by its op enum (out of range -> entry 0).
template <typename Signature, size_t N, typename Op>
const Signature& signature_at(const Signature (&table)[N], Op op) {
  int i = static_cast<int>(op);
  if (i < 0 || i >= int(N)) i = 0;
  return table[i];
}
// The op whose signature is called `name`; false for any other name.
template <typename Signature, size_t N, typename Op>
bool op_from_name(const Signature (&table)[N], const std::string& name, Op* op) {
  for (const Signature& sig : table) {
    if (name == sig.name) {
      *op = sig.op;
      return true;
    }
  }
  return false;
}

// Product of dims[begin, end): 0 if any known dim is 0, -1 if otherwise any is
// unknown (graph time). Sets *overflow when the product does not fit int64.
int64_t dims_product(const std::vector<int64_t>& dims, size_t begin, size_t end, bool* overflow);

}  // namespace trt_fastops
