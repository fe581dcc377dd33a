// Programmatic dependent launch (PDL, compute capability 9.0+), host side.
//
// A kernel launched with cudaLaunchAttributeProgrammaticStreamSerialization
// may be dispatched, and run its prologue (barrier setup, descriptor
// prefetch), while the kernel before it on the stream finishes: its
// griddepcontrol.wait (pdl_wait, cuda_utils.cuh) then blocks until that kernel
// has completed and its writes are visible. Between short kernels this hides
// most of the launch latency (BERT batch 1 runs ~90 kernels of a few
// microseconds each, ~2 us apart without it). Under CUDA-graph capture the
// launch becomes a programmatic edge of the graph.
//
// Contract of a kernel launched this way: pdl_wait() before its first
// global-memory access, reads and writes alike (the kernel before it may still
// be reading the buffer this one writes). pdl_launch_dependents() lets the
// next PDL kernel be dispatched early; it only affects timing.
//
// TRT_FASTOPS_PDL=0 (read once) launches everything without the attribute.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <cuda_runtime.h>

namespace trt_fastops {

inline bool pdl_enabled_by_env() {
  static const bool on = [] {
    const char* v = std::getenv("TRT_FASTOPS_PDL");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

// Whether `kernel` may be launched with PDL on `device` (the current one): the
// environment allows it and the kernel's code for this device is sm_90 or
// newer, so it holds its pdl_wait (a build without sm_90 code, JIT-compiled
// from older PTX, does not). Cached per call site in `cache`: two bits per
// device (asked, allowed); devices beyond 31 are not cached and get no PDL.
template <typename KERNEL>
bool pdl_allowed(KERNEL kernel, int device, std::atomic<uint64_t>& cache) {
  if (!pdl_enabled_by_env() || device < 0 || device >= 32) return false;
  const uint64_t asked = uint64_t(1) << (2 * device), allowed = asked << 1;
  uint64_t bits = cache.load(std::memory_order_relaxed);
  if ((bits & asked) == 0) {
    cudaFuncAttributes fa{};
    const cudaError_t err = cudaFuncGetAttributes(&fa, kernel);
    if (err != cudaSuccess) (void)cudaGetLastError();  // this query's own error, not the caller's
    const bool ok = err == cudaSuccess && fa.binaryVersion >= 90;
    bits = cache.fetch_or(asked | (ok ? allowed : 0), std::memory_order_relaxed) | asked | (ok ? allowed : 0);
  }
  return (bits & allowed) != 0;
}

// kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when
// `pdl`. Returns the launch's error.
template <typename... KARGS, typename... ARGS>
cudaError_t launch_maybe_pdl(void (*kernel)(KARGS...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                             bool pdl, ARGS&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<ARGS>(args)...);
}

}  // namespace trt_fastops
