// CPU reference for the Attention op: the same AttentionParams as
// launch_attention (attention.h, which defines the math), with host pointers.
// Straightforward and exact: float64 dot products, softmax and sums over
// float32 / float16 / bfloat16 inputs. The ORT CPU kernel and the tests use
// it. Framework-free.
#pragma once

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_copy.h"
#include "plugins/common/status.h"

namespace trt_fastops::attention {

// Computes every output row as launch_attention would (fully masked rows ->
// zeros; lse when p.lse is set). Checks the params first (sizes, head
// mapping, pointers for tensors that hold data) and returns an error naming
// the bad field instead of touching memory.
Status cpu_attention(const AttentionParams& p);

// Same, for output rows [row_begin, row_end) only, a row being one
// (batch, q_head, query) triple in that order (for callers that split the work
// across threads). The params are checked as a whole.
Status cpu_attention_rows(const AttentionParams& p, int64_t row_begin, int64_t row_end);
// Number of output rows: batch * q_heads * q_len.
int64_t cpu_attention_row_count(const AttentionParams& p);

// Host version of launch_attention_copy (attention_copy.h).
Status cpu_attention_copy(const AttentionCopy& c);

}  // namespace trt_fastops::attention
