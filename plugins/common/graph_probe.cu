// launch_affine_probe (declared in graph_cache.h): a tiny kernel that the graph
// cache tests capture, optionally launched in thread-block clusters so the
// cache's cluster path (re-instantiate, never update) can be exercised without
// a CUTLASS or TensorRT kernel.
#include <algorithm>

#include "plugins/common/graph_cache.h"

namespace trt_fastops {
namespace {

__global__ void affine_probe_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float a,
                                    float b) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a * x[i] + b;
  }
}

}  // namespace

cudaError_t launch_affine_probe(const float* x, float* y, int64_t n, float a, float b, int cluster_x,
                                cudaStream_t stream) {
  if (n < 0 || cluster_x < 1 || cluster_x > 8 || (n > 0 && (x == nullptr || y == nullptr)))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  constexpr int64_t BLOCK = 256;
  int64_t blocks = std::min<int64_t>((n + BLOCK - 1) / BLOCK, 1024);
  blocks = (blocks + cluster_x - 1) / cluster_x * cluster_x;  // the grid must be a whole number of clusters

  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(BLOCK));
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (cluster_x > 1) {
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = static_cast<unsigned>(cluster_x);
    attribute[0].val.clusterDim.y = 1;
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  const cudaError_t err = cudaLaunchKernelEx(&config, affine_probe_kernel, x, y, n, a, b);
  if (err != cudaSuccess) {
    cudaGetLastError();  // report this launch's error once, not again from a later launch
    return err;
  }
  return cudaGetLastError();
}

}  // namespace trt_fastops
