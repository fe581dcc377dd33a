// Attention launcher: validates AttentionParams, picks the kernel variant
// (dtype, head-dim bucket, 16-byte aligned rows or not) and launches it.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_kernels.cuh"
#include "plugins/common/dispatch.cuh"

namespace trt_fastops::attention {
namespace {

// Tile shapes per head-dim bucket: 128 query rows per CTA, 8 warps of 16 rows
// (two 16-row tiles per warp spill at 255 registers for d128); keys per step
// shrink with the head dim to keep the accumulators in registers.
using Config64 = FlashConfig<64, 128, 64, 8>;
using Config128 = FlashConfig<128, 128, 64, 8>;
using Config256 = FlashConfig<256, 128, 32, 8>;

int head_dim_bucket(const AttentionParams& p) {
  const int64_t d = std::max(p.head_dim, p.v_head_dim);
  return d <= 64 ? 64 : d <= 128 ? 128 : 256;
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

bool view_aligned(const void* ptr, const TensorView& v) {
  return aligned16(ptr) && v.stride_b % 8 == 0 && v.stride_h % 8 == 0 && v.stride_s % 8 == 0;
}

// cp.async moves 16-byte chunks: every row start must be 16-byte aligned and
// the head dims whole chunks.
bool rows_aligned(const AttentionParams& p) {
  return p.head_dim % 8 == 0 && p.v_head_dim % 8 == 0 && view_aligned(p.q, p.q_view) &&
         view_aligned(p.k, p.k_view) && view_aligned(p.v, p.v_view) && view_aligned(p.out, p.out_view);
}

bool fits_int(int64_t n) { return n >= 0 && n <= INT32_MAX; }

FlashArgs make_args(const AttentionParams& p, int block_m) {
  FlashArgs a{};
  a.q = p.q;
  a.k = p.k;
  a.v = p.v;
  a.out = p.out;
  a.lse = p.lse;
  a.q_sb = p.q_view.stride_b, a.q_sh = p.q_view.stride_h, a.q_ss = p.q_view.stride_s;
  a.k_sb = p.k_view.stride_b, a.k_sh = p.k_view.stride_h, a.k_ss = p.k_view.stride_s;
  a.v_sb = p.v_view.stride_b, a.v_sh = p.v_view.stride_h, a.v_ss = p.v_view.stride_s;
  a.o_sb = p.out_view.stride_b, a.o_sh = p.out_view.stride_h, a.o_ss = p.out_view.stride_s;
  a.q_heads = int(p.q_heads);
  a.group = int(p.q_heads / p.kv_heads);
  a.q_len = int(p.q_len);
  a.kv_len = int(p.kv_len);
  a.head_dim = int(p.head_dim);
  a.v_head_dim = int(p.v_head_dim);
  a.bh_count = int(p.batch * p.q_heads);
  a.m_blocks = int((p.q_len + block_m - 1) / block_m);
  a.scale_log2 = p.scale * LOG2E;
  a.softcap = p.softcap;
  a.scale_softcap = p.softcap > 0.f ? p.scale / p.softcap : 0.f;
  a.causal = p.causal ? 1 : 0;
  a.causal_offset = p.causal_offset;
  a.mask_kind = static_cast<int>(p.mask_kind);
  a.mask_dtype = static_cast<int>(p.mask_dtype);
  a.mask = p.mask;
  a.m_sb = p.mask_stride_b, a.m_sh = p.mask_stride_h, a.m_sq = p.mask_stride_q, a.m_sk = p.mask_stride_k;
  a.mask_kv_len = p.mask_kind == MaskKind::none ? p.kv_len : std::max<int64_t>(p.mask_kv_len, 0);
  return a;
}

constexpr int MAX_DEVICES = 64;

// Opting a kernel into more than 48 KiB of dynamic shared memory is per device.
template <typename Kernel>
cudaError_t allow_smem(Kernel kernel, int bytes) {
  static std::atomic<bool> done[MAX_DEVICES];
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= 0 && device < MAX_DEVICES && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess && device >= 0 && device < MAX_DEVICES) done[device].store(true, std::memory_order_release);
  return err;
}

template <typename T, typename CFG, bool ALIGNED>
cudaError_t launch_flash(const AttentionParams& p, cudaStream_t stream) {
  const FlashArgs a = make_args(p, CFG::BLOCK_M);
  auto kernel = flash_fwd_kernel<T, CFG, ALIGNED>;
  cudaError_t err = allow_smem(kernel, CFG::SMEM_BYTES);
  if (err != cudaSuccess) return err;
  const int64_t blocks = int64_t(a.m_blocks) * a.bh_count;
  kernel<<<unsigned(blocks), CFG::THREADS, CFG::SMEM_BYTES, stream>>>(a);
  return cudaGetLastError();
}

template <typename F>
auto dispatch_config(int bucket, F&& f) {
  return dispatch_int<64, 128, 256>(bucket, [&](auto D) {
    if constexpr (D.value == 64) return f(TypeTag<Config64>{});
    else if constexpr (D.value == 128) return f(TypeTag<Config128>{});
    else return f(TypeTag<Config256>{});
  });
}

}  // namespace

const char* attention_unsupported_reason(const AttentionParams& p) {
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) return "the CUDA kernel supports float16 and bfloat16 only";
  if (p.batch < 0 || p.q_heads < 0 || p.kv_heads < 0 || p.q_len < 0 || p.kv_len < 0) return "negative size";
  if (p.head_dim < 1 || p.head_dim > ATTENTION_MAX_HEAD_DIM || p.v_head_dim < 1 ||
      p.v_head_dim > ATTENTION_MAX_HEAD_DIM)
    return "head dims must be in [1, 256]";
  if (p.kv_heads == 0 ? p.q_heads != 0 : p.q_heads % p.kv_heads != 0) return "q_heads must be a multiple of kv_heads";
  if (!fits_int(p.q_len) || !fits_int(p.kv_len) || !fits_int(p.batch * p.q_heads) ||
      !fits_int(((p.q_len + 127) / 128) * p.batch * p.q_heads))
    return "too many rows or heads for one launch (limit 2^31 - 1)";
  if (p.mask_kind == MaskKind::additive && p.mask_dtype != DType::f32 && p.mask_dtype != DType::f16 &&
      p.mask_dtype != DType::bf16)
    return "unsupported additive mask dtype";
  if (p.mask_kind != MaskKind::none && p.mask == nullptr && p.mask_kv_len > 0) return "the mask pointer is null";
  const bool empty = p.batch == 0 || p.q_heads == 0 || p.q_len == 0;
  if (!empty && (p.q == nullptr || p.out == nullptr || (p.kv_len > 0 && (p.k == nullptr || p.v == nullptr))))
    return "a tensor pointer is null";
  return nullptr;
}

const char* attention_kernel_name(const AttentionParams& p) {
  if (attention_unsupported_reason(p) != nullptr) return "unsupported";
  static const char* const NAMES[2][3][2] = {
      {{"flash_fwd<float16,d64,m128,n64,w8,unaligned>", "flash_fwd<float16,d64,m128,n64,w8>"},
       {"flash_fwd<float16,d128,m128,n64,w8,unaligned>", "flash_fwd<float16,d128,m128,n64,w8>"},
       {"flash_fwd<float16,d256,m128,n32,w8,unaligned>", "flash_fwd<float16,d256,m128,n32,w8>"}},
      {{"flash_fwd<bfloat16,d64,m128,n64,w8,unaligned>", "flash_fwd<bfloat16,d64,m128,n64,w8>"},
       {"flash_fwd<bfloat16,d128,m128,n64,w8,unaligned>", "flash_fwd<bfloat16,d128,m128,n64,w8>"},
       {"flash_fwd<bfloat16,d256,m128,n32,w8,unaligned>", "flash_fwd<bfloat16,d256,m128,n32,w8>"}}};
  const int bucket = head_dim_bucket(p);
  return NAMES[p.dtype == DType::bf16][bucket == 64 ? 0 : bucket == 128 ? 1 : 2][rows_aligned(p)];
}

cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream) {
  if (attention_unsupported_reason(p) != nullptr) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.q_heads == 0 || p.q_len == 0) return cudaSuccess;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      return dispatch_config(head_dim_bucket(p), [&](auto cfg) {
        using CFG = typename decltype(cfg)::type;
        return dispatch_bool(rows_aligned(p), [&](auto ALIGNED) {
          return launch_flash<T, CFG, ALIGNED.value>(p, stream);
        });
      });
    }
  });
}

}  // namespace trt_fastops::attention
