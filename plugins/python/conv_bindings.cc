// pybind11 bindings for the conv launcher (plugins/conv/conv_launch.h): raw
// device pointers in, no framework types. Tests and benchmarks wrap these for
// torch tensors.
//
//   info = _C.conv_plan("float16", x, w, y, n, c_in, c_out, in_shape, out_shape, kernel_shape,
//                       bias=b, group=1, strides=[1, 1], pads_begin=[1, 1], pads_end=[1, 1],
//                       activation="relu", backend="auto", stream=s)
//   ws = allocate(info["workspace_bytes"])
//   _C.conv_forward(<same arguments>, workspace=ws, workspace_bytes=n)   -> the same dict
//   _C.conv_cache_stats() / conv_cache_clear() / conv_cache_reset_stats() / conv_cache_set_capacity(n)
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "plugins/conv/conv.h"
#include "plugins/conv/conv_launch.h"

namespace py = pybind11;

namespace trt_fastops::python {
namespace {

using conv::Activation;
using conv::ConvBackend;
using conv::ConvParams;
using conv::ConvPlanHandle;

DType parse_dtype(const std::string& dtype) {
  if (dtype == "float32") return DType::f32;
  if (dtype == "float16") return DType::f16;
  if (dtype == "bfloat16") return DType::bf16;
  throw py::value_error("conv: dtype must be 'float32', 'float16' or 'bfloat16', got '" + dtype + "'");
}

Activation parse_activation(const std::string& a) {
  if (a == "none" || a.empty()) return Activation::none;
  if (a == "relu") return Activation::relu;
  if (a == "silu") return Activation::silu;
  if (a == "gelu") return Activation::gelu;
  throw py::value_error("conv: activation must be 'none', 'relu', 'silu' or 'gelu', got '" + a + "'");
}

ConvBackend parse_backend(const std::string& b) {
  ConvBackend out = ConvBackend::automatic;
  if (!conv::parse_conv_backend(b, &out))
    throw py::value_error("conv: backend must be 'auto', 'cudnn', 'fallback', 'gemm', 'gather', 'direct' or "
                          "'depthwise', got '" + b + "'");
  return out;
}

// Copies a per-spatial-dim list (empty -> `fill` everywhere) into dst.
void spatial_list(const char* name, const std::vector<int64_t>& v, int spatial, int64_t fill, int64_t* dst) {
  if (!v.empty() && static_cast<int>(v.size()) != spatial)
    throw py::value_error(std::string("conv: ") + name + " has " + std::to_string(v.size()) +
                          " entries, expected one per spatial dim (" + std::to_string(spatial) + ")");
  for (int i = 0; i < spatial; ++i) dst[i] = v.empty() ? fill : v[i];
}

struct Call {
  ConvParams p;
  ConvBackend backend = ConvBackend::automatic;
  cudaStream_t stream = nullptr;
};

Call make_call(const std::string& dtype, uintptr_t x, uintptr_t w, uintptr_t y, int64_t n, int64_t c_in,
               int64_t c_out, const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
               const std::vector<int64_t>& kernel_shape, uintptr_t bias, int64_t group,
               const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
               const std::vector<int64_t>& pads_begin, const std::vector<int64_t>& pads_end,
               const std::vector<int64_t>& output_padding, bool transpose, const std::string& activation,
               const std::string& backend, uintptr_t stream) {
  Call c;
  ConvParams& p = c.p;
  const int spatial = static_cast<int>(in_shape.size());
  if (spatial < 1 || spatial > conv::CONV_MAX_SPATIAL)
    throw py::value_error("conv: in_shape must list 1, 2 or 3 spatial dims, got " + std::to_string(spatial));
  p.dtype = parse_dtype(dtype);
  p.transpose = transpose;
  p.spatial = spatial;
  p.n = n;
  p.c_in = c_in;
  p.c_out = c_out;
  p.group = group;
  spatial_list("in_shape", in_shape, spatial, 1, p.in);
  if (out_shape.size() != in_shape.size()) throw py::value_error("conv: out_shape must have one entry per spatial dim");
  spatial_list("out_shape", out_shape, spatial, 1, p.out);
  if (kernel_shape.size() != in_shape.size())
    throw py::value_error("conv: kernel_shape must have one entry per spatial dim");
  spatial_list("kernel_shape", kernel_shape, spatial, 1, p.kernel);
  spatial_list("strides", strides, spatial, 1, p.stride);
  spatial_list("dilations", dilations, spatial, 1, p.dilation);
  spatial_list("pads_begin", pads_begin, spatial, 0, p.pad_begin);
  spatial_list("pads_end", pads_end, spatial, 0, p.pad_end);
  spatial_list("output_padding", output_padding, spatial, 0, p.output_padding);
  p.activation = parse_activation(activation);
  p.x = reinterpret_cast<const void*>(x);
  p.w = reinterpret_cast<const void*>(w);
  p.bias = reinterpret_cast<const void*>(bias);
  p.y = reinterpret_cast<void*>(y);
  c.backend = parse_backend(backend);
  c.stream = reinterpret_cast<cudaStream_t>(stream);
  return c;
}

py::dict info_dict(const ConvPlanHandle& plan) {
  const conv::ConvPlanInfo info = conv::conv_plan_info(plan);
  py::dict d;
  d["empty"] = info.empty;
  d["cudnn"] = info.cudnn;
  d["separate_epilogue"] = info.separate_epilogue;
  d["graph_replay"] = info.graph_replay;
  d["workspace_bytes"] = info.workspace;
  d["cudnn_us"] = info.cudnn_us;
  d["fallback_us"] = info.fallback_us;
  d["description"] = info.description;
  d["fallback_kernel"] = info.fallback_kernel;
  d["cudnn_refusal"] = info.cudnn_refusal;
  return d;
}

ConvPlanHandle prepare(const Call& c, size_t* ws) {
  ConvPlanHandle plan;
  Status st;
  {
    py::gil_scoped_release release;
    st = conv::conv_prepare(c.p, c.stream, &plan, ws, c.backend);
  }
  if (!st.is_ok()) throw std::runtime_error(st.message());
  return plan;
}

#define CONV_ARGS                                                                                          \
  const std::string &dtype, uintptr_t x, uintptr_t w, uintptr_t y, int64_t n, int64_t c_in, int64_t c_out, \
      const std::vector<int64_t>&in_shape, const std::vector<int64_t>&out_shape,                           \
      const std::vector<int64_t>&kernel_shape, uintptr_t bias, int64_t group,                              \
      const std::vector<int64_t>&strides, const std::vector<int64_t>&dilations,                            \
      const std::vector<int64_t>&pads_begin, const std::vector<int64_t>&pads_end,                          \
      const std::vector<int64_t>&output_padding, bool transpose, const std::string &activation,            \
      const std::string &backend, uintptr_t stream
#define CONV_ARG_NAMES                                                                                       \
  dtype, x, w, y, n, c_in, c_out, in_shape, out_shape, kernel_shape, bias, group, strides, dilations, pads_begin, \
      pads_end, output_padding, transpose, activation, backend, stream

py::dict conv_plan(CONV_ARGS) {
  const Call c = make_call(CONV_ARG_NAMES);
  size_t ws = 0;
  return info_dict(prepare(c, &ws));
}

py::dict conv_forward(CONV_ARGS, uintptr_t workspace, size_t workspace_bytes) {
  const Call c = make_call(CONV_ARG_NAMES);
  size_t ws = 0;
  const ConvPlanHandle plan = prepare(c, &ws);
  if (workspace_bytes < ws)
    throw py::value_error("conv_forward: the plan needs a workspace of " + std::to_string(ws) + " bytes, got " +
                          std::to_string(workspace_bytes) + " (conv_plan() reports workspace_bytes)");
  Status st;
  {
    py::gil_scoped_release release;
    st = conv::conv_run(c.p, plan, reinterpret_cast<void*>(workspace), workspace_bytes, c.stream);
  }
  if (!st.is_ok()) throw std::runtime_error(st.message());
  return info_dict(plan);
}

// Mean host time of a conv_prepare cache hit (the signature must be planned
// already), in microseconds, over `iters` calls: the launcher's per-call cost.
double conv_prepare_overhead_us(CONV_ARGS, int iters) {
  const Call c = make_call(CONV_ARG_NAMES);
  size_t ws = 0;
  prepare(c, &ws);  // plan (or hit) once
  if (iters < 1) throw py::value_error("conv_prepare_overhead_us: iters must be >= 1");
  py::gil_scoped_release release;
  ConvPlanHandle plan;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    const Status st = conv::conv_prepare(c.p, c.stream, &plan, &ws, c.backend);
    if (!st.is_ok()) {
      py::gil_scoped_acquire acquire;
      throw std::runtime_error(st.message());
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

// Mean host time of conv_prepare (hit) + conv_run (enqueue) per call, in
// microseconds over `iters` calls: what a framework adapter pays per
// convolution on the host. Enqueues real work: keep the GPU busy beforehand
// and `iters` well below the launch queue depth (a few dozen: one cuDNN
// execution may enqueue several commands), or the host ends up waiting for
// the GPU and the result is GPU time, not host overhead.
double conv_forward_overhead_us(CONV_ARGS, uintptr_t workspace, size_t workspace_bytes, int iters) {
  const Call c = make_call(CONV_ARG_NAMES);
  size_t ws = 0;
  prepare(c, &ws);
  if (iters < 1) throw py::value_error("conv_forward_overhead_us: iters must be >= 1");
  if (workspace_bytes < ws)
    throw py::value_error("conv_forward_overhead_us: the plan needs a workspace of " + std::to_string(ws) + " bytes");
  py::gil_scoped_release release;
  ConvPlanHandle plan;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    Status st = conv::conv_prepare(c.p, c.stream, &plan, &ws, c.backend);
    if (st.is_ok()) st = conv::conv_run(c.p, plan, reinterpret_cast<void*>(workspace), workspace_bytes, c.stream);
    if (!st.is_ok()) {
      py::gil_scoped_acquire acquire;
      throw std::runtime_error(st.message());
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

py::dict conv_cache_stats() {
  const conv::ConvCacheStats s = conv::conv_cache_stats();
  py::dict d;
  d["hits"] = s.cache.hits;
  d["misses"] = s.cache.misses;
  d["insertions"] = s.cache.insertions;
  d["replacements"] = s.cache.replacements;
  d["evictions"] = s.cache.evictions;
  d["erasures"] = s.cache.erasures;
  d["size"] = s.cache.size;
  d["capacity"] = s.cache.capacity;
  d["cudnn_plans"] = s.cudnn_plans;
  d["fallback_plans"] = s.fallback_plans;
  d["exec_failures"] = s.exec_failures;
  d["capture_misses"] = s.capture_misses;
  d["graph_launches"] = s.graph_launches;
  d["graph_captures"] = s.graph_captures;
  d["graph_failures"] = s.graph_failures;
  d["capturing_executions"] = s.capturing_executions;
  d["fallback_graph_launches"] = s.fallback_graph_launches;
  d["fallback_graph_captures"] = s.fallback_graph_captures;
  d["fallback_graph_failures"] = s.fallback_graph_failures;
  d["cudnn_compiled"] = s.cudnn_compiled;
  d["cudnn_available"] = s.cudnn_available;
  d["cudnn_version"] = s.cudnn_version;
  d["cudnn_status"] = s.cudnn_status;
  return d;
}

}  // namespace

void register_conv_bindings(py::module_& m) {
  auto args = [](auto... extra) {
    return std::make_tuple(py::arg("dtype"), py::arg("x"), py::arg("w"), py::arg("y"), py::arg("n"),
                           py::arg("c_in"), py::arg("c_out"), py::arg("in_shape"), py::arg("out_shape"),
                           py::arg("kernel_shape"), py::kw_only(), py::arg("bias") = 0, py::arg("group") = 1,
                           py::arg("strides") = std::vector<int64_t>{}, py::arg("dilations") = std::vector<int64_t>{},
                           py::arg("pads_begin") = std::vector<int64_t>{}, py::arg("pads_end") = std::vector<int64_t>{},
                           py::arg("output_padding") = std::vector<int64_t>{}, py::arg("transpose") = false,
                           py::arg("activation") = "none", py::arg("backend") = "auto", py::arg("stream") = 0,
                           extra...);
  };
  const char* plan_doc =
      "Plan (or look up) the convolution for raw device pointers: Conv (transpose=False; w [c_out, c_in/group,\n"
      "k...]) or ConvTranspose (transpose=True; w [c_in, c_out/group, k...]); y = act(conv + bias). Returns\n"
      "{'cudnn', 'description', 'workspace_bytes', 'fallback_kernel', 'cudnn_refusal', 'separate_epilogue',\n"
      "'graph_replay', 'empty', 'cudnn_us', 'fallback_us'}; the last two: planning's median GPU microseconds of\n"
      "cuDNN's chosen plan and of the fallback timed against it (backend 'auto' with autotuning; 0: not timed).\n"
      "A miss may synchronise `stream` and (autotuning) run the convolution, writing y.\n"
      "backend: 'auto', 'cudnn' (error if cuDNN refuses), 'fallback', 'gemm', 'gather' (NCHW-gather GEMM), 'direct',\n"
      "'depthwise' (the fallback's own choice where the depthwise kernel does not apply). Raises RuntimeError\n"
      "with the launcher's message (e.g. a miss during CUDA-graph capture), ValueError for bad arguments.";
  std::apply([&](auto... a) { m.def("conv_plan", &conv_plan, plan_doc, a...); }, args());
  std::apply(
      [&](auto... a) {
        m.def("conv_forward", &conv_forward,
              "conv_plan + enqueue on `stream` with `workspace` (device pointer, >= the plan's\n"
              "workspace_bytes, 16-byte aligned). Returns conv_plan's dict. Never synchronises on a cache hit.",
              a...);
      },
      args(py::arg("workspace") = 0, py::arg("workspace_bytes") = 0));
  std::apply(
      [&](auto... a) {
        m.def("conv_prepare_overhead_us", &conv_prepare_overhead_us,
              "Mean host microseconds of a plan-cache hit (conv_prepare) over `iters` calls.", a...);
      },
      args(py::arg("iters") = 10000));
  std::apply(
      [&](auto... a) {
        m.def("conv_forward_overhead_us", &conv_forward_overhead_us,
              "Mean host microseconds of conv_prepare (hit) + conv_run (enqueue) over `iters` calls; enqueues\n"
              "real work on `stream`: keep the GPU busy beforehand and iters to a few dozen (a full launch\n"
              "queue makes the host wait for the GPU).",
              a...);
      },
      args(py::arg("workspace") = 0, py::arg("workspace_bytes") = 0, py::arg("iters") = 32));
  m.def("conv_cache_stats", &conv_cache_stats,
        "Plan cache counters (hits, misses, insertions, replacements, evictions, size, capacity), plans by\n"
        "kind (cudnn_plans, fallback_plans), exec_failures, capture_misses, cuDNN graph replay (graph_launches,\n"
        "graph_captures, graph_failures, capturing_executions), the fallback's graph replay\n"
        "(fallback_graph_launches, fallback_graph_captures, fallback_graph_failures) and cuDNN status.");
  m.def("conv_cache_clear", &conv::conv_cache_clear, "Drop every cached conv plan.");
  m.def("conv_cache_reset_stats", &conv::conv_cache_reset_stats, "Zero the conv cache counters.");
  m.def("conv_cache_set_capacity", &conv::conv_cache_set_capacity, py::arg("capacity"),
        "Set the plan cache capacity (>= 1; evicts least recently used plans beyond it).");
  m.def("conv_debug_fail_cudnn_executions", &conv::conv_debug_fail_cudnn_executions, py::arg("count"),
        "Test hook: the next `count` cuDNN executions fail without running, exercising the evict-and-\n"
        "fall-back path. 0 disarms it.");
}

}  // namespace trt_fastops::python
