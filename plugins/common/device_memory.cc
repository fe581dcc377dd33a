#include "plugins/common/device_memory.h"

#include <vector>

#include "plugins/common/cuda_status.h"

namespace trt_fastops {

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
    cudaGetLastError();  // a failed restore must not show up as some later launch's error
  }
}

Status DeviceGuard::set(int device) {
  if (device < 0) return Status::errorf("device ", device, " is not a CUDA device index");
  int current = -1;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&current), "cudaGetDevice"));
  if (previous_ < 0) previous_ = current;
  if (current == device) return Status::ok();
  const cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::errorf("cudaSetDevice(", device, ") failed: ", cuda_error_string(err));
  }
  return Status::ok();
}

Status device_malloc(int device, size_t bytes, void** ptr) {
  *ptr = nullptr;
  if (bytes == 0) return Status::ok();
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  const cudaError_t err = cudaMalloc(ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    *ptr = nullptr;
    return Status::errorf("cudaMalloc(", bytes, " bytes) on device ", device, " failed: ", cuda_error_string(err));
  }
  return Status::ok();
}

Status device_free(int device, void* ptr) {
  if (ptr == nullptr) return Status::ok();
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  return cuda_status(cudaFree(ptr), "cudaFree");
}

Status stream_create(int device, cudaStream_t* stream) {
  *stream = nullptr;
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  return cuda_status(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}

Status stream_destroy(int device, cudaStream_t stream) {
  if (stream == nullptr) return Status::ok();
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  return cuda_status(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

Status stream_synchronize(int device, cudaStream_t stream) {
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  return cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

Status device_synchronize(int device) {
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

Status copy_bytes(int device, void* dst, const void* src, size_t bytes, cudaStream_t stream, bool wait) {
  if (bytes == 0) return Status::ok();
  if (dst == nullptr || src == nullptr) return Status::errorf("copy_bytes: null pointer for a ", bytes, "-byte copy");
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  if (err == cudaSuccess && wait) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::errorf("copy of ", bytes, " bytes on device ", device, " failed: ", cuda_error_string(err));
  }
  return Status::ok();
}

Status stage_copies(int device, const CopySpan* copies, size_t count) {
  std::vector<CopySpan> on_device;
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].bytes && (copies[i].dst == nullptr || copies[i].src == nullptr))
      return Status::errorf("stage_copies: null pointer in copy ", i, " (", copies[i].bytes, " bytes)");
    if (copies[i].bytes && copies[i].dst != copies[i].src && copies[i].src_device == device)
      on_device.push_back(copies[i]);
  }
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(device));
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(launch_batched_copy(on_device.data(), on_device.size(), 0),
                                          "stage_copies: launch_batched_copy"));
  for (size_t i = 0; i < count; ++i) {
    if (copies[i].bytes == 0 || copies[i].dst == copies[i].src || copies[i].src_device == device) continue;
    cudaError_t err = cudaMemcpyAsync(copies[i].dst, copies[i].src, copies[i].bytes, cudaMemcpyDefault, 0);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return Status::errorf("stage_copies: copy ", i, " of ", copies[i].bytes, " bytes on device ", device,
                            " failed: ", cuda_error_string(err));
    }
  }
  return cuda_status(cudaStreamSynchronize(0), "cudaStreamSynchronize");
}

Status pointer_device(const void* ptr, int* device) {
  *device = -1;
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cuda_status(err, "cudaPointerGetAttributes");
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) *device = attr.device;
  return Status::ok();
}

}  // namespace trt_fastops
