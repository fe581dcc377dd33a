// pybind11 bindings for the norm launcher: raw device pointers in, no
// framework types. trt_fastops/ops.py wraps these for torch tensors.
//
//   _C.norm_forward("layer", "float16", x_ptr, gamma_ptr, y_ptr, rows, cols,
//                   skip=..., beta=..., mean_out=..., epsilon=1e-5, stream=s)
//   _C.norm_kernel_name(<same arguments>)  -> "norm_block<float16,vec8,items4,block256>"
//   _C.norm_set_path("row")                 -> "auto" (the previous setting)
#include <cstdint>
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>

#include "plugins/common/cuda_status.h"
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
