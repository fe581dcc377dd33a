// Test kernels (declared in graph_cache.h). launch_affine_probe: a tiny kernel
// that the graph cache tests capture, optionally launched in thread-block
// clusters so the cache's cluster path (re-instantiate, never update) can be
// exercised without a CUTLASS or TensorRT kernel. launch_late_copy_probe: a
// copy that lets the next grid launch at once and writes only after a delay,
// the test that a kernel launched with programmatic stream serialization waits
// for the grid ahead before reading.
#include <algorithm>
#include <cstdint>

#include "plugins/common/graph_cache.h"
#include "plugins/common/hopper.cuh"

namespace trt_fastops {
namespace {

__global__ void affine_probe_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, float a,
                                    float b) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = a * x[i] + b;
  }
}

__global__ void late_copy_probe_kernel(const uint32_t* __restrict__ src, uint32_t* __restrict__ dst, int64_t words,
                                       uint64_t delay_ns) {
  launch_dependents();
#if __CUDA_ARCH__ >= 900
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < delay_ns);
#endif
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    dst[i] = src[i];
}

}  // namespace

cudaError_t launch_late_copy_probe(const void* src, void* dst, int64_t bytes, int64_t delay_us, cudaStream_t stream) {
  if (bytes < 0 || bytes % 4 != 0 || delay_us < 0 || delay_us > 10'000'000 ||
      (bytes > 0 && (src == nullptr || dst == nullptr)))
    return cudaErrorInvalidValue;
  if (bytes == 0) return cudaSuccess;
  const int64_t words = bytes / 4;
  constexpr int64_t BLOCK = 256;
  // Four CTAs: the other SMs stay free for the next grid's CTAs to start on at once.
  const int64_t blocks = std::min<int64_t>((words + BLOCK - 1) / BLOCK, 4);
  late_copy_probe_kernel<<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(
      static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), words, uint64_t(delay_us) * 1000);
  return cudaGetLastError();
}

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
