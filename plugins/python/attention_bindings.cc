// pybind11 bindings for the attention launcher: raw device pointers and
// element strides in, no framework types. trt_fastops/ops.py wraps these for
// torch tensors.
//
//   _C.attention_forward("float16", q, k, v, out, batch, q_heads, kv_heads, q_len, kv_len,
//                        head_dim, v_head_dim, q_strides=(sb, sh, ss), ..., scale=0.125,
//                        causal=True, stream=s)
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "plugins/attention/attention.h"
#include "plugins/common/cuda_status.h"
#include "plugins/common/status.h"

namespace py = pybind11;

namespace trt_fastops::python {
namespace {

using attention::AttentionParams;
using attention::MaskKind;
using attention::TensorView;
using Strides3 = std::tuple<int64_t, int64_t, int64_t>;
using Strides4 = std::tuple<int64_t, int64_t, int64_t, int64_t>;

DType parse_dtype(const std::string& name, const char* what, const char* fn = "attention_forward") {
  if (name == "float32") return DType::f32;
  if (name == "float16") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  throw py::value_error(str_cat(fn, ": ", what, " must be 'float32', 'float16' or 'bfloat16', got '",
                                name, "'"));
}

MaskKind parse_mask_kind(const std::string& kind) {
  if (kind == "none") return MaskKind::none;
  if (kind == "bool") return MaskKind::boolean;
  if (kind == "additive") return MaskKind::additive;
  throw py::value_error("attention_forward: mask_kind must be 'none', 'bool' or 'additive', got '" + kind + "'");
}

// A process-wide attention hook set by name: set(E(i)) for value == names[i],
// the previous setting returned by name; anything else is a ValueError that
// lists the names.
template <typename E, size_t N, typename Set>
const char* set_by_name(const char* what, const char* const (&names)[N], const std::string& value, Set set) {
  for (size_t i = 0; i < N; ++i)
    if (value == names[i]) return names[int(set(E(i)))];
  std::string allowed;
  for (size_t i = 0; i < N; ++i) allowed += str_cat(i == 0 ? "" : i + 1 == N ? " or " : ", ", "'", names[i], "'");
  throw py::value_error(str_cat(what, " must be ", allowed, ", got '", value, "'"));
}

TensorView view(const Strides3& s) { return TensorView{std::get<0>(s), std::get<1>(s), std::get<2>(s)}; }

AttentionParams make_params(const std::string& dtype, uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t out,
                            int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                            int64_t head_dim, int64_t v_head_dim, const Strides3& q_strides,
                            const Strides3& k_strides, const Strides3& v_strides, const Strides3& out_strides,
                            double scale, double softcap, bool causal, int64_t causal_offset,
                            const std::string& mask_kind, const std::string& mask_dtype, uintptr_t mask,
                            const Strides4& mask_strides, int64_t mask_kv_len, uintptr_t lse, uintptr_t workspace,
                            size_t workspace_bytes) {
  AttentionParams p;
  p.dtype = parse_dtype(dtype, "dtype");
  p.q = reinterpret_cast<const void*>(q);
  p.k = reinterpret_cast<const void*>(k);
  p.v = reinterpret_cast<const void*>(v);
  p.out = reinterpret_cast<void*>(out);
  p.q_view = view(q_strides);
  p.k_view = view(k_strides);
  p.v_view = view(v_strides);
  p.out_view = view(out_strides);
  p.batch = batch;
  p.q_heads = q_heads;
  p.kv_heads = kv_heads;
  p.q_len = q_len;
  p.kv_len = kv_len;
  p.head_dim = head_dim;
  p.v_head_dim = v_head_dim;
  p.scale = static_cast<float>(scale);
  p.softcap = static_cast<float>(softcap);
  p.causal = causal;
  p.causal_offset = causal_offset;
  p.mask_kind = parse_mask_kind(mask_kind);
  p.mask_dtype = parse_dtype(mask_dtype, "mask_dtype");
  p.mask = reinterpret_cast<const void*>(mask);
  p.mask_stride_b = std::get<0>(mask_strides);
  p.mask_stride_h = std::get<1>(mask_strides);
  p.mask_stride_q = std::get<2>(mask_strides);
  p.mask_stride_k = std::get<3>(mask_strides);
  p.mask_kv_len = mask_kv_len;
  p.lse = reinterpret_cast<float*>(lse);
  p.workspace = reinterpret_cast<void*>(workspace);
  p.workspace_bytes = workspace_bytes;  // unused without a workspace (launch_kernel)
  return p;
}

// Launches the kernel and returns its name; with dry_run, only returns the name
// ('unsupported' for arguments the kernel refuses).
std::string attention_forward(const std::string& dtype, uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t out,
                              int64_t batch, int64_t q_heads, int64_t kv_heads, int64_t q_len, int64_t kv_len,
                              int64_t head_dim, int64_t v_head_dim, const Strides3& q_strides,
                              const Strides3& k_strides, const Strides3& v_strides, const Strides3& out_strides,
                              double scale, double softcap, bool causal, int64_t causal_offset,
                              const std::string& mask_kind, const std::string& mask_dtype, uintptr_t mask,
                              const Strides4& mask_strides, int64_t mask_kv_len, uintptr_t lse, uintptr_t workspace,
                              size_t workspace_bytes, uintptr_t stream, bool dry_run) {
  const AttentionParams p =
      make_params(dtype, q, k, v, out, batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_head_dim, q_strides,
                  k_strides, v_strides, out_strides, scale, softcap, causal, causal_offset, mask_kind, mask_dtype,
                  mask, mask_strides, mask_kv_len, lse, workspace, workspace_bytes);
  const std::string name = attention::attention_kernel_name(p);
  if (dry_run) return name;
  if (const char* why = attention::attention_unsupported_reason(p)) {
    throw py::value_error(str_cat("attention_forward: ", why));
  }
  cudaError_t err;
  {
    py::gil_scoped_release release;
    err = attention::launch_attention(p, reinterpret_cast<cudaStream_t>(stream));
  }
  if (err == cudaSuccess) return name;
  const std::string what = str_cat("launch_attention(", name, ", batch=", batch, ", q_heads=", q_heads,
                                   ", kv_heads=", kv_heads, ", q_len=", q_len, ", kv_len=", kv_len,
                                   ", head_dim=", head_dim, ")");
  throw std::runtime_error(cuda_status(err, what.c_str()).message());
}

}  // namespace

void register_attention_bindings(py::module_& m) {
  m.def("attention_forward", &attention_forward,
        "Enqueue the flash-attention forward kernel on `stream` for raw device pointers (ints; 0 =\n"
        "absent) and element strides (batch, head, seq) of each [B, H, S, D] view; returns the kernel\n"
        "name. workspace: device scratch of workspace_bytes (attention_workspace_bytes) that causal\n"
        "inputs use for a tile counter; without it they take a computed tile order. Calls that may run\n"
        "at the same time need workspaces of their own. dry_run: launch nothing, only return the name\n"
        "('unsupported' for refused arguments). ValueError for arguments the kernel refuses,\n"
        "RuntimeError naming the kernel and the CUDA error. Never synchronises.",
        py::arg("dtype"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("batch"),
        py::arg("q_heads"), py::arg("kv_heads"), py::arg("q_len"), py::arg("kv_len"), py::arg("head_dim"),
        py::arg("v_head_dim"), py::kw_only(), py::arg("q_strides"), py::arg("k_strides"), py::arg("v_strides"),
        py::arg("out_strides"), py::arg("scale"), py::arg("softcap") = 0.0, py::arg("causal") = false,
        py::arg("causal_offset") = 0, py::arg("mask_kind") = "none", py::arg("mask_dtype") = "float16",
        py::arg("mask") = 0, py::arg("mask_strides") = Strides4{0, 0, 0, 1}, py::arg("mask_kv_len") = 0,
        py::arg("lse") = 0, py::arg("workspace") = 0, py::arg("workspace_bytes") = 0, py::arg("stream") = 0,
        py::arg("dry_run") = false);
  m.def(
      "attention_workspace_bytes",
      [](const std::string& dtype, bool causal) {
        AttentionParams p;
        p.dtype = parse_dtype(dtype, "dtype", "attention_workspace_bytes");
        p.causal = causal;
        return attention::attention_workspace_bytes(p);
      },
      "Bytes of workspace attention_forward can put to use for inputs of this dtype (0: none).",
      py::arg("dtype"), py::kw_only(), py::arg("causal"));
  m.def("attention_set_schedule", &attention::attention_set_schedule,
        "Benchmark hook: the tile schedule of the warp-specialised kernel from now on: -1 default, -2\n"
        "head-major without dealing the partial tiles apart, -3 (causal, with a workspace) tiles drawn from\n"
        "a counter, -5 the default without the causal tail table, 0 a CTA per tile, n > 0 a persistent\n"
        "grid with sections of heads whose K/V take n MiB;\n"
        "returns the previous setting.",
        py::arg("section_mib"));
  m.def("attention_set_section_heads", &attention::attention_set_section_heads,
        "Benchmark hook: where the persistent grid runs sections of heads (causal inputs by default),\n"
        "sections of `heads` heads from now on instead of the launcher's choice (0 restores it); returns\n"
        "the previous setting.",
        py::arg("heads"));
  m.def("attention_set_tile_variant", &attention::attention_set_tile_variant,
        "Benchmark hook: tile variant for aligned rows from now on (0 = default); returns the previous one.",
        py::arg("variant"));
  m.def(
      "attention_set_path",
      [](const std::string& path) {
        static const char* const names[] = {"auto", "sm80", "wgmma"};  // AttentionPath's order
        return set_by_name<attention::AttentionPath>("attention_set_path: path", names, path,
                                                     attention::attention_set_path);
      },
      "Kernel family for attention from now on, process-wide: 'auto' (on sm_90 with an sm_90a build: the\n"
      "warp-specialised TMA kernel, or the plain wgmma kernel where it can't run; else mma.sync), 'wgmma'\n"
      "(the plain wgmma kernel instead of the warp-specialised one) or 'sm80' (always the mma.sync kernel);\n"
      "returns the previous setting.",
      py::arg("path"));
  m.def(
      "attention_set_output_store",
      [](const std::string& store) {
        static const char* const names[] = {"auto", "consumers"};  // AttentionStore's order
        return set_by_name<attention::AttentionStore>("attention_set_output_store: store", names, store,
                                                      attention::attention_set_output_store);
      },
      "How the warp-specialised kernel's output leaves from now on, process-wide: 'auto' (TMA stores from a\n"
      "producer warp where the output admits a tensor map) or 'consumers' (each consumer warp's own\n"
      "16-byte stores); returns the previous setting.",
      py::arg("store"));
  m.def("attention_set_dependent_launch", &attention::attention_set_dependent_launch,
        "Whether the sm_90a attention kernels launch with programmatic stream serialization from now on,\n"
        "process-wide (their CTAs start while the kernel ahead finishes, then wait for it; results are the\n"
        "same either way). Default on; TRT_FASTOPS_ATTENTION_PDL=0 makes it off. Returns the previous setting.",
        py::arg("on"));
}

}  // namespace trt_fastops::python
