// present_key / present_value building block: one strided [B, H, S, D] copy
// (see attention_copy.h). Bandwidth-bound and small next to the attention
// itself, so one simple kernel: a block per row group, threads over dim,
// elements moved as raw 2- or 4-byte words (no arithmetic on them).
#include "plugins/attention/attention_copy.h"

#include <algorithm>

namespace trt_fastops::attention {
namespace {

constexpr int COPY_THREADS = 128;

template <typename WORD>
__global__ void attention_copy_kernel(const WORD* __restrict__ src, TensorView src_view, WORD* __restrict__ dst,
                                      TensorView dst_view, int64_t heads, int64_t seq, int64_t dim, int64_t rows) {
  const int64_t threads_per_row = dim < COPY_THREADS ? dim : COPY_THREADS;
  const int64_t rows_per_block = COPY_THREADS / threads_per_row;
  const int64_t lane = threadIdx.x % threads_per_row;
  const int64_t sub = threadIdx.x / threads_per_row;
  if (sub >= rows_per_block) return;
  for (int64_t row = int64_t(blockIdx.x) * rows_per_block + sub; row < rows;
       row += int64_t(gridDim.x) * rows_per_block) {
    const int64_t s = row % seq;
    const int64_t h = (row / seq) % heads;
    const int64_t b = row / (seq * heads);
    const WORD* in = src + b * src_view.stride_b + h * src_view.stride_h + s * src_view.stride_s;
    WORD* out = dst + b * dst_view.stride_b + h * dst_view.stride_h + s * dst_view.stride_s;
    for (int64_t d = lane; d < dim; d += threads_per_row) out[d] = in[d];
  }
}

}  // namespace

cudaError_t launch_attention_copy(const AttentionCopy& c, cudaStream_t stream) {
  if (c.batch < 0 || c.heads < 0 || c.seq < 0 || c.dim < 0) return cudaErrorInvalidValue;
  if (c.batch == 0 || c.heads == 0 || c.seq == 0 || c.dim == 0) return cudaSuccess;
  if (c.src == nullptr || c.dst == nullptr) return cudaErrorInvalidValue;
  const int64_t rows = c.batch * c.heads * c.seq;
  const int64_t threads_per_row = std::min<int64_t>(c.dim, COPY_THREADS);
  const int64_t rows_per_block = COPY_THREADS / threads_per_row;
  const int64_t blocks = std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, 65535 * 8);
  if (dtype_size(c.dtype) == 4) {
    attention_copy_kernel<uint32_t><<<unsigned(blocks), COPY_THREADS, 0, stream>>>(
        static_cast<const uint32_t*>(c.src), c.src_view, static_cast<uint32_t*>(c.dst), c.dst_view, c.heads, c.seq,
        c.dim, rows);
  } else {
    attention_copy_kernel<uint16_t><<<unsigned(blocks), COPY_THREADS, 0, stream>>>(
        static_cast<const uint16_t*>(c.src), c.src_view, static_cast<uint16_t*>(c.dst), c.dst_view, c.heads, c.seq,
        c.dim, rows);
  }
  return cudaGetLastError();
}

}  // namespace trt_fastops::attention
