// pybind11 bindings for the norm launcher: raw device pointers in, no
// framework types. trt_fastops/ops.py wraps these for torch tensors.
//
//   _C.norm_forward("layer", "float16", x_ptr, gamma_ptr, y_ptr, rows, cols,
//                   skip=..., beta=..., mean_out=..., epsilon=1e-5, stream=s)
//   _C.norm_kernel_name(<same arguments>)  -> "norm_block<float16,vec8,items4,block256>"
//   _C.norm_set_path("row")                 -> "auto" (the previous setting)
//   _C.embed_norm_forward("float16", ids_ptr, word_ptr, position_ptr, gamma_ptr, y_ptr, batch, seq,
//                         hidden, word_rows, position_rows, segment_ids=..., stream=s)
#include <cstdint>
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

#include "plugins/common/cuda_status.h"
#include "plugins/norm/embed.h"
#include "plugins/norm/norm.h"

namespace py = pybind11;

namespace trt_fastops::python {
namespace {

using norm::NormKind;
using norm::NormParams;

NormKind parse_kind(const std::string& kind) {
  if (kind == "layer") return NormKind::layer;
  if (kind == "rms") return NormKind::rms;
  throw py::value_error("norm_forward: kind must be 'layer' or 'rms', got '" + kind + "'");
}

DType parse_dtype(const std::string& dtype) {
  if (dtype == "float32") return DType::f32;
  if (dtype == "float16") return DType::f16;
  if (dtype == "bfloat16") return DType::bf16;
  throw py::value_error("norm_forward: dtype must be 'float32', 'float16' or 'bfloat16', got '" +
                        dtype + "'");
}

template <typename P>
P* as_ptr(uintptr_t address) {
  return reinterpret_cast<P*>(address);
}

NormParams make_params(const std::string& kind, const std::string& dtype, uintptr_t x,
                       uintptr_t gamma, uintptr_t y, int64_t rows, int64_t cols, uintptr_t skip,
                       int64_t skip_rows, uintptr_t bias, uintptr_t beta, bool gamma_scalar,
                       bool beta_scalar, uintptr_t sum_out, uintptr_t mean_out,
                       uintptr_t rstd_out, double epsilon) {
  NormParams p;
  p.kind = parse_kind(kind);
  p.dtype = parse_dtype(dtype);
  p.x = as_ptr<const void>(x);
  p.gamma = as_ptr<const void>(gamma);
  p.y = as_ptr<void>(y);
  p.rows = rows;
  p.cols = cols;
  p.skip = as_ptr<const void>(skip);
  p.skip_rows = skip_rows;
  p.bias = as_ptr<const void>(bias);
  p.beta = as_ptr<const void>(beta);
  p.gamma_scalar = gamma_scalar;
  p.beta_scalar = beta_scalar;
  p.sum_out = as_ptr<void>(sum_out);
  p.mean_out = as_ptr<float>(mean_out);
  p.rstd_out = as_ptr<float>(rstd_out);
  p.epsilon = static_cast<float>(epsilon);
  return p;
}

void norm_forward(const std::string& kind, const std::string& dtype, uintptr_t x, uintptr_t gamma,
                  uintptr_t y, int64_t rows, int64_t cols, uintptr_t skip, int64_t skip_rows,
                  uintptr_t bias, uintptr_t beta, bool gamma_scalar, bool beta_scalar,
                  uintptr_t sum_out, uintptr_t mean_out, uintptr_t rstd_out, double epsilon,
                  uintptr_t stream) {
  const NormParams p = make_params(kind, dtype, x, gamma, y, rows, cols, skip, skip_rows, bias, beta,
                                   gamma_scalar, beta_scalar, sum_out, mean_out, rstd_out, epsilon);
  cudaError_t err;
  {
    py::gil_scoped_release release;
    err = norm::launch_norm(p, reinterpret_cast<cudaStream_t>(stream));
  }
  if (err == cudaSuccess) return;
  // "launch_norm(norm_block<float16,...>, kind=layer, ...) failed: cudaErrorInvalidValue (...)"
  const std::string what = std::string("launch_norm(") + norm::norm_kernel_name(p) + ", kind=" + kind +
                           ", dtype=" + dtype + ", rows=" + std::to_string(rows) +
                           ", cols=" + std::to_string(cols) + ")";
  throw std::runtime_error(cuda_status(err, what.c_str()).message());
}

std::string norm_kernel_name(const std::string& kind, const std::string& dtype, uintptr_t x,
                             uintptr_t gamma, uintptr_t y, int64_t rows, int64_t cols,
                             uintptr_t skip, int64_t skip_rows, uintptr_t bias, uintptr_t beta,
                             bool gamma_scalar, bool beta_scalar, uintptr_t sum_out,
                             uintptr_t mean_out, uintptr_t rstd_out, double epsilon,
                             uintptr_t stream) {
  return norm::norm_kernel_name(make_params(kind, dtype, x, gamma, y, rows, cols, skip, skip_rows,
                                            bias, beta, gamma_scalar, beta_scalar, sum_out,
                                            mean_out, rstd_out, epsilon));
}

// norm_set_path's names, indexed by norm::NormPath.
constexpr const char* kPathNames[] = {"auto", "warp", "warp_fit", "row", "block", "generic"};

std::string norm_set_path(const std::string& path) {
  constexpr int count = int(sizeof(kPathNames) / sizeof(kPathNames[0]));
  for (int i = 0; i < count; ++i) {
    if (path == kPathNames[i]) return kPathNames[int(norm::norm_set_path(norm::NormPath(i)))];
  }
  throw py::value_error("norm_set_path: path must be 'auto', 'warp', 'warp_fit', 'row', 'block' or 'generic', got '" +
                        path + "'");
}

norm::IndexType parse_index(const std::string& type, const char* what) {
  if (type == "int64") return norm::IndexType::i64;
  if (type == "int32") return norm::IndexType::i32;
  throw py::value_error(std::string("embed_norm_forward: ") + what + " must be 'int32' or 'int64', got '" + type + "'");
}

void embed_norm_forward(const std::string& dtype, uintptr_t ids, uintptr_t word, uintptr_t position,
                        uintptr_t gamma, uintptr_t y, int64_t batch, int64_t seq, int64_t hidden, int64_t word_rows,
                        int64_t position_rows, const std::string& ids_type, uintptr_t segment_ids,
                        uintptr_t segment, int64_t segment_rows, const std::string& segment_type,
                        uintptr_t position_ids, int64_t position_id_rows, const std::string& position_type,
                        uintptr_t beta, double epsilon, uintptr_t stream) {
  norm::EmbedParams p;
  p.dtype = parse_dtype(dtype);
  p.ids = as_ptr<const void>(ids);
  p.ids_type = parse_index(ids_type, "ids_type");
  p.segment_ids = as_ptr<const void>(segment_ids);
  p.segment_type = parse_index(segment_type, "segment_type");
  p.position_ids = as_ptr<const void>(position_ids);
  p.position_type = parse_index(position_type, "position_type");
  p.word = as_ptr<const void>(word);
  p.position = as_ptr<const void>(position);
  p.segment = as_ptr<const void>(segment);
  p.gamma = as_ptr<const void>(gamma);
  p.beta = as_ptr<const void>(beta);
  p.y = as_ptr<void>(y);
  p.batch = batch;
  p.seq = seq;
  p.hidden = hidden;
  p.word_rows = word_rows;
  p.position_rows = position_rows;
  p.segment_rows = segment_rows;
  p.position_id_rows = position_id_rows;
  p.epsilon = static_cast<float>(epsilon);
  cudaError_t err;
  {
    py::gil_scoped_release release;
    err = norm::launch_embed_norm(p, reinterpret_cast<cudaStream_t>(stream));
  }
  if (err == cudaSuccess) return;
  const std::string what = "launch_embed_norm(dtype=" + dtype + ", batch=" + std::to_string(batch) +
                           ", seq=" + std::to_string(seq) + ", hidden=" + std::to_string(hidden) + ")";
  throw std::runtime_error(cuda_status(err, what.c_str()).message());
}

}  // namespace

void register_norm_bindings(py::module_& m) {
  const char* forward_doc =
      "Enqueue LayerNorm / RMSNorm (optionally with skip, bias, beta, sum/mean/rstd outputs) on\n"
      "`stream` for raw device pointers (ints; 0 = absent). Raises RuntimeError naming the kernel\n"
      "and the CUDA error (cudaErrorInvalidValue for inconsistent arguments), ValueError for an\n"
      "unknown kind or dtype. Never synchronises.";
  m.def("norm_forward", &norm_forward, forward_doc, py::arg("kind"), py::arg("dtype"), py::arg("x"),
        py::arg("gamma"), py::arg("y"), py::arg("rows"), py::arg("cols"), py::kw_only(),
        py::arg("skip") = 0, py::arg("skip_rows") = 0, py::arg("bias") = 0, py::arg("beta") = 0,
        py::arg("gamma_scalar") = false, py::arg("beta_scalar") = false, py::arg("sum_out") = 0,
        py::arg("mean_out") = 0, py::arg("rstd_out") = 0, py::arg("epsilon") = 1e-5,
        py::arg("stream") = 0);
  m.def("norm_kernel_name", &norm_kernel_name,
        "Name of the kernel variant norm_forward would launch for these arguments ('none' when\n"
        "rows == 0, 'invalid' for inconsistent arguments). Launches nothing.",
        py::arg("kind"), py::arg("dtype"), py::arg("x"), py::arg("gamma"), py::arg("y"),
        py::arg("rows"), py::arg("cols"), py::kw_only(), py::arg("skip") = 0,
        py::arg("skip_rows") = 0, py::arg("bias") = 0, py::arg("beta") = 0,
        py::arg("gamma_scalar") = false, py::arg("beta_scalar") = false, py::arg("sum_out") = 0,
        py::arg("mean_out") = 0, py::arg("rstd_out") = 0, py::arg("epsilon") = 1e-5,
        py::arg("stream") = 0);
  m.def("embed_norm_forward", &embed_norm_forward,
        "Enqueue EmbedLayerNorm (plugins/norm/embed.h: Y = LayerNorm(word[ids] + position[pos] + segment[seg])\n"
        "* gamma + beta) on `stream` for raw device pointers (ints; 0 = absent). A token with an index out of\n"
        "range gets a row of NaN. Raises RuntimeError with the CUDA error (cudaErrorInvalidValue for\n"
        "inconsistent arguments), ValueError for an unknown dtype or index type. Never synchronises.",
        py::arg("dtype"), py::arg("ids"), py::arg("word"), py::arg("position"), py::arg("gamma"), py::arg("y"),
        py::arg("batch"), py::arg("seq"), py::arg("hidden"), py::arg("word_rows"), py::arg("position_rows"),
        py::kw_only(), py::arg("ids_type") = "int64", py::arg("segment_ids") = 0, py::arg("segment") = 0,
        py::arg("segment_rows") = 0, py::arg("segment_type") = "int64", py::arg("position_ids") = 0,
        py::arg("position_id_rows") = 1, py::arg("position_type") = "int64", py::arg("beta") = 0,
        py::arg("epsilon") = 1e-5, py::arg("stream") = 0);
  m.def("norm_set_path", &norm_set_path,
        "Benchmark / test hook, process-wide from now on (every caller of the norm launcher: ops,\n"
        "ORT op, TensorRT plugin): which kernel path norm_forward and norm_kernel_name take.\n"
        "'auto' (the launcher's rule), 'warp' (a warp per row, 1/2/4 vectors per lane), 'warp_fit'\n"
        "(the same with exactly the vectors a row needs, e.g. 3 at 768 halves), 'row' (a CTA per row,\n"
        "one vector per thread), 'block' (a CTA per row, 4 vectors per thread) or 'generic' (scalar\n"
        "loads). A forced path that cannot run the arguments (alignment, cols) falls back to 'auto'.\n"
        "Returns the previous setting.",
        py::arg("path"));
}

}  // namespace trt_fastops::python
