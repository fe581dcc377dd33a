// Streams, device buffers and copies, exported by the kernel library (the only
// one linking cudart) for runners that need them without a framework: the
// pybind11 module's DeviceBuffer / CudaStream (TensorRT engines, ORT staging
// copies), never op adapters (ORT and TensorRT hand those their memory).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "plugins/common/status.h"

namespace trt_fastops {

// Makes `device` current for the calling thread and restores the previous
// device on destruction (so callers on torch/ORT threads keep their device).
class DeviceGuard {
 public:
  DeviceGuard() = default;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  Status set(int device);

 private:
  int previous_ = -1;
};

Status device_malloc(int device, size_t bytes, void** ptr);  // bytes == 0 -> *ptr = nullptr
Status device_free(int device, void* ptr);  // nullptr is fine
Status stream_create(int device, cudaStream_t* stream);  // non-blocking stream
Status stream_destroy(int device, cudaStream_t stream);
Status stream_synchronize(int device, cudaStream_t stream);
Status device_synchronize(int device);

// cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) on `device`
// (host or device pointers, any direction: unified addressing tells which);
// with wait, also waits for the stream, so the copy is complete on return.
Status copy_bytes(int device, void* dst, const void* src, size_t bytes, cudaStream_t stream, bool wait);

// One input staging step: waits for all work on `device` (whatever stream produced the
// sources), then copies each (dst, src, bytes) on the legacy default stream and waits for them
// once. What a graph replay needs before it reads fixed buffers. dst is device memory of
// `device`; src_device says where src is: `device` (the copies from there go as one kernel,
// launch_batched_copy) or anything else (-1: host memory; cudaMemcpyAsync, cudaMemcpyDefault).
// Spans must not overlap one another.
struct CopySpan {
  void* dst;
  const void* src;
  size_t bytes;
  int src_device = -1;
};
Status stage_copies(int device, const CopySpan* copies, size_t count);

// Enqueues the copies (dst and src both device memory of the current device, not
// overlapping) as one kernel per 8 copies on `stream`; cudaErrorInvalidValue for a null
// pointer, else cudaGetLastError() after the launches. Never synchronises.
cudaError_t launch_batched_copy(const CopySpan* spans, size_t count, cudaStream_t stream);

// Sets *device to the device `ptr` lives on, or -1 for host memory cudart
// does not know (pageable) or registered host memory.
Status pointer_device(const void* ptr, int* device);

}  // namespace trt_fastops
