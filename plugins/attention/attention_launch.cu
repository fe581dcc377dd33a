// Attention launcher: validates AttentionParams, picks the kernel variant
// (dtype, head-dim bucket, aligned rows) and launches it.
#include "plugins/attention/attention.h"

namespace trt_fastops::attention {

const char* attention_unsupported_reason(const AttentionParams& p) {
  if (p.dtype != DType::f16 && p.dtype != DType::bf16)
    return "the CUDA kernel supports float16 and bfloat16 only";
  if (p.batch < 0 || p.q_heads < 0 || p.kv_heads < 0 || p.q_len < 0 || p.kv_len < 0)
    return "negative size";
  if (p.head_dim < 1 || p.head_dim > ATTENTION_MAX_HEAD_DIM || p.v_head_dim < 1 ||
      p.v_head_dim > ATTENTION_MAX_HEAD_DIM)
    return "head dims must be in [1, 256]";
  if (p.kv_heads == 0 ? p.q_heads != 0 : p.q_heads % p.kv_heads != 0)
    return "q_heads must be a multiple of kv_heads";
  if (p.mask_kind == MaskKind::additive && p.mask_dtype != DType::f32 && p.mask_dtype != DType::f16 &&
      p.mask_dtype != DType::bf16)
    return "unsupported additive mask dtype";
  if (p.mask_kind != MaskKind::none && p.mask == nullptr && p.mask_kv_len > 0) return "mask is null";
  return nullptr;
}

const char* attention_kernel_name(const AttentionParams& p) {
  if (attention_unsupported_reason(p) != nullptr) return "unsupported";
  return "not_implemented";
}

cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream) {
  (void)stream;
  if (attention_unsupported_reason(p) != nullptr) return cudaErrorInvalidValue;
  return cudaErrorNotSupported;  // kernel lands in the next commit
}

}  // namespace trt_fastops::attention
