// The ORT custom-op plumbing every op family shares: one OrtOp<Family> is one
// registration (op, execution provider, element type of X), and all of a
// family's registrations share the same callbacks. The family supplies only
// what is its own:
//
//   struct Family {
//     using Op = ...;         // the op enum (norm::NormOp, conv::ConvOp)
//     using Signature = ...;  // name, num_inputs/num_outputs, inputs[]/outputs[] (TensorSlot), x
//     struct Kernel : OrtKernelBase<Op> { ... };  // per-node state
//     static const Signature& signature(Op op);
//     // Element type of output i; x_type is the registration's X type.
//     static ONNXTensorElementDataType output_type(const Signature& sig, size_t i, ONNXTensorElementDataType x_type);
//     // Validates the node (op, cuda and node_name are already set in *k).
//     static Status create_kernel(const OrtKernelInfo* info, Kernel* k);
//     // Returns an OrtStatus* directly so a CUDA failure can carry ORT_EP_FAIL.
//     static OrtStatus* compute(const Kernel& k, OrtKernelContext* ctx);
//     static Status infer_shapes(Op op, OrtShapeInferContext* ctx);
//   };
//
// Why several registrations per op and EP: ORT infers the element type of a
// type-agnostic (UNDEFINED) output from the *last* type-agnostic input, not
// from X. So each op is registered once per supported dtype with X (and the
// outputs that follow it) typed and every other input type-agnostic (Y follows
// X, and a Scale or W of the wrong dtype reaches our own check and message),
// plus one fully type-agnostic catch-all, so that an unsupported X (float64,
// int32) also reaches our refusal instead of ORT's "no kernel def matches".
// A family may register fewer X types on one EP (add_op_registrations'
// x_types): ORT matches a node against the kernel definitions of each EP by
// type (an absent optional input is not checked), so a node whose X type an EP
// has no registration for is simply not claimed by that EP and the partitioner
// places it on the next one (Attention: float32 on CUDA -> CPU EP). The op's
// schema is the union of every EP's registrations, so the CPU catch-all keeps
// every type valid at graph level.
//
// No exception crosses into ORT: every callback that can fail catches and
// returns "<op>: internal error: ..." (ORT_FAIL).
#pragma once

#include <onnxruntime_c_api.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "plugins/common/status.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {

// Per-node state every family's kernel starts with; created once per session.
template <typename Op>
struct OrtKernelBase {
  Op op{};
  bool cuda = false;      // CUDAExecutionProvider, else CPUExecutionProvider
  std::string node_name;  // "" when unnamed; decorates messages
};

template <typename Family>
struct OrtOp : OrtCustomOp {
  using Op = typename Family::Op;
  using Signature = typename Family::Signature;
  using Kernel = typename Family::Kernel;

  Op op;
  bool cuda;                            // CUDAExecutionProvider, else CPUExecutionProvider
  ONNXTensorElementDataType x_type;     // UNDEFINED: catch-all

  OrtOp(Op op_, bool cuda_, ONNXTensorElementDataType x_type_)
      : OrtCustomOp{}, op(op_), cuda(cuda_), x_type(x_type_) {
    version = ORT_API_VERSION;
    GetName = get_name;
    GetExecutionProviderType = get_ep;
    GetInputType = input_type;
    GetInputTypeCount = input_count;
    GetOutputType = output_type;
    GetOutputTypeCount = output_count;
    GetInputCharacteristic = input_characteristic;
    GetOutputCharacteristic = output_characteristic;
    GetInputMemoryType = input_memory_type;
    GetVariadicInputMinArity = variadic_min_arity;
    GetVariadicInputHomogeneity = variadic_homogeneity;
    GetVariadicOutputMinArity = variadic_min_arity;
    GetVariadicOutputHomogeneity = variadic_homogeneity;
    CreateKernelV2 = create_kernel;
    KernelComputeV2 = compute;
    KernelDestroy = destroy_kernel;
    InferOutputShapeFn = infer_output_shapes;
    // CreateKernel / KernelCompute (v1), start/end versions, in-place and alias
    // maps stay null: ORT uses the V2 callbacks and since-version 1.
  }

 private:
  static const OrtOp& self(const OrtCustomOp* op) { return *static_cast<const OrtOp*>(op); }
  static const Signature& sig_of(const OrtCustomOp* op) { return Family::signature(self(op).op); }

  // -------------------------------------------------------------------------
  // Schema callbacks

  static const char* ORT_API_CALL get_name(const OrtCustomOp* op) { return sig_of(op).name; }

  static const char* ORT_API_CALL get_ep(const OrtCustomOp* op) {
    return self(op).cuda ? "CUDAExecutionProvider" : "CPUExecutionProvider";
  }

  static size_t ORT_API_CALL input_count(const OrtCustomOp* op) { return size_t(sig_of(op).num_inputs); }
  static size_t ORT_API_CALL output_count(const OrtCustomOp* op) { return size_t(sig_of(op).num_outputs); }

  static ONNXTensorElementDataType ORT_API_CALL input_type(const OrtCustomOp* op, size_t i) {
    return int(i) == sig_of(op).x ? self(op).x_type : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  }

  static ONNXTensorElementDataType ORT_API_CALL output_type(const OrtCustomOp* op, size_t i) {
    return Family::output_type(sig_of(op), i, self(op).x_type);
  }

  static OrtCustomOpInputOutputCharacteristic ORT_API_CALL input_characteristic(const OrtCustomOp* op, size_t i) {
    const Signature& sig = sig_of(op);
    return i < size_t(sig.num_inputs) && sig.inputs[i].optional ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }

  static OrtCustomOpInputOutputCharacteristic ORT_API_CALL output_characteristic(const OrtCustomOp* op, size_t i) {
    const Signature& sig = sig_of(op);
    return i < size_t(sig.num_outputs) && sig.outputs[i].optional ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }

  static OrtMemType ORT_API_CALL input_memory_type(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
  static int ORT_API_CALL variadic_min_arity(const OrtCustomOp*) { return 1; }
  static int ORT_API_CALL variadic_homogeneity(const OrtCustomOp*) { return 1; }

  // -------------------------------------------------------------------------
  // Kernel lifetime and compute. Kernel creation validates the node against
  // what the graph knows, so a bad model fails at session creation with our message.

  static OrtStatusPtr ORT_API_CALL create_kernel(const OrtCustomOp* op, const OrtApi*, const OrtKernelInfo* info,
                                                 void** kernel) {
    *kernel = nullptr;
    try {
      auto k = std::make_unique<Kernel>();
      k->op = self(op).op;
      k->cuda = self(op).cuda;
      k->node_name = kernel_info_node_name(info);
      Status st = Family::create_kernel(info, k.get());
      if (!st.is_ok()) return invalid_argument(st, k->node_name);
      *kernel = k.release();
      return nullptr;
    } catch (const std::exception& e) {
      return internal_error(sig_of(op).name, e.what());
    } catch (...) {
      return internal_error(sig_of(op).name, "unknown exception while creating the kernel");
    }
  }

  static void ORT_API_CALL destroy_kernel(void* kernel) { delete static_cast<Kernel*>(kernel); }

  static OrtStatusPtr ORT_API_CALL compute(void* kernel, OrtKernelContext* ctx) {
    const auto* k = static_cast<const Kernel*>(kernel);
    try {
      return Family::compute(*k, ctx);
    } catch (const std::exception& e) {
      return internal_error(Family::signature(k->op).name, e.what());
    } catch (...) {
      return internal_error(Family::signature(k->op).name, "unknown exception in compute");
    }
  }

  // ORT 1.31 ignores the status this returns, so validation that must stop a
  // session lives in create_kernel.
  static OrtStatusPtr ORT_API_CALL infer_output_shapes(const OrtCustomOp* op, OrtShapeInferContext* ctx) {
    try {
      Status st = Family::infer_shapes(self(op).op, ctx);
      return st.is_ok() ? nullptr : to_ort_status(st);
    } catch (const std::exception& e) {
      return internal_error(sig_of(op).name, e.what());
    } catch (...) {
      return internal_error(sig_of(op).name, "unknown exception in shape inference");
    }
  }
};

// X types of the usual registrations: every supported dtype, then the catch-all.
inline const std::vector<ONNXTensorElementDataType>& all_x_types() {
  static const std::vector<ONNXTensorElementDataType> types = {
      ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
      ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED};
  return types;
}

// Adds `op` for one execution provider to `domain`, once per X type in
// `x_types` (UNDEFINED = the type-agnostic catch-all). Typed registrations
// come first: ORT picks the first kernel definition whose types match when it
// infers output types. ORT keeps pointers into `store` (never released, see register.cc).
template <typename Family>
OrtStatus* add_op_registrations(const OrtApi* a, OrtCustomOpDomain* domain, typename Family::Op op, bool cuda,
                                std::vector<std::unique_ptr<OrtOp<Family>>>* store,
                                const std::vector<ONNXTensorElementDataType>& x_types = all_x_types()) {
  for (ONNXTensorElementDataType t : x_types) {
    auto c = std::make_unique<OrtOp<Family>>(op, cuda, t);
    if (OrtStatus* st = a->CustomOpDomain_Add(domain, c.get())) return st;
    store->push_back(std::move(c));
  }
  return nullptr;
}

// CPU execution split over ORT's intra-op thread pool: run_chunk(begin, end)
// for consecutive chunks of [0, items) of items_per_chunk each (>= 1), or
// run_all() when there is a single chunk or the build has no thread pool API.
// The first failed chunk's Status is returned.
template <typename RunChunk, typename RunAll>
Status run_chunked(OrtKernelContext* ctx, int64_t items, int64_t items_per_chunk, const RunChunk& run_chunk,
                   const RunAll& run_all) {
  const int64_t chunks = (items + items_per_chunk - 1) / items_per_chunk;
  if (chunks <= 1) return run_all();
  struct Job {
    const RunChunk* run_chunk;
    int64_t items, items_per_chunk;
    std::vector<Status> results;
  } job{&run_chunk, items, items_per_chunk, std::vector<Status>(static_cast<size_t>(chunks))};
  auto run_one = [](void* data, size_t chunk) {
    auto* j = static_cast<Job*>(data);
    const int64_t begin = int64_t(chunk) * j->items_per_chunk;
    const int64_t end = std::min(j->items, begin + j->items_per_chunk);
    j->results[chunk] = (*j->run_chunk)(begin, end);
  };
  OrtStatus* st = api()->KernelContext_ParallelFor(ctx, run_one, size_t(chunks), 0, &job);
  if (st != nullptr) {  // no thread pool API in this build: run serially
    api()->ReleaseStatus(st);
    return run_all();
  }
  for (const Status& s : job.results) TRT_FASTOPS_RETURN_IF_ERROR(s);
  return Status::ok();
}

}  // namespace trt_fastops::ort
