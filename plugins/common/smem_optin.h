// Opting a kernel into more than the default 48 KiB of dynamic shared memory,
// once per device: the attribute is per kernel and device, and setting it on
// every launch would cost host time on the hot path.
#pragma once

#include <atomic>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace trt_fastops {

// Sets kernel's cudaFuncAttributeMaxDynamicSharedMemorySize to `bytes` on
// `device` (the current device; < 0: ask the runtime) unless `done` (one bit
// per device, one atomic per kernel instantiation) says it already was.
// Devices past 63 set it every time; 48 KiB or less needs no opt-in.
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, int bytes, std::atomic<uint64_t>& done, int device = -1) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  if (device < 0) {
    if (const cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  }
  const bool cacheable = device >= 0 && device < 64;
  const uint64_t bit = cacheable ? uint64_t(1) << device : 0;
  if (cacheable && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) return err;
  if (cacheable) done.fetch_or(bit, std::memory_order_acq_rel);
  return cudaSuccess;
}

}  // namespace trt_fastops
