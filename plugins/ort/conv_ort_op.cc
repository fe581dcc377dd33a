#include "plugins/ort/conv_ort_op.h"

#include <algorithm>
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
  return node_error(ORT_NOT_IMPLEMENTED, str_cat(op_name, ": the CUDA implementation is not built into this library"),
                    node_name);
}

namespace {

using conv::ConvOp;
using conv::ConvParams;
using conv::ConvSignature;

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

// CPU reference, split over output planes through ORT's intra-op thread pool.
Status run_cpu(OrtKernelContext* ctx, const ConvParams& p) {
  constexpr int64_t MACS_PER_CHUNK = 1 << 18;  // keeps per-task overhead small
  TRT_FASTOPS_RETURN_IF_ERROR(conv::check_conv_cpu_params(p));
  const int64_t planes = conv::conv_cpu_planes(p);
  const int64_t cost = conv::conv_cpu_plane_cost(p);
  const int64_t planes_per_chunk = std::max<int64_t>(1, MACS_PER_CHUNK / cost);
  return run_chunked(
      ctx, planes, planes_per_chunk,
      [&p](int64_t begin, int64_t end) { return conv::run_conv_cpu_planes(p, begin, end); },
      [&p] { return conv::run_conv_cpu(p); });
}

}  // namespace

Status ConvFamily::create_kernel(const OrtKernelInfo* info, Kernel* k) {
  const ConvSignature& sig = conv::conv_signature(k->op);
  TRT_FASTOPS_RETURN_IF_ERROR(read_conv_attrs(info, k->op, &k->attrs));

  size_t n_in = 0, n_out = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_counts(info, &n_in, &n_out));
  if (n_in > size_t(sig.num_inputs) || n_out != size_t(sig.num_outputs)) {
    return Status::errorf(sig.name, ": node has ", n_in, " inputs and ", n_out, " outputs, expected 2 or 3 inputs (X, W, B?) "
                          "and 1 output (Y)");
  }
  // 'inputs' / 'outputs' as every op reads them. With X, W, B? and Y alone a
  // valid mask always equals the positions; reading it refuses a mask that
  // contradicts the node (the TensorRT conv plugins take no such fields).
  int64_t out_mask = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(read_slot_masks(info, slot_layout(sig), n_in, &k->input_slots, &out_mask));
  std::vector<TensorDesc> inputs;
  TRT_FASTOPS_RETURN_IF_ERROR(kernel_info_inputs(info, n_in, sig.name, &inputs));
  inputs_to_slots(k->input_slots, sig.num_inputs, &inputs, nullptr);
  conv::ConvShapes shapes;
  return conv::infer_conv(k->op, k->attrs, inputs, &shapes);
}

OrtStatus* ConvFamily::compute(const Kernel& k, OrtKernelContext* ctx) {
  const ConvSignature& sig = conv::conv_signature(k.op);
  auto fail = [&](const Status& st) { return invalid_argument(st, k.node_name); };

  std::vector<TensorDesc> inputs;
  conv::ConvBuffers buffers;
  Status s = context_inputs(ctx, size_t(sig.num_inputs), &inputs, buffers.inputs);
  if (!s.is_ok()) return fail(s);
  inputs_to_slots(k.input_slots, sig.num_inputs, &inputs, buffers.inputs);

  conv::ConvShapes shapes;
  s = conv::infer_conv(k.op, k.attrs, inputs, &shapes);
  if (!s.is_ok()) return fail(s);

  s = context_output(ctx, size_t(sig.y), shapes.y_dims, &buffers.outputs[sig.y]);
  if (!s.is_ok()) return fail(s);

  ConvParams p;
  s = conv::make_conv_params(k.op, k.attrs, shapes, buffers, &p);
  if (!s.is_ok()) return fail(s);

  if (k.cuda) return conv_compute_cuda(ctx, p, sig.name, k.node_name);
  s = run_cpu(ctx, p);
  return s.is_ok() ? nullptr : fail(s);
}

// Shape inference: Y gets its type and whatever of its shape is known: N
// keeps X's symbolic name, other unknown dims get fresh symbols.
Status ConvFamily::infer_shapes(Op op, OrtShapeInferContext* ctx) {
  const ConvSignature& sig = conv::conv_signature(op);
  std::vector<TensorDesc> inputs;
  std::vector<std::string> x_symbols;
  TRT_FASTOPS_RETURN_IF_ERROR(shape_infer_inputs(ctx, size_t(sig.num_inputs), sig.x, &inputs, &x_symbols));
  // X stays slot 0; an unusable mask: kernel creation words the refusal.
  if (!shape_infer_inputs_to_slots(ctx, slot_layout(sig), &inputs)) return Status::ok();
  const std::string n_symbol = x_symbols.empty() ? std::string() : x_symbols[0];
  conv::ConvAttrs attrs;
  TRT_FASTOPS_RETURN_IF_ERROR(read_conv_attrs(ctx, op, &attrs));
  conv::ConvShapes shapes;
  TRT_FASTOPS_RETURN_IF_ERROR(conv::infer_conv(op, attrs, inputs, &shapes));
  if (shapes.y_dims.empty()) return Status::ok();  // rank unknown: nothing to say

  // An unknown dim needs a symbol: with an empty one ORT would record the value -1.
  // Fresh names ("trt_fastops_unk_17") say "unknown, unrelated to any other dim".
  std::vector<std::string> fresh(shapes.y_dims.size());
  std::vector<const char*> names(shapes.y_dims.size(), "");
  for (size_t i = 0; i < shapes.y_dims.size(); ++i) {
    if (shapes.y_dims[i] >= 0) continue;
    if (i == 0 && !n_symbol.empty()) {
      names[i] = n_symbol.c_str();
      continue;
    }
    fresh[i] = fresh_dim_symbol();
    names[i] = fresh[i].c_str();
  }
  return set_shape_infer_output(ctx, size_t(sig.y), shapes.dtype, shapes.y_dims, names);
}

}  // namespace trt_fastops::ort
