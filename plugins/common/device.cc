#include "plugins/common/device.h"

#include <atomic>

#include <cuda_runtime_api.h>

#include "plugins/common/cuda_status.h"

namespace trt_fastops {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

Status cuda_device_info(int index, DeviceInfo* info) {
  cudaDeviceProp prop{};
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties"));
  info->name = prop.name;
  info->major = prop.major;
  info->minor = prop.minor;
  info->memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info->multiprocessors = prop.multiProcessorCount;
  return Status::ok();
}

int current_device_sms() {
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms;
}

int device_smem_optin(int device) {
  constexpr int kDefault = 48 * 1024;
  constexpr int kCachedDevices = 64;
  static std::atomic<int> cached[kCachedDevices];  // 0: not queried yet (racing first calls store the same)
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return kDefault;
  }
  const bool cacheable = device < kCachedDevices;
  if (cacheable) {
    const int v = cached[device].load(std::memory_order_relaxed);
    if (v > 0) return v;
  }
  int value = 0;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess || value <= 0) {
    cudaGetLastError();
    return kDefault;
  }
  if (cacheable) cached[device].store(value, std::memory_order_relaxed);
  return value;
}

int cuda_runtime_version() { return CUDART_VERSION; }

}  // namespace trt_fastops
