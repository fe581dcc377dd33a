// trt_fastops._C: build information, device queries, and direct kernel calls.
// Op bindings live beside this file (norm_bindings.cc, ...), one register_* per op family.
#include <pybind11/pybind11.h>

#include <cudnn_version.h>
#include <cudnn_frontend_version.h>
#include <cutlass/version.h>
#include <onnxruntime_c_api.h>

#include "plugins/common/device.h"

namespace py = pybind11;

namespace trt_fastops::python {
void register_norm_bindings(py::module_& m);
void register_conv_bindings(py::module_& m);
void register_graph_bindings(py::module_& m);
void register_attention_bindings(py::module_& m);
void register_dense_bindings(py::module_& m);
}

namespace {

py::dict build_info() {
  py::dict d;
  d["version"] = TRT_FASTOPS_VERSION;
  d["cuda_archs"] = TRT_FASTOPS_CUDA_ARCHS;
  d["cuda_compiler"] = TRT_FASTOPS_CUDA_VERSION;
  d["cuda_runtime"] = trt_fastops::cuda_runtime_version();
  d["ort_api_version"] = ORT_API_VERSION;
  d["cudnn_headers"] = std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
                       std::to_string(CUDNN_PATCHLEVEL);
  d["cudnn_frontend_headers"] = std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
                                std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
                                std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
  d["cutlass_headers"] = std::to_string(CUTLASS_MAJOR) + "." + std::to_string(CUTLASS_MINOR) + "." +
                         std::to_string(CUTLASS_PATCH);
  return d;
}

py::list devices() {
  py::list out;
  for (int i = 0, n = trt_fastops::cuda_device_count(); i < n; ++i) {
    trt_fastops::DeviceInfo info;
    if (!trt_fastops::cuda_device_info(i, &info).is_ok()) continue;
    py::dict d;
    d["index"] = i;
    d["name"] = info.name;
    d["capability"] = std::to_string(info.major) + "." + std::to_string(info.minor);
    d["memory_bytes"] = info.memory_bytes;
    d["multiprocessors"] = info.multiprocessors;
    out.append(d);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "trt_fastops native module: build info, devices, direct kernel calls";
  m.def("build_info", &build_info, "Versions and CUDA architectures this build was made with");
  m.def("cuda_device_count", &trt_fastops::cuda_device_count, "Number of visible CUDA devices (0 without a driver)");
  m.def("devices", &devices, "Properties of the visible CUDA devices");
  trt_fastops::python::register_norm_bindings(m);
  trt_fastops::python::register_conv_bindings(m);
  trt_fastops::python::register_graph_bindings(m);
  trt_fastops::python::register_attention_bindings(m);
  trt_fastops::python::register_dense_bindings(m);
}
