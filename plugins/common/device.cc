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

cudaError_t current_launch_device(LaunchDevice* d) {
  constexpr int kCachedDevices = 64;
  static std::atomic<int64_t> cached[kCachedDevices];  // multiprocessors << 16 | major << 8 | minor; 0 unknown
  cudaError_t err = cudaGetDevice(&d->index);
  if (err != cudaSuccess) return err;
  const bool cacheable = d->index >= 0 && d->index < kCachedDevices;
  int64_t packed = cacheable ? cached[d->index].load(std::memory_order_relaxed) : 0;
  if (packed == 0) {
    int sms = 0, major = 0, minor = 0;
    if ((err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d->index)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d->index)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d->index)) != cudaSuccess)
      return err;
    packed = int64_t(sms) << 16 | int64_t(major) << 8 | minor;
    if (cacheable) cached[d->index].store(packed, std::memory_order_relaxed);
  }
  d->multiprocessors = int(packed >> 16);
  d->cc_major = int(packed >> 8) & 0xff;
  d->cc_minor = int(packed) & 0xff;
  return cudaSuccess;
}

int current_device_sms() {
  LaunchDevice d;
  if (current_launch_device(&d) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return d.multiprocessors;
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
