// Attention launcher: validates AttentionParams, picks the kernel variant
// (dtype, head-dim bucket, 16-byte aligned rows or not) and launches it.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_kernels.cuh"
#include "plugins/common/dispatch.cuh"
#include "plugins/common/status.h"

namespace trt_fastops::attention {
namespace {

// Tile variants per head-dim bucket: Variants[0] is the default (also for
// unaligned rows), Masked serves inputs with an attn_mask, the other variants
// exist for the benchmark's tile sweep (attention_set_tile_variant).
// FlashConfig<D, BLOCK_M, BLOCK_N, WARPS, CTAs/SM>; BLOCK_M / (16 * WARPS) is
// the number of 16-row MMA tiles per warp (2 shares each K/V fragment between
// two tiles: half the shared-memory traffic of 1).
struct Tiles64 {
  using Masked = FlashConfig<64, 128, 64, 4, 2>;
  using Variants = std::tuple<FlashConfig<64, 128, 128, 4, 1>, FlashConfig<64, 128, 64, 4, 2>,
                              FlashConfig<64, 128, 64, 8, 2>, FlashConfig<64, 64, 64, 4, 4>>;
};
struct Tiles128 {
  using Masked = FlashConfig<128, 128, 32, 4, 2>;  // the mask code would spill at 128 x 64
  using Variants = std::tuple<FlashConfig<128, 128, 64, 4, 1>, FlashConfig<128, 128, 32, 4, 2>,
                              FlashConfig<128, 128, 64, 8, 1>, FlashConfig<128, 64, 64, 4, 2>>;
};
struct Tiles256 {
  using Masked = FlashConfig<256, 128, 32, 8, 1>;
  using Variants = std::tuple<FlashConfig<256, 128, 32, 8, 1>, FlashConfig<256, 64, 32, 4, 2>>;
};

std::atomic<int> g_tile_variant{0};

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
  // Offsets beyond the key range change nothing; clamping keeps the kernel in 32-bit math.
  a.causal_offset = int(std::min<int64_t>(std::max<int64_t>(p.causal_offset, -p.q_len - 1), p.kv_len + 1));
  a.mask_kind = static_cast<int>(p.mask_kind);
  a.mask_dtype = static_cast<int>(p.mask_dtype);
  a.mask = p.mask;
  a.m_sb = p.mask_stride_b, a.m_sh = p.mask_stride_h, a.m_sq = p.mask_stride_q, a.m_sk = p.mask_stride_k;
  a.mask_kv_len = p.mask_kind == MaskKind::none ? p.kv_len : std::max<int64_t>(p.mask_kv_len, 0);
  return a;
}

constexpr int MAX_DEVICES = 64;

template <typename T, typename CFG, bool ALIGNED, bool MASKED>
cudaError_t launch_flash(const AttentionParams& p, cudaStream_t stream) {
  const FlashArgs a = make_args(p, CFG::BLOCK_M);
  auto kernel = flash_fwd_kernel<T, CFG, ALIGNED, MASKED>;
  // Opting into more than 48 KiB of dynamic shared memory is per kernel and device.
  static std::atomic<bool> smem_ready[MAX_DEVICES];
  if constexpr (CFG::SMEM_BYTES > 48 * 1024) {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    const bool cached = device >= 0 && device < MAX_DEVICES;
    if (!cached || !smem_ready[device].load(std::memory_order_acquire)) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, CFG::SMEM_BYTES);
      if (err != cudaSuccess) return err;
      if (cached) smem_ready[device].store(true, std::memory_order_release);
    }
  }
  const int64_t blocks = int64_t(a.m_blocks) * a.bh_count;
  kernel<<<unsigned(blocks), CFG::THREADS, CFG::SMEM_BYTES, stream>>>(a);
  return cudaGetLastError();
}

// f(TypeTag<CFG>) for variant `index` of a tuple of configs (index 0 when out of range).
template <typename Tuple, size_t I = 0, typename F>
auto dispatch_variant(int index, F&& f) {
  if constexpr (I + 1 < std::tuple_size_v<Tuple>) {
    if (index == int(I)) return f(TypeTag<std::tuple_element_t<I, Tuple>>{});
    return dispatch_variant<Tuple, I + 1>(index, f);
  } else {
    return f(TypeTag<std::tuple_element_t<I, Tuple>>{});
  }
}

// "flash_fwd<float16,d128,m128,n64,w4,b2>"; ",masked" / ",unaligned" mark those variants.
template <typename T, typename CFG>
const char* kernel_name(bool aligned, bool masked) {
  auto make = [](bool al, bool ma) {
    return str_cat("flash_fwd<", dtype_name(std::is_same_v<T, __half> ? DType::f16 : DType::bf16), ",d",
                   CFG::HEAD_DIM, ",m", CFG::BLOCK_M, ",n", CFG::BLOCK_N, ",w", CFG::NUM_WARPS, ",b",
                   CFG::BLOCKS_PER_SM, ma ? ",masked" : "", al ? "" : ",unaligned", ">");
  };
  static const std::string names[2][2] = {{make(false, false), make(false, true)},
                                          {make(true, false), make(true, true)}};
  return names[aligned][masked].c_str();
}

enum class TileChoice { masked, default_only, any_variant };

// f(TypeTag<CFG>) for the bucket's config: its Masked config, Variants[0], or Variants[variant].
template <TileChoice CHOICE, typename F>
auto dispatch_config(int bucket, int variant, F&& f) {
  auto pick = [&](auto tiles) {
    using Tiles = typename decltype(tiles)::type;
    if constexpr (CHOICE == TileChoice::masked) return f(TypeTag<typename Tiles::Masked>{});
    else if constexpr (CHOICE == TileChoice::default_only) return f(TypeTag<std::tuple_element_t<0, typename Tiles::Variants>>{});
    else return dispatch_variant<typename Tiles::Variants>(variant, f);
  };
  return dispatch_int<64, 128, 256>(bucket, [&](auto D) {
    if constexpr (D.value == 64) return pick(TypeTag<Tiles64>{});
    else if constexpr (D.value == 128) return pick(TypeTag<Tiles128>{});
    else return pick(TypeTag<Tiles256>{});
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
  const bool aligned = rows_aligned(p);
  return dispatch_dtype(p.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    const bool masked = p.mask_kind != MaskKind::none;
    auto name = [&](auto cfg) { return kernel_name<T, typename decltype(cfg)::type>(aligned, masked); };
    const int bucket = head_dim_bucket(p);
    if (masked) return dispatch_config<TileChoice::masked>(bucket, 0, name);
    if (!aligned) return dispatch_config<TileChoice::default_only>(bucket, 0, name);
    return dispatch_config<TileChoice::any_variant>(bucket, g_tile_variant.load(std::memory_order_relaxed), name);
  });
}

int attention_set_tile_variant(int variant) { return g_tile_variant.exchange(variant); }

cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream) {
  if (attention_unsupported_reason(p) != nullptr) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.q_heads == 0 || p.q_len == 0) return cudaSuccess;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      const int bucket = head_dim_bucket(p);
      const bool aligned = rows_aligned(p);
      auto run = [&](auto cfg, auto ALIGNED, auto MASKED) {
        return launch_flash<T, typename decltype(cfg)::type, ALIGNED.value, MASKED.value>(p, stream);
      };
      if (p.mask_kind != MaskKind::none) {
        return dispatch_bool(aligned, [&](auto ALIGNED) {
          return dispatch_config<TileChoice::masked>(bucket, 0, [&](auto cfg) { return run(cfg, ALIGNED, std::true_type{}); });
        });
      }
      if (!aligned) {
        return dispatch_config<TileChoice::default_only>(
            bucket, 0, [&](auto cfg) { return run(cfg, std::false_type{}, std::false_type{}); });
      }
      return dispatch_config<TileChoice::any_variant>(bucket, g_tile_variant.load(std::memory_order_relaxed),
                                                      [&](auto cfg) { return run(cfg, std::true_type{}, std::false_type{}); });
    }
  });
}

}  // namespace trt_fastops::attention
