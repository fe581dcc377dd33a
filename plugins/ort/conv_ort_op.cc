#include "plugins/ort/conv_ort_op.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "plugins/conv/conv.h"
#include "plugins/conv/conv_cpu.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {

// The CUDA path is plugins/ort/conv_ort_cuda.cc. This weak default only keeps the
// library linkable in a tree without that file; the real definition replaces it.
__attribute__((weak)) OrtStatus* conv_compute_cuda(OrtKernelContext*, const conv::ConvParams&, const char* op_name,
                                                   const std::string& node_name) {
  std::string msg = std::string(op_name) + ": the CUDA implementation is not built into this library";
  if (!node_name.empty()) msg += " (node '" + node_name + "')";
  return api()->CreateStatus(ORT_NOT_IMPLEMENTED, msg.c_str());
}

namespace {

using conv::ConvOp;
using conv::ConvParams;
using conv::ConvSignature;

const ConvCustomOp& self(const OrtCustomOp* op) { return *static_cast<const ConvCustomOp*>(op); }
const ConvSignature& sig_of(const OrtCustomOp* op) { return conv::conv_signature(self(op).op); }

// Per-node state, created once per session.
struct ConvKernel {
  ConvOp op = ConvOp::conv;
  bool cuda = false;
  conv::ConvAttrs attrs;
  std::string node_name;
};

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

// True when the ORT call succeeded; a failure status is released.
bool succeeded(OrtStatus* st) {
  if (st == nullptr) return true;
  api()->ReleaseStatus(st);
  return false;
}

// ---------------------------------------------------------------------------
// Attributes. ORT cannot list a node's attributes, so each known name is
// probed: first as its own kind, then as the other kinds (for the message).

Status read_conv_attrs(const OrtKernelInfo* info, ConvOp op, conv::ConvAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = conv::ConvAttrs();
  for (const std::string& name : conv::conv_attr_names(op)) {
    conv::ConvAttrKind kind = conv::ConvAttrKind::ints;
    conv::conv_attr_kind(name, &kind);
    const char* n = name.c_str();
    size_t size = 0;
    int64_t i = 0;
    float f = 0.f;
    if (kind == conv::ConvAttrKind::int_ && succeeded(a->KernelInfoGetAttribute_int64(info, n, &i))) {
      TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_int(op, name, i, attrs));
      continue;
    }
    if (kind == conv::ConvAttrKind::string && succeeded(a->KernelInfoGetAttribute_string(info, n, nullptr, &size))) {
      std::string buf(size, '\0');
      if (size > 0) {
        TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfoGetAttribute_string(info, n, buf.data(), &size),
                                                    "KernelInfoGetAttribute_string"));
      }
      TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_string(op, name, std::string(buf.c_str()), attrs));
      continue;
    }
    // ORT reads a string or int attribute as an empty int list: rule those out first.
    const bool other_kind = succeeded(a->KernelInfoGetAttribute_int64(info, n, &i)) ||
                            succeeded(a->KernelInfoGetAttribute_string(info, n, nullptr, &size)) ||
                            succeeded(a->KernelInfoGetAttribute_float(info, n, &f));
    if (kind == conv::ConvAttrKind::ints && !other_kind &&
        succeeded(a->KernelInfoGetAttributeArray_int64(info, n, nullptr, &size))) {
      std::vector<int64_t> v(size);
      if (size > 0) {
        TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfoGetAttributeArray_int64(info, n, v.data(), &size),
                                                    "KernelInfoGetAttributeArray_int64"));
      }
      TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_ints(op, name, v, attrs));
      continue;
    }
    // Not readable as its own kind: present as another kind, or absent (default).
    if (kind != conv::ConvAttrKind::int_ && succeeded(a->KernelInfoGetAttribute_int64(info, n, &i)))
      return conv::conv_attr_type_error(op, name, "an int");
    if (kind != conv::ConvAttrKind::ints && succeeded(a->KernelInfoGetAttributeArray_int64(info, n, nullptr, &size)))
      return conv::conv_attr_type_error(op, name, "a list of ints");
    if (kind != conv::ConvAttrKind::string && succeeded(a->KernelInfoGetAttribute_string(info, n, nullptr, &size)))
      return conv::conv_attr_type_error(op, name, "a string");
    if (succeeded(a->KernelInfoGetAttribute_float(info, n, &f))) return conv::conv_attr_type_error(op, name, "a float");
  }
  return conv::validate_conv_attrs(op, *attrs);
}

Status read_conv_attrs(const OrtShapeInferContext* ctx, ConvOp op, conv::ConvAttrs* attrs) {
  const OrtApi* a = api();
  *attrs = conv::ConvAttrs();
  for (const std::string& name : conv::conv_attr_names(op)) {
    const OrtOpAttr* attr = nullptr;
    if (!succeeded(a->ShapeInferContext_GetAttribute(ctx, name.c_str(), &attr)) || attr == nullptr) continue;
    conv::ConvAttrKind kind = conv::ConvAttrKind::ints;
    conv::conv_attr_kind(name, &kind);
    size_t bytes = 0;
    if (kind == conv::ConvAttrKind::ints) {
      // First call sizes the list (fails with the needed byte count unless it is empty).
      std::vector<int64_t> v;
      OrtStatus* st = a->ReadOpAttr(attr, ORT_OP_ATTR_INTS, nullptr, 0, &bytes);
      if (st != nullptr) {
        a->ReleaseStatus(st);
        if (bytes == 0 || bytes % sizeof(int64_t) != 0) return conv::conv_attr_type_error(op, name, "of another type");
        v.resize(bytes / sizeof(int64_t));
        TRT_FASTOPS_RETURN_IF_ERROR(
            from_ort_status(a->ReadOpAttr(attr, ORT_OP_ATTR_INTS, v.data(), bytes, &bytes), "ReadOpAttr"));
      }
      TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_ints(op, name, v, attrs));
    } else if (kind == conv::ConvAttrKind::int_) {
      int64_t i = 0;
      if (!succeeded(a->ReadOpAttr(attr, ORT_OP_ATTR_INT, &i, sizeof(i), &bytes)))
        return conv::conv_attr_type_error(op, name, "of another type");
      TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_int(op, name, i, attrs));
    } else {
      std::string buf;
      OrtStatus* st = a->ReadOpAttr(attr, ORT_OP_ATTR_STRING, nullptr, 0, &bytes);
      if (st != nullptr) {
        a->ReleaseStatus(st);
        if (bytes == 0) return conv::conv_attr_type_error(op, name, "of another type");
        buf.assign(bytes, '\0');
        TRT_FASTOPS_RETURN_IF_ERROR(
            from_ort_status(a->ReadOpAttr(attr, ORT_OP_ATTR_STRING, buf.data(), bytes, &bytes), "ReadOpAttr"));
        buf.resize(std::min(bytes, buf.size()));
      }
      TRT_FASTOPS_RETURN_IF_ERROR(conv::set_conv_attr_string(op, name, std::string(buf.c_str()), attrs));
    }
  }
  return conv::validate_conv_attrs(op, *attrs);
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

ONNXTensorElementDataType ORT_API_CALL output_type(const OrtCustomOp* op, size_t) { return self(op).x_type; }

OrtCustomOpInputOutputCharacteristic ORT_API_CALL input_characteristic(const OrtCustomOp* op, size_t i) {
  const ConvSignature& sig = sig_of(op);
  return i < size_t(sig.num_inputs) && sig.inputs[i].optional ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
}

OrtCustomOpInputOutputCharacteristic ORT_API_CALL output_characteristic(const OrtCustomOp*, size_t) {
  return INPUT_OUTPUT_REQUIRED;
}

OrtMemType ORT_API_CALL input_memory_type(const OrtCustomOp*, size_t) { return OrtMemTypeDefault; }
int ORT_API_CALL variadic_min_arity(const OrtCustomOp*) { return 1; }
int ORT_API_CALL variadic_homogeneity(const OrtCustomOp*) { return 1; }

// ---------------------------------------------------------------------------
// Kernel creation: validates the node against what the graph knows, so a bad
// model fails at session creation with our message.

Status create_kernel_impl(const ConvCustomOp& cop, const OrtKernelInfo* info, ConvKernel* k) {
  const ConvSignature& sig = conv::conv_signature(cop.op);
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

  TRT_FASTOPS_RETURN_IF_ERROR(read_conv_attrs(info, cop.op, &k->attrs));

  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfo_GetInputCount(info, &n_in), "KernelInfo_GetInputCount"));
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->KernelInfo_GetOutputCount(info, &n_out), "KernelInfo_GetOutputCount"));
  if (n_in > size_t(sig.num_inputs) || n_out != size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": node has ", n_in, " inputs and ", n_out, " outputs, expected 2 or 3 inputs (X, W, B?) "
                          "and 1 output (Y)");
  }
  std::vector<conv::TensorDesc> inputs(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    Status s = tensor_desc_from_kernel_info(info, i, &inputs[i]);
    if (!s.is_ok()) return Status::errorf(sig.name, ": ", s.message());
  }
  conv::ConvShapes shapes;
  return conv::infer_conv(cop.op, k->attrs, inputs, &shapes);
}

OrtStatusPtr ORT_API_CALL create_kernel(const OrtCustomOp* op, const OrtApi*, const OrtKernelInfo* info, void** kernel) {
  *kernel = nullptr;
  try {
    auto k = std::make_unique<ConvKernel>();
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

void ORT_API_CALL destroy_kernel(void* kernel) { delete static_cast<ConvKernel*>(kernel); }

// ---------------------------------------------------------------------------
// Compute

struct CpuPlanesJob {
  const ConvParams* params;
  int64_t planes_per_chunk;
  std::vector<Status>* results;
};

void run_cpu_chunk(void* data, size_t chunk) {
  auto* job = static_cast<CpuPlanesJob*>(data);
  const int64_t begin = int64_t(chunk) * job->planes_per_chunk;
  const int64_t end = std::min(conv::conv_cpu_planes(*job->params), begin + job->planes_per_chunk);
  (*job->results)[chunk] = conv::run_conv_cpu_planes(*job->params, begin, end);
}

// CPU reference, split over output planes through ORT's intra-op thread pool.
Status run_cpu(OrtKernelContext* ctx, const ConvParams& p) {
  constexpr int64_t MACS_PER_CHUNK = 1 << 18;  // keeps per-task overhead small
  TRT_FASTOPS_RETURN_IF_ERROR(conv::check_conv_cpu_params(p));
  const int64_t planes = conv::conv_cpu_planes(p);
  const int64_t cost = conv::conv_cpu_plane_cost(p);
  const int64_t planes_per_chunk = std::max<int64_t>(1, MACS_PER_CHUNK / cost);
  const int64_t chunks = (planes + planes_per_chunk - 1) / planes_per_chunk;
  if (chunks <= 1) return conv::run_conv_cpu(p);
  std::vector<Status> results(static_cast<size_t>(chunks));
  CpuPlanesJob job{&p, planes_per_chunk, &results};
  OrtStatus* st = api()->KernelContext_ParallelFor(ctx, run_cpu_chunk, size_t(chunks), 0, &job);
  if (st != nullptr) {  // no thread pool API in this build: run serially
    api()->ReleaseStatus(st);
    return conv::run_conv_cpu(p);
  }
  for (const Status& s : results) TRT_FASTOPS_RETURN_IF_ERROR(s);
  return Status::ok();
}

OrtStatus* compute_impl(const ConvKernel& k, OrtKernelContext* ctx) {
  const OrtApi* a = api();
  const ConvSignature& sig = conv::conv_signature(k.op);
  auto fail = [&](const Status& st) { return invalid(st, k.node_name); };
  auto ort_fail = [&](OrtStatus* st, const char* what) -> OrtStatus* {
    return st ? invalid(from_ort_status(st, what), k.node_name) : nullptr;
  };

  size_t n_in = 0;
  if (OrtStatus* st = ort_fail(a->KernelContext_GetInputCount(ctx, &n_in), "KernelContext_GetInputCount")) return st;
  n_in = std::min(n_in, size_t(sig.num_inputs));
  std::vector<conv::TensorDesc> inputs(n_in);
  conv::ConvBuffers buffers;
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

  conv::ConvShapes shapes;
  Status s = conv::infer_conv(k.op, k.attrs, inputs, &shapes);
  if (!s.is_ok()) return fail(s);

  OrtValue* y = nullptr;
  if (OrtStatus* st = ort_fail(a->KernelContext_GetOutput(ctx, size_t(sig.y), shapes.y_dims.data(),
                                                          shapes.y_dims.size(), &y),
                               "KernelContext_GetOutput"))
    return st;
  if (y != nullptr) {
    void* data = nullptr;
    if (OrtStatus* st = ort_fail(a->GetTensorMutableData(y, &data), "GetTensorMutableData")) return st;
    buffers.outputs[sig.y] = data;
  }

  ConvParams p;
  s = conv::make_conv_params(k.op, k.attrs, shapes, buffers, &p);
  if (!s.is_ok()) return fail(s);

  if (k.cuda) return conv_compute_cuda(ctx, p, sig.name, k.node_name);
  s = run_cpu(ctx, p);
  return s.is_ok() ? nullptr : fail(s);
}

OrtStatusPtr ORT_API_CALL compute(void* kernel, OrtKernelContext* ctx) {
  const auto* k = static_cast<const ConvKernel*>(kernel);
  try {
    return compute_impl(*k, ctx);
  } catch (const std::exception& e) {
    return internal_error(conv::conv_op_name(k->op), e.what());
  } catch (...) {
    return internal_error(conv::conv_op_name(k->op), "unknown exception in compute");
  }
}

// ---------------------------------------------------------------------------
// Shape inference. ORT 1.31 ignores the status this returns, so validation
// that must stop a session lives in create_kernel; here Y gets its type and
// whatever of its shape is known: N keeps X's symbolic name, other unknown
// dims get fresh symbols.

Status infer_shapes_impl(const ConvCustomOp& cop, OrtShapeInferContext* ctx) {
  const OrtApi* a = api();
  const ConvSignature& sig = conv::conv_signature(cop.op);
  size_t n_in = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(
      from_ort_status(a->ShapeInferContext_GetInputCount(ctx, &n_in), "ShapeInferContext_GetInputCount"));
  n_in = std::min(n_in, size_t(sig.num_inputs));
  std::vector<conv::TensorDesc> inputs(n_in);
  std::string n_symbol;
  for (size_t i = 0; i < n_in; ++i) {
    OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by ctx
    TRT_FASTOPS_RETURN_IF_ERROR(
        from_ort_status(a->ShapeInferContext_GetInputTypeShape(ctx, i, &info), "ShapeInferContext_GetInputTypeShape"));
    ONNXTensorElementDataType t = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetTensorElementType(info, &t), "GetTensorElementType"));
    if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) continue;  // omitted optional input
    conv::TensorDesc& d = inputs[i];
    d.present = true;
    set_desc_dtype(t, &d);
    size_t rank = 0;
    TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetDimensionsCount(info, &rank), "GetDimensionsCount"));
    d.dims.assign(rank, 0);
    if (rank > 0)
      TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->GetDimensions(info, d.dims.data(), rank), "GetDimensions"));
    for (auto& v : d.dims)
      if (v < 0) v = -1;
    d.rank_known = rank > 0;  // a missing shape reads as rank 0
    if (int(i) == sig.x && rank > 0) {
      std::vector<const char*> syms(rank, nullptr);
      TRT_FASTOPS_RETURN_IF_ERROR(
          from_ort_status(a->GetSymbolicDimensions(info, syms.data(), rank), "GetSymbolicDimensions"));
      if (syms[0]) n_symbol = syms[0];
    }
  }
  conv::ConvAttrs attrs;
  TRT_FASTOPS_RETURN_IF_ERROR(read_conv_attrs(ctx, cop.op, &attrs));
  conv::ConvShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::infer_conv(cop.op, attrs, inputs, &shapes));
  if (shapes.y_dims.empty()) return Status::ok();  // rank unknown: nothing to say

  // An unknown dim needs a symbol: with an empty one ORT would record the value -1.
  // Fresh names ("trt_fastops_unk_17") say "unknown, unrelated to any other dim".
  static std::atomic<uint64_t> next_symbol{0};
  std::vector<std::string> fresh(shapes.y_dims.size());
  std::vector<const char*> names(shapes.y_dims.size(), "");
  for (size_t i = 0; i < shapes.y_dims.size(); ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (i == 0 && !n_symbol.empty()) {
      names[i] = n_symbol.c_str();
      continue;
    }
    fresh[i] = "trt_fastops_unk_" + std::to_string(next_symbol.fetch_add(1, std::memory_order_relaxed));
    names[i] = fresh[i].c_str();
  }
  OrtTensorTypeAndShapeInfo* y = nullptr;
  TRT_FASTOPS_RETURN_IF_ERROR(from_ort_status(a->CreateTensorTypeAndShapeInfo(&y), "CreateTensorTypeAndShapeInfo"));
  Status st = from_ort_status(a->SetTensorElementType(y, element_type_of(shapes.dtype)), "SetTensorElementType");
  if (st.is_ok()) st = from_ort_status(a->SetDimensions(y, shapes.y_dims.data(), shapes.y_dims.size()), "SetDimensions");
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

void init_conv_custom_op(ConvCustomOp* c, ConvOp op, bool cuda, ONNXTensorElementDataType x_type) {
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
  c->op = op;
  c->cuda = cuda;
  c->x_type = x_type;
}

}  // namespace trt_fastops::ort
