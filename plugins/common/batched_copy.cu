// launch_batched_copy (device_memory.h): stage_copies' device-to-device copies as one kernel.
// A graph's inputs are small (token ids, masks: a few KB each); as cudaMemcpyAsync each one is a
// copy-engine round trip, and stage_copies then waits for the last of them before the replay.
#include <algorithm>
#include <cstdint>

#include "plugins/common/device_memory.h"

namespace trt_fastops {
namespace {

constexpr int MAX_ITEMS = 8;  // copies per launch (kernel parameters stay small)
constexpr int BLOCK = 256;
constexpr int MAX_BLOCKS = 1024;  // per copy; larger copies loop grid-stride

struct CopyItems {
  char* dst[MAX_ITEMS];
  const char* src[MAX_ITEMS];
  size_t bytes[MAX_ITEMS];
};

// blockIdx.y picks the copy. 16-byte vectors where both ends are 16-byte aligned (every
// allocator's buffers are), bytes for the tail or for unaligned ends.
__global__ void __launch_bounds__(BLOCK) batched_copy_kernel(const CopyItems items) {
  char* dst = items.dst[blockIdx.y];
  const char* src = items.src[blockIdx.y];
  const size_t bytes = items.bytes[blockIdx.y];
  const size_t stride = size_t(gridDim.x) * BLOCK;
  const size_t tid = size_t(blockIdx.x) * BLOCK + threadIdx.x;
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const size_t vectors = bytes / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (size_t v = tid; v < vectors; v += stride) d[v] = s[v];
    done = vectors * 16;
  }
  for (size_t b = done + tid; b < bytes; b += stride) dst[b] = src[b];
}

}  // namespace

cudaError_t launch_batched_copy(const CopySpan* spans, size_t count, cudaStream_t stream) {
  for (size_t first = 0; first < count; first += MAX_ITEMS) {
    CopyItems items{};
    const int n = int(std::min<size_t>(MAX_ITEMS, count - first));
    size_t largest = 0;
    for (int i = 0; i < n; ++i) {
      const CopySpan& s = spans[first + i];
      if (s.bytes > 0 && (s.dst == nullptr || s.src == nullptr)) return cudaErrorInvalidValue;
      items.dst[i] = static_cast<char*>(s.dst);
      items.src[i] = static_cast<const char*>(s.src);
      items.bytes[i] = s.bytes;
      largest = std::max(largest, s.bytes);
    }
    if (largest == 0) continue;
    const size_t per_block = size_t(BLOCK) * 16;
    const unsigned blocks = unsigned(std::min<size_t>(MAX_BLOCKS, (largest + per_block - 1) / per_block));
    batched_copy_kernel<<<dim3(blocks, unsigned(n)), BLOCK, 0, stream>>>(items);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace trt_fastops
