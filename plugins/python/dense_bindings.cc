// pybind11 bindings for the Dense launcher (cuBLASLt + BIAS epilogue; with
// activation "gelu" the sm_90a CUTLASS GEMM or cuBLASLt + a GELU pass): raw
// device pointers in, no framework types; and the plan cache's counters, which
// the ORT op shares in-process (one libtrt_fastops_kernels.so).
//
//   _C.dense_forward("float16", x_ptr, w_ptr, y_ptr, m, n, k, bias=..., activation="gelu",
//                    workspace=..., workspace_bytes=..., stream=s)
//   _C.dense_kernel_name(<dense_forward's arguments>)  -> "cutlass_sm90_gelu<float16,coop_128x256>"
//   _C.dense_set_gelu_path("fallback")                 -> "auto" (the previous setting)
//   _C.dense_workspace_bytes()  -> 33554432
//   _C.dense_library_status()   -> {"available": True, "version": 130000, "reason": ""}
//   _C.dense_plan_cache_stats() / dense_plan_cache_clear() / dense_plan_cache_reset_stats()
//   _C.dense_plan_cache_set_capacity(n)
#include <cstdint>
#include <stdexcept>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "plugins/dense/dense.h"

namespace py = pybind11;

namespace trt_fastops::python {
namespace {

using dense::DenseParams;

DType parse_dtype(const std::string& dtype) {
  if (dtype == "float32") return DType::f32;
  if (dtype == "float16") return DType::f16;
  if (dtype == "bfloat16") return DType::bf16;
  throw py::value_error("dense_forward: dtype must be 'float32', 'float16' or 'bfloat16', got '" + dtype + "'");
}

dense::DenseActivation parse_activation(const std::string& activation) {
  for (dense::DenseActivation a : {dense::DenseActivation::none, dense::DenseActivation::gelu}) {
    if (activation == dense::dense_activation_name(a)) return a;
  }
  throw py::value_error("dense_forward: activation must be 'none' or 'gelu', got '" + activation + "'");
}

DenseParams make_params(const std::string& dtype, uintptr_t x, uintptr_t w, uintptr_t y, int64_t m, int64_t n,
                        int64_t k, uintptr_t bias, const std::string& activation, uintptr_t workspace,
                        size_t workspace_bytes) {
  DenseParams p;
  p.dtype = parse_dtype(dtype);
  p.activation = parse_activation(activation);
  p.x = reinterpret_cast<const void*>(x);
  p.w = reinterpret_cast<const void*>(w);
  p.bias = reinterpret_cast<const void*>(bias);
  p.y = reinterpret_cast<void*>(y);
  p.m = m;
  p.n = n;
  p.k = k;
  p.workspace = reinterpret_cast<void*>(workspace);
  p.workspace_bytes = workspace_bytes;
  return p;
}

void dense_forward(const std::string& dtype, uintptr_t x, uintptr_t w, uintptr_t y, int64_t m, int64_t n, int64_t k,
                   uintptr_t bias, const std::string& activation, uintptr_t workspace, size_t workspace_bytes,
                   uintptr_t stream) {
  const DenseParams p = make_params(dtype, x, w, y, m, n, k, bias, activation, workspace, workspace_bytes);
  Status st;
  {
    py::gil_scoped_release release;
    st = dense::launch_dense(p, reinterpret_cast<cudaStream_t>(stream));
  }
  if (!st.is_ok()) throw std::runtime_error(st.message());
}

// Same arguments as dense_forward (workspace and stream ignored): what it would run.
std::string dense_kernel_name(const std::string& dtype, uintptr_t x, uintptr_t w, uintptr_t y, int64_t m, int64_t n,
                              int64_t k, uintptr_t bias, const std::string& activation, uintptr_t workspace,
                              size_t workspace_bytes, uintptr_t stream) {
  return dense::dense_kernel_name(make_params(dtype, x, w, y, m, n, k, bias, activation, workspace, workspace_bytes));
}

py::dict dense_library_status() {
  size_t version = 0;
  const Status st = dense::dense_library_status(&version);
  py::dict d;
  d["available"] = st.is_ok();
  d["version"] = version;
  d["reason"] = st.message();
  return d;
}

py::dict dense_plan_cache_stats() {
  const LruCacheStats s = dense::dense_plan_cache_stats();
  py::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["insertions"] = s.insertions;
  d["replacements"] = s.replacements;
  d["evictions"] = s.evictions;
  d["size"] = s.size;
  d["capacity"] = s.capacity;
  return d;
}

}  // namespace

void register_dense_bindings(py::module_& m) {
  m.def("dense_forward", &dense_forward,
        "Enqueue Y[m, n] = act(X[m, k] @ W[k, n] (+ bias[n])) on `stream` for raw, row-major device\n"
        "pointers (ints; bias 0 = none); activation 'none' or 'gelu' (exact erf GELU). workspace /\n"
        "workspace_bytes: device scratch for the GEMM (dense_workspace_bytes() is what the ORT op passes).\n"
        "Raises RuntimeError with the launcher's message. Never synchronises.",
        py::arg("dtype"), py::arg("x"), py::arg("w"), py::arg("y"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::kw_only(), py::arg("bias") = 0, py::arg("activation") = "none", py::arg("workspace") = 0,
        py::arg("workspace_bytes") = 0, py::arg("stream") = 0);
  m.def("dense_kernel_name", &dense_kernel_name,
        "Which implementation dense_forward would run for these arguments on the current device\n"
        "(the pointers' alignment included; only their values are read):\n"
        "'cutlass_sm90_gelu<float16,coop_128x256>', 'cublaslt_bias+gelu', 'cublaslt', 'fill_k0', 'none',\n"
        "'invalid', ...",
        py::arg("dtype"), py::arg("x"), py::arg("w"), py::arg("y"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::kw_only(), py::arg("bias") = 0, py::arg("activation") = "none", py::arg("workspace") = 0,
        py::arg("workspace_bytes") = 0, py::arg("stream") = 0);
  m.def(
      "dense_set_gelu_path",
      [](const std::string& path) {
        std::string previous;
        const Status s = dense::dense_set_gelu_path(path, &previous);
        if (!s.is_ok()) throw py::value_error(s.message());
        return previous;
      },
      "Benchmark / test hook, process-wide from now on: how activation 'gelu' runs where the sm_90a\n"
      "CUTLASS GEMM applies: 'auto' (its tile by M and grid), 'fallback' (cuBLASLt + the GELU kernel)\n"
      "or a tile from dense_sm90_tiles(). Returns the previous setting; ValueError on an unknown name.",
      py::arg("path"));
  m.def("dense_sm90_tiles", &dense::dense_sm90_tiles,
        "The sm_90a CUTLASS GEMM tiles this build carries for activation 'gelu' (e.g. 'coop_128x256',\n"
        "'pp_64x128'; empty without an sm_90a build).");
  m.def("dense_workspace_bytes", &dense::dense_workspace_bytes, "The cuBLASLt workspace the ORT op hands Dense.");
  m.def("dense_library_status", &dense_library_status,
        "Whether libcublasLt could be loaded (loads it on first call): available, version, reason.");
  m.def("dense_plan_cache_stats", &dense_plan_cache_stats,
        "Dense plan cache counters: hits, misses, insertions, replacements, evictions, size, capacity.");
  m.def("dense_plan_cache_clear", &dense::dense_plan_cache_clear, "Drop every cached Dense plan.");
  m.def("dense_plan_cache_reset_stats", &dense::dense_plan_cache_reset_stats, "Zero the Dense plan cache counters.");
  m.def("dense_plan_cache_set_capacity", &dense::dense_plan_cache_set_capacity, py::arg("capacity"),
        "Set the Dense plan cache capacity (>= 1; evicts least recently used plans beyond it).");
}

}  // namespace trt_fastops::python
