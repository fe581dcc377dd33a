// Framework-free launcher for EmbedLayerNorm: BERT's embedding lookups, their sum and its
// layer norm in one kernel (the semantics: embed_op.h). Adapters fill one EmbedParams and
// call launch_embed_norm; nothing here knows about any framework.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"

namespace trt_fastops::norm {

enum class IndexType : int32_t { i32 = 0, i64 = 1 };

// Per token t of [batch, seq], at position s = t % seq (all arithmetic float32):
//   e    = word[ids[t]] + position[pos(t)] (+ segment[segment_ids[t]])
//   pos(t) = position_ids[position_id_rows == 1 ? s : t], or s without position_ids
//   y[t] = (e - mean(e)) / sqrt(mean((e - mean)^2) + epsilon) * gamma + beta   (beta optional)
// An index i into a table of n rows may be negative (i + n, as in ONNX Gather); a token with
// any index outside [-n, n) gets a row of NaN (device code cannot raise; the CPU reference
// refuses such inputs instead).
struct EmbedParams {
  DType dtype = DType::f32;  // of the tables, gamma, beta and y

  const void* ids = nullptr;           // [batch, seq]
  const void* segment_ids = nullptr;   // [batch, seq] or null (then no segment table)
  const void* position_ids = nullptr;  // [position_id_rows, seq] or null
  IndexType ids_type = IndexType::i64, segment_type = IndexType::i64, position_type = IndexType::i64;

  const void* word = nullptr;      // [word_rows, hidden]
  const void* position = nullptr;  // [position_rows, hidden]
  const void* segment = nullptr;   // [segment_rows, hidden], with segment_ids
  const void* gamma = nullptr;     // [hidden]
  const void* beta = nullptr;      // [hidden] or null
  void* y = nullptr;               // [batch, seq, hidden]

  int64_t batch = 0, seq = 0, hidden = 0;
  int64_t word_rows = 0, position_rows = 0, segment_rows = 0;
  int64_t position_id_rows = 1;  // 1 or batch
  float epsilon = 1e-5f;
};

// Enqueues the kernel on `stream`. Never synchronises, never allocates (safe under CUDA-graph
// capture). cudaErrorInvalidValue for inconsistent params, else cudaGetLastError() after the
// launch. batch * seq == 0 is a no-op.
cudaError_t launch_embed_norm(const EmbedParams& p, cudaStream_t stream);

}  // namespace trt_fastops::norm
