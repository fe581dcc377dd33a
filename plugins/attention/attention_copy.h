// Strided copy of a [batch, heads, seq, dim] view into another, used by the
// Attention adapters to build present_key / present_value = concat(past, new)
// along seq (and to lay a 3-D K / V out as 4-D). Framework-free; the CUDA
// launcher lives in the kernel library (the only one linking cudart), the host
// version is cpu_attention_copy (attention_cpu.h).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/attention/attention.h"
#include "plugins/common/dtype.h"

namespace trt_fastops::attention {

// dst[b, h, s, d] = src[b, h, s, d] for every index; both views have a
// contiguous last dim, strides in elements (TensorView). dst already points
// at the first destination row (e.g. seq offset past_len of present_key).
struct AttentionCopy {
  DType dtype = DType::f16;
  const void* src = nullptr;
  TensorView src_view;
  void* dst = nullptr;
  TensorView dst_view;
  int64_t batch = 0, heads = 0, seq = 0, dim = 0;
};

// Enqueues the copy on `stream` (no allocation, no synchronisation: safe
// under CUDA-graph capture). An empty copy is a no-op. Returns
// cudaErrorInvalidValue for null pointers or negative sizes, else
// cudaGetLastError() after the launch.
cudaError_t launch_attention_copy(const AttentionCopy& c, cudaStream_t stream);

}  // namespace trt_fastops::attention
