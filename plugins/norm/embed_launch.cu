// Launcher for EmbedLayerNorm (embed.h): one CTA per token, the norm family's generic row
// body (norm_kernels.cuh) over rows gathered by index, with the generic norm path's CTA size;
// the row is cached in shared memory when it fits the default 48 KiB, else re-read per pass. At BERT's sizes (hidden 768, 128..16384
// tokens) this one kernel replaces three Gathers, an Add, a position-id copy and the
// SkipLayerNorm of the exported graph (replay_phases.py, bench/NOTES-dense.md).
#include <cstdint>
#include <limits>

#include "plugins/common/dispatch.cuh"
#include "plugins/norm/embed.h"
#include "plugins/norm/norm_kernels.cuh"

namespace trt_fastops::norm {
namespace {

constexpr int64_t kCacheBytes = 48 * 1024 - 1024;  // default dynamic smem, less the static scratch

bool params_valid(const EmbedParams& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16) return false;
  if (p.batch < 0 || p.seq < 0 || p.hidden <= 0) return false;
  if (p.batch == 0 || p.seq == 0) return true;  // nothing is read or written
  if (p.batch > std::numeric_limits<int64_t>::max() / p.seq) return false;
  if ((p.batch * p.seq) > std::numeric_limits<int64_t>::max() / p.hidden) return false;
  if (p.ids == nullptr || p.word == nullptr || p.position == nullptr || p.gamma == nullptr || p.y == nullptr)
    return false;
  if (p.word_rows <= 0 || p.position_rows <= 0) return false;
  if (p.segment_ids != nullptr && (p.segment == nullptr || p.segment_rows <= 0)) return false;
  if (p.position_ids != nullptr && p.position_id_rows != 1 && p.position_id_rows != p.batch) return false;
  return true;
}

}  // namespace

cudaError_t launch_embed_norm(const EmbedParams& p, cudaStream_t stream) {
  if (!params_valid(p)) return cudaErrorInvalidValue;
  const int64_t tokens = p.batch * p.seq;
  if (tokens == 0) return cudaSuccess;
  const int block = generic_block_dim(p.hidden);
  const bool cache = p.hidden * int64_t(sizeof(float)) <= kCacheBytes;
  const unsigned grid = norm_grid_for(tokens);
  const size_t smem = cache ? size_t(p.hidden) * sizeof(float) : 0;
  EmbedIndices ix;
  ix.ids = p.ids;
  ix.segment_ids = p.segment_ids;
  ix.position_ids = p.position_ids;
  ix.ids64 = p.ids_type == IndexType::i64;
  ix.segment64 = p.segment_type == IndexType::i64;
  ix.position64 = p.position_type == IndexType::i64;
  ix.seq = p.seq;
  ix.position_id_rows = p.position_id_rows;
  ix.word_rows = p.word_rows;
  ix.position_rows = p.position_rows;
  ix.segment_rows = p.segment_ids != nullptr ? p.segment_rows : 1;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    NormArgs<T> a{};
    a.gamma = static_cast<const T*>(p.gamma);
    a.beta = static_cast<const T*>(p.beta);
    a.y = static_cast<T*>(p.y);
    a.rows = tokens;
    a.cols = p.hidden;
    a.skip_rows = 1;
    a.epsilon = p.epsilon;
    a.inv_cols = static_cast<float>(1.0 / static_cast<double>(p.hidden));
    const T* word = static_cast<const T*>(p.word);
    const T* position = static_cast<const T*>(p.position);
    const T* segment = static_cast<const T*>(p.segment);
    return dispatch_bool(cache, [&](auto CACHE) {
      return dispatch_block_dim<kGenericSmallBlock, kGenericBlock>(block, [&](auto BLOCK) {
        embed_norm_kernel<T, BLOCK.value, CACHE.value><<<grid, BLOCK.value, smem, stream>>>(a, word, position,
                                                                                            segment, ix);
        return cudaGetLastError();
      });
    });
  });
}

}  // namespace trt_fastops::norm
