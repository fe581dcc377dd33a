#include "plugins/common/cuda_status.h"

#include <string>

namespace trt_fastops {

std::string cuda_error_string(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return Status::errorf(what, " failed: ", cuda_error_string(err));
}

}  // namespace trt_fastops
