#include "plugins/ort/norm_ort_op.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "plugins/common/cuda_status.h"
#include "plugins/norm/norm.h"
#include "plugins/norm/norm_cpu.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {
namespace {

using norm::NormOp;
using norm::NormParams;
using norm::NormSignature;

const NormCustomOp& self(const OrtCustomOp* op) { return *static_cast<const NormCustomOp*>(op); }
const NormSignature& sig_of(const OrtCustomOp* op) { return norm::norm_signature(self(op).op); }

// Per-node state, created once per session.
struct NormKernel {
  NormOp op = NormOp::layer_norm;
  bool cuda = false;
  norm::NormAttrs attrs;
  std::vector<bool> outputs_present;
  std::string node_name;
};

// "(node 'encoder/ln_1')" appended to messages so users find the node.
std::string with_node(const Status& st, const std::string& node_name) {
  if (node_name.empty()) return st.message();
  return st.message() + " (node '" + node_name + "')";
}

OrtStatus* invalid(const Status& st, const std::string& node_name) {
  return api()->CreateStatus(ORT_INVALID_ARGUMENT, with_node(st, node_name).c_str());
}

OrtStatus* internal_error(const char* op_name, const char* what) {
  std::string msg = std::string(op_name) + ": internal error: " + what;
  return api()->CreateStatus(ORT_FAIL, msg.c_str());
}

// ---------------------------------------------------------------------------
// Schema callbacks

const char* ORT_API_CALL get_name(const OrtCustomOp* op) { return sig_of(op).name; }

const char* ORT_API_CALL get_ep(const OrtCustomOp* op) {
  return self(op).cuda ? "CUDAExecutionProvider" : "CPUExecutionProvider";
}

size_t ORT_API_CALL input_count(const OrtCustomOp* op) { return size_t(sig_of(op).num_inputs); }
size_t ORT_API_CALL output_count(const OrtCustomOp* op) { return size_t(sig_of(op).num_outputs); }

ONNXTensorElementDataType ORT_API_CALL input_type(const OrtCustomOp* op, size_t i) {
  return int(i) == sig_of(op).x ? self(op).x_type : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

ONNXTensorElementDataType ORT_API_CALL output_type(const OrtCustomOp* op, size_t i) {
  const NormSignature& sig = sig_of(op);
  if (int(i) == sig.mean || int(i) == sig.inv_std_dev) return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  return self(op).x_type;  // Y, Sum: X's dtype
}

OrtCustomOpInputOutputCharacteristic ORT_API_CALL input_characteristic(const OrtCustomOp* op, size_t i) {
  const NormSignature& sig = sig_of(op);
  return i < size_t(sig.num_inputs) && sig.inputs[i].optional ? INPUT_OUTPUT_OPTIONAL
                                                             : INPUT_OUTPUT_REQUIRED;
}

OrtCustomOpInputOutputCharacteristic ORT_API_CALL output_characteristic(const OrtCustomOp* op, size_t i) {
  const NormSignature& sig = sig_of(op);
  return i < size_t(sig.num_outputs) && sig.outputs[i].optional ? INPUT_OUTPUT_OPTIONAL
                                                               : INPUT_OUTPUT_REQUIRED;
}

OrtMemType ORT_API_CALL input_memory_type(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
int ORT_API_CALL variadic_min_arity(const OrtCustomOp*) { return 1; }
int ORT_API_CALL variadic_homogeneity(const OrtCustomOp*) { return 1; }

// ---------------------------------------------------------------------------
// Kernel creation: validates the node against what the graph knows, so a bad
// model fails at session creation with our message.

Status create_kernel_impl(const NormCustomOp& cop, const OrtKernelInfo* info, NormKernel* k) {
  const NormSignature& sig = norm::norm_signature(cop.op);
  const OrtApi* a = api();
  k->op = cop.op;
  k->cuda = cop.cuda;

  size_t name_size = 0;
  OrtStatus* st = a->KernelInfo_GetNodeName(info, nullptr, &name_size);
  if (st == nullptr && name_size > 1) {
    std::string buf(name_size, '\0');
    st = a->KernelInfo_GetNodeName(info, buf.data(), &name_size);
    if (st == nullptr) k->node_name = buf.c_str();
  }
  if (st) a->ReleaseStatus(st);  // the name only decorates messages

  TRT_FASTOPS_RETURN_IF_ERROR(read_norm_attrs(info, cop.op, &k->attrs));

  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfo_GetInputCount(info, &n_in), "KernelInfo_GetInputCount"));
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfo_GetOutputCount(info, &n_out), "KernelInfo_GetOutputCount"));
  if (n_in > size_t(sig.num_inputs) || n_out > size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": node has ", n_in, " inputs and ", n_out, " outputs, expected at most ",
                          sig.num_inputs, " and ", sig.num_outputs);
  }
  std::vector<norm::TensorDesc> inputs(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    Status s = tensor_desc_from_kernel_info(info, i, &inputs[i]);
    if (!s.is_ok()) return Status::errorf(sig.name, ": ", s.message());
  }
  k->outputs_present.assign(n_out, false);
  for (size_t i = 0; i < n_out; ++i) {
    std::string name;
    TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_output_name(info, i, &name));
    k->outputs_present[i] = !name.empty();
  }
  norm::NormShapes shapes;
  return norm::infer_norm(cop.op, k->attrs, inputs, k->outputs_present, &shapes);
}

OrtStatusPtr ORT_API_CALL create_kernel(const OrtCustomOp* op, const OrtApi*, const OrtKernelInfo* info,
                                        void** kernel) {
  *kernel = nullptr;
  try {
    auto k = std::make_unique<NormKernel>();
    Status st = create_kernel_impl(self(op), info, k.get());
    if (!st.is_ok()) return invalid(st, k->node_name);
    *kernel = k.release();
    return nullptr;
  } catch (const std::exception& e) {
    return internal_error(sig_of(op).name, e.what());
  } catch (...) {
    return internal_error(sig_of(op).name, "unknown exception while creating the kernel");
  }
}

void ORT_API_CALL destroy_kernel(void* kernel) { delete static_cast<NormKernel*>(kernel); }

// ---------------------------------------------------------------------------
// Compute

struct CpuRowsJob {
  const NormParams* params;
  int64_t rows_per_chunk;
  std::vector<Status>* results;
};

void run_cpu_chunk(void* data, size_t chunk) {
  auto* job = static_cast<CpuRowsJob*>(data);
  const int64_t begin = int64_t(chunk) * job->rows_per_chunk;
  const int64_t end = std::min(job->params->rows, begin + job->rows_per_chunk);
  (*job->results)[chunk] = norm::run_norm_cpu_rows(*job->params, begin, end);
}

// CPU reference, split over rows through ORT's intra-op thread pool.
Status run_cpu(OrtKernelContext* ctx, const NormParams& p) {
  constexpr int64_t ELEMS_PER_CHUNK = 1 << 15;  // keeps per-task overhead small
  TRT_FASTOPS_RETURN_IF_ERROR(norm::run_norm_cpu_rows(p, 0, 0));  // validates params
  const int64_t rows_per_chunk = std::max<int64_t>(1, ELEMS_PER_CHUNK / p.cols);
  const int64_t chunks = (p.rows + rows_per_chunk - 1) / rows_per_chunk;
  if (chunks <= 1) return norm::run_norm_cpu(p);
  std::vector<Status> results(static_cast<size_t>(chunks));
  CpuRowsJob job{&p, rows_per_chunk, &results};
  OrtStatus* st = api()->KernelContext_ParallelFor(ctx, run_cpu_chunk, size_t(chunks), 0, &job);
  if (st != nullptr) {  // no thread pool API in this build: run serially
    api()->ReleaseStatus(st);
    return norm::run_norm_cpu(p);
  }
  for (const Status& s : results) TRT_FASTOPS_RETURN_IF_ERROR(s);
  return Status::ok();
}

// Returns an OrtStatus* directly so a CUDA failure can carry ORT_EP_FAIL.
OrtStatus* compute_impl(const NormKernel& k, OrtKernelContext* ctx) {
  const OrtApi* a = api();
  const NormSignature& sig = norm::norm_signature(k.op);
  auto fail = [&](const Status& st) { return invalid(st, k.node_name); };
  auto ort_fail = [&](OrtStatus* st, const char* what) -> OrtStatus* {
    return st ? invalid(from_ort_status(st, what), k.node_name) : nullptr;
  };

  size_t n_in = 0;
  if (OrtStatus* st = ort_fail(a->KernelContext_GetInputCount(ctx, &n_in), "KernelContext_GetInputCount")) return st;
  n_in = std::min(n_in, size_t(sig.num_inputs));
  std::vector<norm::TensorDesc> inputs(n_in);
  norm::NormBuffers buffers;
  for (size_t i = 0; i < n_in; ++i) {
    const OrtValue* v = nullptr;
    if (OrtStatus* st = ort_fail(a->KernelContext_GetInput(ctx, i, &v), "KernelContext_GetInput")) return st;
    Status s = tensor_desc_from_value(v, &inputs[i]);
    if (!s.is_ok()) return fail(s);
    if (v != nullptr) {
      void* data = nullptr;
      // The C API (v21) has no const accessor; the data is only read.
      if (OrtStatus* st = ort_fail(a->GetTensorMutableData(const_cast<OrtValue*>(v), &data), "GetTensorMutableData"))
        return st;
      buffers.inputs[i] = data;
    }
  }

  norm::NormShapes shapes;
  Status s = norm::infer_norm(k.op, k.attrs, inputs, k.outputs_present, &shapes);
  if (!s.is_ok()) return fail(s);

  for (size_t i = 0; i < k.outputs_present.size(); ++i) {
    if (!k.outputs_present[i]) continue;
    const bool stat = int(i) == sig.mean || int(i) == sig.inv_std_dev;
    const std::vector<int64_t>& dims = stat ? shapes.stat_dims : shapes.y_dims;
    OrtValue* v = nullptr;
    if (OrtStatus* st = ort_fail(a->KernelContext_GetOutput(ctx, i, dims.data(), dims.size(), &v),
                                 "KernelContext_GetOutput"))
      return st;
    if (v == nullptr) continue;  // ORT has no value for it after all
    void* data = nullptr;
    if (OrtStatus* st = ort_fail(a->GetTensorMutableData(v, &data), "GetTensorMutableData")) return st;
    buffers.outputs[i] = data;
  }

  NormParams p;
  s = norm::make_norm_params(k.op, k.attrs, shapes, buffers, &p);
  if (!s.is_ok()) return fail(s);

  if (!k.cuda) {
    s = run_cpu(ctx, p);
    return s.is_ok() ? nullptr : fail(s);
  }

  void* stream = nullptr;
  if (OrtStatus* st = ort_fail(a->KernelContext_GetGPUComputeStream(ctx, &stream), "KernelContext_GetGPUComputeStream"))
    return st;
  // Enqueue only: no allocation, no synchronisation (CUDA-graph capture safe).
  cudaError_t err = norm::launch_norm(p, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    std::string msg = std::string(sig.name) + ": CUDA kernel " + norm::norm_kernel_name(p) +
                      " failed: " + cuda_error_string(err);
    if (!k.node_name.empty()) msg += " (node '" + k.node_name + "')";
    return a->CreateStatus(ORT_EP_FAIL, msg.c_str());
  }
  return nullptr;
}

OrtStatusPtr ORT_API_CALL compute(void* kernel, OrtKernelContext* ctx) {
  const auto* k = static_cast<const NormKernel*>(kernel);
  try {
    return compute_impl(*k, ctx);
  } catch (const std::exception& e) {
    return internal_error(norm::norm_op_name(k->op), e.what());
  } catch (...) {
    return internal_error(norm::norm_op_name(k->op), "unknown exception in compute");
  }
}

// ---------------------------------------------------------------------------
// Shape inference. ORT 1.31 ignores the status this returns, so validation
// that must stop a session lives in create_kernel; here we validate what we
// can and give Y (index 0, always present) its shape. Other outputs are left
// alone: this context cannot tell how many outputs the node has.

Status infer_shapes_impl(const NormCustomOp& cop, OrtShapeInferContext* ctx) {
  const OrtApi* a = api();
  const NormSignature& sig = norm::norm_signature(cop.op);
  size_t n_in = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->ShapeInferContext_GetInputCount(ctx, &n_in), "ShapeInferContext_GetInputCount"));
  n_in = std::min(n_in, size_t(sig.num_inputs));
  std::vector<norm::TensorDesc> inputs(n_in);
  std::vector<std::string> x_symbols;
  for (size_t i = 0; i < n_in; ++i) {
    OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by ctx
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->ShapeInferContext_GetInputTypeShape(ctx, i, &info),
                                                "ShapeInferContext_GetInputTypeShape"));
    ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetTensorElementType(info, &t), "GetTensorElementType"));
    if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) continue;  // omitted optional input
    norm::TensorDesc& d = inputs[i];
    d.present = true;
    set_desc_dtype(t, &d);
    size_t rank = 0;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetDimensionsCount(info, &rank), "GetDimensionsCount"));
    d.dims.assign(rank, 0);
    if (rank > 0) {
      TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetDimensions(info, d.dims.data(), rank), "GetDimensions"));
    }
    for (auto& v : d.dims)
      if (v < 0) v = -1;
    d.rank_known = rank > 0;  // a missing shape reads as rank 0
    if (int(i) == sig.x && rank > 0) {
      std::vector<const char*> syms(rank, nullptr);
      TRT_FASTOPS_RETURN_IF_ERROR(
          from_ort_status(a->GetSymbolicDimensions(info, syms.data(), rank), "GetSymbolicDimensions"));
      for (const char* s : syms) x_symbols.emplace_back(s ? s : "");
    }
  }
  norm::NormAttrs attrs;
  TRT_FASTOPS_RETURN_IF_ERROR(read_norm_attrs(ctx, cop.op, &attrs));
  norm::NormShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(norm::infer_norm(cop.op, attrs, inputs, {}, &shapes));
  if (shapes.rank <= 0) return Status::ok();  // X's rank unknown: nothing to say

  // Y = X's shape; symbolic dims keep their names. A dim that is neither
  // known nor named cannot be expressed through this API: leave Y alone.
  std::vector<const char*> names(shapes.y_dims.size(), "");
  for (size_t i = 0; i < shapes.y_dims.size(); ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (i >= x_symbols.size() || x_symbols[i].empty()) return Status::ok();
    names[i] = x_symbols[i].c_str();
  }
  OrtTensorTypeAndShapeInfo* y = nullptr;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->CreateTensorTypeAndShapeInfo(&y), "CreateTensorTypeAndShapeInfo"));
  Status st = from_ort_status(a->SetTensorElementType(y, element_type_of(shapes.dtype)), "SetTensorElementType");
  if (st.is_ok())
    st = from_ort_status(a->SetDimensions(y, shapes.y_dims.data(), shapes.y_dims.size()), "SetDimensions");
  if (st.is_ok())
    st = from_ort_status(a->SetSymbolicDimensions(y, names.data(), names.size()), "SetSymbolicDimensions");
  if (st.is_ok())
    st = from_ort_status(a->ShapeInferContext_SetOutputTypeShape(ctx, size_t(sig.y), y),
                         "ShapeInferContext_SetOutputTypeShape");
  a->ReleaseTensorTypeAndShapeInfo(y);
  return st;
}

OrtStatusPtr ORT_API_CALL infer_output_shapes(const OrtCustomOp* op, OrtShapeInferContext* ctx) {
  try {
    Status st = infer_shapes_impl(self(op), ctx);
    return st.is_ok() ? nullptr : to_ort_status(st);
  } catch (const std::exception& e) {
    return internal_error(sig_of(op).name, e.what());
  } catch (...) {
    return internal_error(sig_of(op).name, "unknown exception in shape inference");
  }
}

}  // namespace

void init_norm_custom_op(NormCustomOp* c, NormOp op, bool cuda, ONNXTensorElementDataType x_type) {
  std::memset(static_cast<OrtCustomOp*>(c), 0, sizeof(OrtCustomOp));
  c->version = ORT_API_VERSION;
  c->GetName = get_name;
  c->GetExecutionProviderType = get_ep;
  c->GetInputType = input_type;
  c->GetInputTypeCount = input_count;
  c->GetOutputType = output_type;
  c->GetOutputTypeCount = output_count;
  c->GetInputCharacteristic = input_characteristic;
  c->GetOutputCharacteristic = output_characteristic;
  c->GetInputMemoryType = input_memory_type;
  c->GetVariadicInputMinArity = variadic_min_arity;
  c->GetVariadicInputHomogeneity = variadic_homogeneity;
  c->GetVariadicOutputMinArity = variadic_min_arity;
  c->GetVariadicOutputHomogeneity = variadic_homogeneity;
  c->CreateKernelV2 = create_kernel;
  c->KernelComputeV2 = compute;
  c->KernelDestroy = destroy_kernel;
  c->InferOutputShapeFn = infer_output_shapes;
  // CreateKernel / KernelCompute (v1), start/end versions, in-place and alias
  // maps stay null: ORT uses the V2 callbacks and since-version 1.
  c->op = op;
  c->cuda = cuda;
  c->x_type = x_type;
}

}  // namespace trt_fastops::ort
