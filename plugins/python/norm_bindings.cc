// pybind11 bindings for the norm launcher (placeholder until the kernels land).
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace trt_fastops::python {

void register_norm_bindings(py::module_& m) {}

}  // namespace trt_fastops::python
