// A C entry point to FlashAttention-3's Hopper forward (Dao-AILab/flash-attention,
// hopper/), so bench_attention can time it beside ours without torch's extension
// build: FA3's own run_mha_fwd_ instantiations, its Flash_fwd_params filled as its
// flash_api.cpp fills them for dense [B, S, H, D] inputs (no varlen, paging, split,
// softcap or GQA packing). FA3's sources are fetched, never committed; see
// scripts/build_fa3.sh.
#include <cstdint>
#include <cstring>

#include <cuda_runtime_api.h>

#include "cutlass/numeric_types.h"
#include "flash.h"

namespace {

template <typename T>
void run(Flash_fwd_params& p, cudaStream_t stream) {
  if (p.d == 64) {
    run_mha_fwd_<90, T, 64, 64, false, false, false, false>(p, stream);
  } else if (p.d == 128) {
    run_mha_fwd_<90, T, 128, 128, false, false, false, false>(p, stream);
  } else {
    run_mha_fwd_<90, T, 256, 256, false, false, false, false>(p, stream);
  }
}

}  // namespace

// q, k, v, out: [b, s, h, d] with rows h * d apart (bshd, contiguous); lse: [b, h, sq]
// float32; semaphore: one int of device memory (the causal scheduler's tile counter,
// zeroed here before each call as flash_api.cpp does). Returns a cudaError_t:
// cudaErrorInvalidValue for shapes this build has no kernel for. A failed launch
// inside FA3 ends the process (its cuda_check.h calls exit): a benchmark tool only.
extern "C" int fa3_fwd(const void* q, const void* k, const void* v, void* out, float* lse, int* semaphore, int b,
                       int sq, int sk, int h, int hk, int d, int bf16, int causal, int num_sm, void* stream_ptr) {
  if ((d != 64 && d != 128 && d != 256) || b <= 0 || sq <= 0 || sk <= 0 || hk <= 0 || h % hk != 0 || num_sm <= 0)
    return int(cudaErrorInvalidValue);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  Flash_fwd_params p;
  std::memset(&p, 0, sizeof(p));
  p.is_bf16 = bf16 != 0;
  p.q_ptr = const_cast<void*>(q);
  p.k_ptr = const_cast<void*>(k);
  p.v_ptr = const_cast<void*>(v);
  p.o_ptr = out;
  p.q_row_stride = int64_t(h) * d;
  p.k_row_stride = int64_t(hk) * d;
  p.v_row_stride = int64_t(hk) * d;
  p.o_row_stride = int64_t(h) * d;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = d;
  p.v_dim_stride = 1;
  p.q_batch_stride = int64_t(sq) * h * d;
  p.o_batch_stride = int64_t(sq) * h * d;
  p.k_batch_stride = int64_t(sk) * hk * d;
  p.v_batch_stride = int64_t(sk) * hk * d;
  p.softmax_lse_ptr = lse;
  p.b = b;
  p.b_k = b;
  p.h = h;
  p.h_k = hk;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.seqlen_q_rounded = (sq + 127) / 128 * 128;
  p.seqlen_k_rounded = (sk + 127) / 128 * 128;
  p.d = p.d_rounded = d;
  p.dv = p.dv_rounded = d;
  p.scale_softmax = 1.0f / __builtin_sqrtf(float(d));
  p.softcap = 0.f;
  p.p_dropout = 1.f;
  p.rp_dropout = 1.f;
  p.p_dropout_in_uint8_t = 255;
  p.is_causal = causal != 0;
  p.is_local = false;
  p.window_size_left = sk - 1;
  p.window_size_right = causal ? 0 : sq - 1;
  p.attention_chunk = 0;
  p.page_size = 1;
  p.num_splits = 1;
  p.pack_gqa = false;
  p.arch = 90;
  p.num_sm = num_sm;
  p.varlen_sort_batches = true;
  p.head_swizzle = p.is_causal;
  if (p.is_causal) {
    if (const cudaError_t err = cudaMemsetAsync(semaphore, 0, sizeof(int), stream); err != cudaSuccess) return int(err);
    p.tile_count_semaphore = semaphore;
  }
  if (p.is_bf16) {
    run<cutlass::bfloat16_t>(p, stream);
  } else {
    run<cutlass::half_t>(p, stream);
  }
  return int(cudaGetLastError());
}
