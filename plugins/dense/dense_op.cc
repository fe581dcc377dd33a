#include "plugins/dense/dense_op.h"

namespace trt_fastops::dense {
namespace {

const DenseSignature SIGNATURES[1] = {
    {DenseOp::dense, "Dense", 3, 1, {{"X", false}, {"W", false}, {"bias", true}}, {{"Y", false}}, DENSE_X, DENSE_Y},
};

const char* const OP = "Dense";

const char* const ATTR_ACTIVATION = "activation";

Status unknown_attr(const std::string& name) {
  return Status::errorf(OP, ": unknown attribute '", name, "'; Dense takes only '", ATTR_ACTIVATION, "'");
}

}  // namespace

const DenseSignature& dense_signature(DenseOp op) { return signature_at(SIGNATURES, op); }

bool dense_op_from_name(const std::string& name, DenseOp* op) { return op_from_name(SIGNATURES, name, op); }

std::vector<std::string> dense_attr_names() { return {ATTR_ACTIVATION}; }

Status set_dense_attr_string(const std::string& name, const std::string& value, DenseAttrs* attrs) {
  if (name != ATTR_ACTIVATION) return unknown_attr(name);
  for (DenseActivation a : {DenseActivation::none, DenseActivation::gelu}) {
    if (value == dense_activation_name(a)) {
      attrs->activation = a;
      return Status::ok();
    }
  }
  return Status::errorf(OP, ": attribute '", ATTR_ACTIVATION, "' is '", value, "'; expected 'none' or 'gelu'");
}

Status dense_attr_type_error(const std::string& name, const char* found_kind) {
  if (name != ATTR_ACTIVATION) return unknown_attr(name);
  return Status::errorf(OP, ": attribute '", ATTR_ACTIVATION, "' is ", found_kind,
                        ", expected a string ('none' or 'gelu')");
}

Status set_dense_attr_int(const std::string& name, int64_t, DenseAttrs*) {
  return dense_attr_type_error(name, "an int");
}

Status set_dense_attr_float(const std::string& name, double, DenseAttrs*) {
  return dense_attr_type_error(name, "a float");
}

Status infer_dense(const std::vector<TensorDesc>& inputs, DenseShapes* out) {
  const DenseSignature& sig = dense_signature();
  *out = DenseShapes();
  if (inputs.size() > size_t(sig.num_inputs)) {
    return Status::errorf(OP, ": got ", inputs.size(), " inputs, expected at most ", sig.num_inputs,
                          " (X, W, bias?)");
  }
  TRT_FASTOPS_RETURN_IF_ERROR(check_required_inputs(OP, sig.inputs, sig.num_inputs, inputs));
  TRT_FASTOPS_RETURN_IF_ERROR(check_input_dtypes(OP, sig.inputs, sig.num_inputs, sig.x, inputs));
  const TensorDesc& x = desc_at(inputs, DENSE_X);
  const TensorDesc& w = desc_at(inputs, DENSE_W);
  const TensorDesc& bias = desc_at(inputs, DENSE_BIAS);
  out->dtype = x.dtype;
  out->has_bias = bias.present;

  // W: [K, N].
  int64_t w_k = -1;
  if (w.rank_known) {
    if (w.dims.size() != 2) {
      return Status::errorf(OP, ": ", input_ref(sig, DENSE_W), " must be 2-D [K, N], got ", format_dims(w.dims));
    }
    w_k = w.dims[0];
    out->n = w.dims[1];
  }
  // bias: [N].
  if (out->has_bias && bias.rank_known) {
    if (bias.dims.size() != 1) {
      return Status::errorf(OP, ": ", input_ref(sig, DENSE_BIAS), " must be 1-D [N], got ", format_dims(bias.dims));
    }
    if (out->n < 0) {
      out->n = bias.dims[0];  // W's N unknown: bias tells it
    } else if (bias.dims[0] >= 0 && bias.dims[0] != out->n) {
      return Status::errorf(OP, ": ", input_ref(sig, DENSE_BIAS), " has shape ", format_dims(bias.dims),
                            ", expected [", out->n, "] (N, W's last dim; W has shape ", format_dims(w.dims), ")");
    }
  }
  // X: [..., K].
  if (!x.rank_known) {
    out->k = w_k;
    return Status::ok();  // graph time: nothing more to check yet
  }
  if (x.dims.size() < 2) {
    return Status::errorf(OP, ": ", input_ref(sig, DENSE_X), " must have rank >= 2 ([..., K]), got ",
                          format_dims(x.dims));
  }
  const size_t rank = x.dims.size();
  const int64_t x_k = x.dims[rank - 1];
  if (x_k >= 0 && w_k >= 0 && x_k != w_k) {
    return Status::errorf(OP, ": X's last dim (", x_k, ") must equal W's first dim (", w_k, "): ",
                          input_ref(sig, DENSE_X), " has shape ", format_dims(x.dims), ", ", input_ref(sig, DENSE_W),
                          " ", format_dims(w.dims));
  }
  out->k = x_k >= 0 ? x_k : w_k;
  bool overflow = false;
  out->m = dims_product(x.dims, 0, rank - 1, &overflow);
  dims_product(x.dims, 0, rank, &overflow);
  if (overflow) {
    return Status::errorf(OP, ": ", input_ref(sig, DENSE_X), " has shape ", format_dims(x.dims),
                          ", more elements than fit in int64");
  }
  int64_t y_elems = 0;
  if (out->m > 0 && out->n > 0 && __builtin_mul_overflow(out->m, out->n, &y_elems)) {
    return Status::errorf(OP, ": output 'Y' would have ", out->m, " x ", out->n,
                          " elements, more than fit in int64");
  }
  out->rank = int64_t(rank);
  out->y_dims.assign(x.dims.begin(), x.dims.end() - 1);
  out->y_dims.push_back(out->n);
  return Status::ok();
}

Status make_dense_params(const DenseShapes& shapes, const DenseAttrs& attrs, const DenseBuffers& buffers,
                         DenseParams* out) {
  const DenseSignature& sig = dense_signature();
  if (!shapes.fully_known()) {
    return Status::errorf(OP, ": internal error: make_dense_params needs fully known shapes (rank ", shapes.rank,
                          ", m ", shapes.m, ", n ", shapes.n, ", k ", shapes.k, ")");
  }
  DenseParams p;
  p.dtype = shapes.dtype;
  p.m = shapes.m;
  p.n = shapes.n;
  p.k = shapes.k;
  p.activation = attrs.activation;
  p.x = buffers.inputs[DENSE_X];
  p.w = buffers.inputs[DENSE_W];
  p.bias = shapes.has_bias ? buffers.inputs[DENSE_BIAS] : nullptr;
  p.y = buffers.outputs[DENSE_Y];
  if (p.m > 0 && p.n > 0) {  // Y holds data (messages built only on failure: hot path)
    auto missing_input = [&](int idx) {
      return Status::errorf(OP, ": ", input_ref(sig, idx), " has no data (null pointer)");
    };
    if (p.k > 0 && p.x == nullptr) return missing_input(DENSE_X);
    if (p.k > 0 && p.w == nullptr) return missing_input(DENSE_W);
    if (shapes.has_bias && p.bias == nullptr) return missing_input(DENSE_BIAS);
    if (p.y == nullptr) return Status::errorf(OP, ": ", output_ref(sig, DENSE_Y), " has no data (null pointer)");
  }
  *out = p;
  return Status::ok();
}

}  // namespace trt_fastops::dense
