// Device queries, exported by the kernel library (the only one linking cudart)
// so the Python module and adapters never call the CUDA runtime themselves.
#pragma once

#include <cstdint>
#include <string>

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

// CUDA runtime version the kernel library was linked with (e.g. 13000).
int cuda_runtime_version();

}  // namespace trt_fastops
