// Device queries, exported by the kernel library (the only one linking cudart)
// so the Python module and adapters never call the CUDA runtime themselves.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"

namespace trt_fastops {

// Visible CUDA devices; 0 without a driver or device (never an error).
int cuda_device_count();

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
};

Status cuda_device_info(int index, DeviceInfo* info);

// Multiprocessors of the current device (current_launch_device's cached value),
// or 0 when it cannot be asked (the query's error is cleared so the next launch
// does not inherit it).
int current_device_sms();

// Largest dynamic shared memory a CTA may opt into on `device` (< 0: the
// current one), queried once per device and cached; 48 KiB (what needs no
// opt-in) when it cannot be asked (the query's error is cleared).
int device_smem_optin(int device = -1);

// What launchers need of the current device (compute capability for a path
// choice, SMs for persistent grids), read once per device (64 cached) and
// cheap afterwards: one cudaGetDevice. Returns the failed query's error.
struct LaunchDevice {
  int index = 0, multiprocessors = 0, cc_major = 0, cc_minor = 0;
};
cudaError_t current_launch_device(LaunchDevice* d);

// CUDA runtime version the kernel library was linked with (e.g. 13000).
int cuda_runtime_version();

}  // namespace trt_fastops
