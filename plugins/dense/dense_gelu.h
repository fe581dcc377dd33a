// Internal: Dense's GELU pass over Y (the fallback of activation "gelu" after
// cuBLASLt's BIAS epilogue, and K == 0 with a bias), called by
// dense_launch.cc. Device code: dense_gelu.cuh.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"

namespace trt_fastops::dense {

// Enqueues y[i] = GELU(y[i]) for i < count (y: device, `dtype` elements) on
// `stream`; 16-byte packs where y is 16-byte aligned. sm_count sizes the grid
// (0: a fixed cap). Returns cudaGetLastError() after the launch (count 0:
// nothing, cudaSuccess).
cudaError_t launch_dense_gelu(DType dtype, void* y, int64_t count, int sm_count, cudaStream_t stream);

}  // namespace trt_fastops::dense
