// CPU reference for EmbedLayerNorm: the same EmbedParams as launch_embed_norm, with host
// pointers. The embedding sum in float32 in the kernel's order (word + position + segment),
// statistics in float64; Y rounded once. Unlike the kernel it refuses an index out of range,
// naming the input and the token. The ORT CPU kernel and the tests use it. Framework-free.
#pragma once

#include "plugins/common/status.h"
#include "plugins/norm/embed.h"

namespace trt_fastops::norm {

Status run_embed_cpu(const EmbedParams& p);

// Tokens [begin, end) of [0, batch * seq) only (for callers that split the work across threads).
Status run_embed_cpu_tokens(const EmbedParams& p, int64_t begin, int64_t end);

}  // namespace trt_fastops::norm
