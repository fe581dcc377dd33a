// Attention launcher: validates AttentionParams, picks the kernel variant
// (dtype, head-dim bucket, 16-byte aligned rows or not) and launches it.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_hopper.h"
#include "plugins/attention/attention_kernels.cuh"
#include "plugins/attention/attention_launch_common.cuh"
#include "plugins/common/dispatch.cuh"
#include "plugins/common/lru_cache.h"
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
std::atomic<int> g_path{0};  // AttentionPath

bool use_hopper(const AttentionParams& p) {
  return g_path.load(std::memory_order_relaxed) != int(AttentionPath::sm80) && hopper_path_supports(p) &&
         hopper_path_available();
}

bool allow_ws() { return g_path.load(std::memory_order_relaxed) != int(AttentionPath::wgmma); }

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

// The sm80 kernel launch_attention runs for p, as f(TypeTag<CFG>, ALIGNED, MASKED):
// masked inputs take the bucket's Masked config, unaligned rows the default
// tile, aligned rows the selected variant. attention_kernel_name asks the same.
template <typename F>
auto dispatch_sm80_kernel(const AttentionParams& p, F&& f) {
  const int bucket = head_dim_bucket(p);
  const bool aligned = rows_aligned(p);
  if (p.mask_kind != MaskKind::none) {
    return dispatch_bool(aligned, [&](auto ALIGNED) {
      return dispatch_config<TileChoice::masked>(bucket, 0, [&](auto cfg) { return f(cfg, ALIGNED, std::true_type{}); });
    });
  }
  if (!aligned) {
    return dispatch_config<TileChoice::default_only>(
        bucket, 0, [&](auto cfg) { return f(cfg, std::false_type{}, std::false_type{}); });
  }
  return dispatch_config<TileChoice::any_variant>(bucket, g_tile_variant.load(std::memory_order_relaxed),
                                                  [&](auto cfg) { return f(cfg, std::true_type{}, std::false_type{}); });
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

size_t attention_workspace_bytes(const AttentionParams& p) {
  // The tile counter of drawn causal schedules (launch_kernel).
  return p.causal && (p.dtype == DType::f16 || p.dtype == DType::bf16) ? ATTENTION_WORKSPACE_BYTES : 0;
}

const char* attention_kernel_name(const AttentionParams& p) {
  if (attention_unsupported_reason(p) != nullptr) return "unsupported";
  if (use_hopper(p)) return hopper_kernel_name(p, g_tile_variant.load(std::memory_order_relaxed), allow_ws());
  return dispatch_dtype(p.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    return dispatch_sm80_kernel(p, [&](auto cfg, auto ALIGNED, auto MASKED) {
      return kernel_name<T, typename decltype(cfg)::type>(ALIGNED.value, MASKED.value);
    });
  });
}

int attention_set_tile_variant(int variant) { return g_tile_variant.exchange(variant); }

AttentionPath attention_set_path(AttentionPath path) { return AttentionPath(g_path.exchange(int(path))); }

namespace {
std::atomic<int> g_schedule{-1};
}  // namespace

int attention_set_schedule(int section_mib) {
  return g_schedule.exchange(section_mib < -3 && section_mib != SCHEDULE_NO_TAIL ? -1 : section_mib);
}

int schedule_override() { return g_schedule.load(std::memory_order_relaxed); }

namespace {
std::atomic<int> g_section_heads{0};
}  // namespace

int attention_set_section_heads(int heads) { return g_section_heads.exchange(heads < 0 ? 0 : heads); }

int section_heads_override() { return g_section_heads.load(std::memory_order_relaxed); }

namespace {
using SectionCache = LruCache<CausalGrid, int64_t, PodKeyHash<CausalGrid>>;
static_assert(sizeof(CausalGrid) == 11 * sizeof(int64_t), "CausalGrid: int64 words, no padding");
}  // namespace

int64_t cached_causal_section_heads(const CausalGrid& g) {
  // Costing a grid takes up to 1.5 ms on the host (every section size; NOTES item 61); later launches look it up.
  static SectionCache* cache =
      new SectionCache(cache_capacity_from_env("TRT_FASTOPS_ATTENTION_SCHEDULE_CACHE_SIZE", 256));
  if (const auto hit = cache->get(g)) return *hit;
  const int64_t heads = causal_section_heads(g);
  cache->put(g, heads);
  return heads;
}

namespace {
struct TailKey {
  CausalGrid grid;
  int64_t section;
  bool operator==(const TailKey& o) const { return std::memcmp(this, &o, sizeof(TailKey)) == 0; }
};
static_assert(sizeof(TailKey) == 12 * sizeof(int64_t), "TailKey: int64 words, no padding");
using TailCache = LruCache<TailKey, std::shared_ptr<const CausalTail>, PodKeyHash<TailKey>>;
}  // namespace

std::shared_ptr<const CausalTail> cached_causal_tail(const CausalGrid& g, int64_t section) {
  static TailCache* cache =
      new TailCache(cache_capacity_from_env("TRT_FASTOPS_ATTENTION_SCHEDULE_CACHE_SIZE", 256));
  const TailKey key{g, section};
  if (const auto hit = cache->get(key)) return *hit;
  auto tail = std::make_shared<const CausalTail>(causal_tail(g, section));
  cache->put(key, tail);
  return tail;
}

namespace {
std::atomic<int> g_output_store{0};  // AttentionStore
}  // namespace

AttentionStore attention_set_output_store(AttentionStore store) {
  return AttentionStore(g_output_store.exchange(int(store)));
}

bool output_store_by_tma() {
  return g_output_store.load(std::memory_order_relaxed) == int(AttentionStore::automatic);
}

namespace {
std::atomic<int> g_dependent_launch{-1};  // -1: not read from the environment yet
}  // namespace

bool attention_set_dependent_launch(bool on) {
  const bool previous = dependent_launch();
  g_dependent_launch.store(on ? 1 : 0, std::memory_order_relaxed);
  return previous;
}

bool dependent_launch() {
  int on = g_dependent_launch.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* env = std::getenv("TRT_FASTOPS_ATTENTION_PDL");
    on = env != nullptr && std::strcmp(env, "0") == 0 ? 0 : 1;
    int unset = -1;
    if (!g_dependent_launch.compare_exchange_strong(unset, on, std::memory_order_relaxed)) on = unset;
  }
  return on == 1;
}

cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream) {
  if (attention_unsupported_reason(p) != nullptr) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.q_heads == 0 || p.q_len == 0) return cudaSuccess;
  if (use_hopper(p)) return launch_attention_hopper(p, g_tile_variant.load(std::memory_order_relaxed), allow_ws(), stream);
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      return dispatch_sm80_kernel(p, [&](auto cfg, auto ALIGNED, auto MASKED) {
        using CFG = typename decltype(cfg)::type;
        return launch_kernel<CFG, flash_fwd_kernel<T, CFG, ALIGNED.value, MASKED.value>>(p, stream);
      });
    }
  });
}

}  // namespace trt_fastops::attention
