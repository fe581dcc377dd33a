// CUDA error -> Status, exported by the kernel library (which links cudart
// statically) so adapters report CUDA failures without linking cudart themselves.
#pragma once

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"

namespace trt_fastops {

// "cudaErrorInvalidValue (invalid argument)"
std::string cuda_error_string(cudaError_t err);

// ok() for cudaSuccess, else "<what> failed: <cuda_error_string>".
Status cuda_status(cudaError_t err, const char* what);

}  // namespace trt_fastops
