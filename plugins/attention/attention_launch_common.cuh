// Internal to the attention launchers (attention_launch.cu, attention_hopper.cu):
// alignment and head-dim rules, AttentionParams -> FlashArgs, the launch with its
// shared-memory opt-in, and kernel names.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "plugins/attention/attention.h"
#include "plugins/attention/attention_kernels.cuh"
#include "plugins/attention/attention_schedule.h"
#include "plugins/common/device.h"
#include "plugins/common/dispatch.cuh"
#include "plugins/common/smem_optin.h"
#include "plugins/common/status.h"

namespace trt_fastops::attention {

inline int head_dim_bucket(const AttentionParams& p) {
  const int64_t d = std::max(p.head_dim, p.v_head_dim);
  return d <= 64 ? 64 : d <= 128 ? 128 : 256;
}

inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

inline bool view_aligned(const void* ptr, const TensorView& v) {
  return aligned16(ptr) && v.stride_b % 8 == 0 && v.stride_h % 8 == 0 && v.stride_s % 8 == 0;
}

// cp.async moves 16-byte chunks: every row start must be 16-byte aligned and
// the head dims whole chunks.
inline bool rows_aligned(const AttentionParams& p) {
  return p.head_dim % 8 == 0 && p.v_head_dim % 8 == 0 && view_aligned(p.q, p.q_view) &&
         view_aligned(p.k, p.k_view) && view_aligned(p.v, p.v_view) && view_aligned(p.out, p.out_view);
}

inline bool fits_int(int64_t n) { return n >= 0 && n <= INT32_MAX; }

// q_by_tma: the kernel loads Q through a tensor map, which zero-fills rows
// outside the tensor, so its query blocks may start before row 0. Causal
// inputs then put the partial query block first (m_shift = the padding):
// block 0 sees the fewest keys, so the padded rows cost one or two key blocks
// there instead of every key block at the end (d64's 192-row tiles at seqlen
// 1k: 27 key blocks per head instead of 32).
inline FlashArgs make_args(const AttentionParams& p, int block_m, bool q_by_tma) {
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
  a.m_shift = p.causal && q_by_tma ? int(int64_t(a.m_blocks) * block_m - p.q_len) : 0;
  a.div_m_blocks = FastDiv::make(a.m_blocks);
  a.div_q_heads = FastDiv::make(a.q_heads);
  a.div_group = FastDiv::make(a.group);
  a.scale_log2 = p.scale * LOG2E;
  a.softcap = p.softcap;
  a.scale_softcap = p.softcap > 0.f ? p.scale / p.softcap : 0.f;
  a.inv_scale_log2 = a.scale_log2 > 0.f ? 1.f / a.scale_log2 : 0.f;
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

// attention_set_schedule's override, or -1 for the default.
int schedule_override();
// causal_tail(g, section), computed once per grid (an LRU, TRT_FASTOPS_ATTENTION_SCHEDULE_CACHE_SIZE).
std::shared_ptr<const CausalTail> cached_causal_tail(const CausalGrid& g, int64_t section);
// attention_set_section_heads's override, or 0 for the launcher's choice.
int section_heads_override();

// causal_section_heads with a bounded cache of its answers
// (TRT_FASTOPS_ATTENTION_SCHEDULE_CACHE_SIZE entries, default 256).
int64_t cached_causal_section_heads(const CausalGrid& g);

// attention_set_output_store: false while the consumers' own stores are forced.
bool output_store_by_tma();

// attention_set_dependent_launch's setting (default on; TRT_FASTOPS_ATTENTION_PDL=0 turns it off).
bool dependent_launch();


// CTAs per thread-block cluster of a config (HopperWsConfig::CLUSTER; 1 for configs without).
template <typename CFG, typename = void>
struct ClusterOf : std::integral_constant<int, 1> {};
template <typename CFG>
struct ClusterOf<CFG, std::void_t<decltype(CFG::CLUSTER)>> : std::integral_constant<int, CFG::CLUSTER> {};

// Whether CFG's kernel waits for the grid ahead before its first global access
// (HopperConfig / HopperWsConfig::GRID_DEPENDENCY; false for configs without), so that
// launch_kernel may launch it with programmatic stream serialization.
template <typename CFG, typename = void>
struct GridDependencyOf : std::false_type {};
template <typename CFG>
struct GridDependencyOf<CFG, std::void_t<decltype(CFG::GRID_DEPENDENCY)>>
    : std::bool_constant<CFG::GRID_DEPENDENCY> {};

// Whether CFG's kernel reads a tail table (HopperWsConfig::TAIL_TABLE; false for configs without).
template <typename CFG, typename = void>
struct TailTableOf : std::false_type {};
template <typename CFG>
struct TailTableOf<CFG, std::void_t<decltype(CFG::TAIL_TABLE)>> : std::bool_constant<CFG::TAIL_TABLE> {};

// Whether CFG packs the heads' rows into its tiles (HopperWsConfig::PACK_HEADS; false for configs without).
template <typename CFG, typename = void>
struct PackHeadsOf : std::false_type {};
template <typename CFG>
struct PackHeadsOf<CFG, std::void_t<decltype(CFG::PACK_HEADS)>> : std::bool_constant<CFG::PACK_HEADS> {};

// A launch of `blocks` CTAs of CFG's kernel on `stream`: in clusters of ClusterOf<CFG> CTAs
// where that is above 1, and (`dependent`) with programmatic stream serialization, so the
// kernel's CTAs may start while the grid ahead finishes (GridDependencyOf). `attrs` holds
// the attributes (two at most).
template <typename CFG>
cudaLaunchConfig_t launch_config(unsigned blocks, cudaStream_t stream, bool dependent, cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks, 1, 1);
  cfg.blockDim = dim3(CFG::THREADS, 1, 1);
  cfg.dynamicSmemBytes = CFG::SMEM_BYTES;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = 0;
  if constexpr (ClusterOf<CFG>::value > 1) {
    cudaLaunchAttribute& attr = attrs[cfg.numAttrs++];
    attr = cudaLaunchAttribute{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = ClusterOf<CFG>::value;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
  }
  if (dependent) {
    cudaLaunchAttribute& attr = attrs[cfg.numAttrs++];
    attr = cudaLaunchAttribute{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
  }
  return cfg;
}

// The most CTAs of KERNEL that run at once in clusters of CL (cudaOccupancyMaxActiveClusters:
// an SM count that some GPCs leave odd loses an SM), asked once per device.
template <typename CFG, auto KERNEL>
cudaError_t max_cluster_ctas(int device, int* most) {
  constexpr int CL = ClusterOf<CFG>::value;
  static std::atomic<int64_t> cached{0};  // (device + 1) << 32 | CTAs
  const int64_t known = cached.load(std::memory_order_relaxed);
  if ((known >> 32) == device + 1) {
    *most = int(known & 0xffffffff);
    return cudaSuccess;
  }
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t cfg = launch_config<CFG>(CL, nullptr, false, attrs);
  int clusters = 0;
  if (const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, KERNEL, &cfg); err != cudaSuccess) return err;
  if (clusters <= 0) return cudaErrorInvalidConfiguration;
  *most = clusters * CL;
  cached.store(int64_t(device + 1) << 32 | int64_t(*most), std::memory_order_relaxed);
  return cudaSuccess;
}

// Launches one kernel instantiation (KERNEL is its address, so each gets its
// own once-per-device shared-memory opt-in).
// Extra kernel arguments (the TMA maps of the warp-specialised kernel) follow FlashArgs.
template <typename CFG, auto KERNEL, typename... Extra>
cudaError_t launch_kernel(const AttentionParams& p, cudaStream_t stream, const Extra&... extra) {
  FlashArgs a = make_args(p, CFG::BLOCK_M, CFG::Q_BY_TMA);
  auto kernel = KERNEL;
  LaunchDevice dev;
  if (const cudaError_t err = current_launch_device(&dev); err != cudaSuccess) return err;
  // Opting into more than 48 KiB of dynamic shared memory is per kernel and device.
  static std::atomic<uint64_t> smem_ready{0};
  if (const cudaError_t err = allow_dynamic_smem(kernel, CFG::SMEM_BYTES, smem_ready, dev.index); err != cudaSuccess)
    return err;
  int64_t blocks = int64_t(a.m_blocks) * a.bh_count;
  if constexpr (PackHeadsOf<CFG>::value) {
    // The heads' rows end to end (the dispatcher sends q_len a multiple of 64, at least 128).
    a.packed_tiles = int((int64_t(a.bh_count) * a.q_len + CFG::BLOCK_M - 1) / CFG::BLOCK_M);
    a.div_q_len = FastDiv::make(a.q_len);
    blocks = a.packed_tiles;
  }
  if constexpr (CFG::PERSISTENT) {
    // One resident CTA per SM walks the tiles (persistent_tile). Causal tiles
    // differ in cost, so they go heaviest first in sections of heads whose
    // K/V fit in L2 together and rounds alternate direction: each round's
    // tiles cost about the same. (Or a CTA per tile: a section of 0 MiB.)
    // Non-causal tiles cost alike but for each head's partial query block:
    // head-major by default (-1), the partial tiles dealt to the CTAs that run
    // one tile more than the others (persistent_tile's balance_ways), or, with
    // none and no mask (tiles alike), on as few CTAs as the rounds need
    // (even_round_grid); -2 the plain order on every SM. Sections of heads (the hook's) measured within noise of
    // head-major at d128 4k-16k (bench/NOTES-attention-log.md item 49).
    const int forced_raw = schedule_override();
    const bool no_tail = forced_raw == SCHEDULE_NO_TAIL;
    const int forced = no_tail ? -1 : forced_raw;
    // Drawn tiles (causal_draws; forced by SCHEDULE_DRAWN) need the workspace's counter and a kernel
    // that draws: the key-row kernels (masked) keep the computed order.
    // d256's tiles (output staged in one slot, HopperWsConfig::O_SLOT, or in the V stages, O_IN_V)
    // keep the computed order: drawn against a CTA per tile, 8k level, 16k 7 % slower on both
    // (H200, settled; bench/NOTES-attention-log.md items 95, 96).
    const bool can_draw = !CFG::O_SLOT && !CFG::O_IN_V && p.causal && p.mask_kind == MaskKind::none &&
                          p.workspace != nullptr && p.workspace_bytes >= attention_workspace_bytes(p);
    const bool draw = can_draw && (forced == SCHEDULE_DRAWN ||
                                   (forced == -1 && causal_draws(a.m_blocks)));
    const int section_mib = draw                            ? int(DRAWN_SECTION_MIB)
                            : forced >= 0 || forced == -2  ? forced
                            : p.causal                      ? causal_fallback_mib(head_dim_bucket(p), a.m_blocks)
                                                            : -1;
    const int64_t tiles = blocks;
    if (section_mib != 0) blocks = std::min<int64_t>(blocks, int64_t(dev.multiprocessors) * CFG::BLOCKS_PER_SM);
    int cluster_most = 0;  // CLUSTER: the CTAs that run at once
    if constexpr (ClusterOf<CFG>::value > 1) {
      if (const cudaError_t err = max_cluster_ctas<CFG, KERNEL>(dev.index, &cluster_most); err != cudaSuccess)
        return err;
      blocks = std::min<int64_t>(blocks, cluster_most);
    }
    if (section_mib == -1 && !p.causal && CFG::BLOCKS_PER_SM == 1) {
      // Non-causal: m_shift is 0, so each head's partial block is its first tile.
      const bool partial = !PackHeadsOf<CFG>::value && p.q_len % CFG::BLOCK_M != 0;
      a.balance_ways = balance_ways(tiles, int(blocks), a.m_blocks, partial);
      if (a.balance_ways > 0) {
        a.div_balance = FastDiv::make(a.balance_ways);
        a.div_full_blocks = FastDiv::make(a.m_blocks - 1);
      } else if (!partial && p.mask_kind == MaskKind::none) {
        blocks = even_round_grid(tiles, int(blocks));  // tiles alike: as few CTAs as the rounds need
      }
    }
    if constexpr (ClusterOf<CFG>::value > 1) {
      // Whole clusters (the dispatcher sends only grids of an even tile count, no sections).
      constexpr int CL = ClusterOf<CFG>::value;
      blocks = (blocks + CL - 1) / CL * CL;
      if (blocks > cluster_most) blocks -= CL;
    }
    if (section_mib > 0) {
      const int64_t kv_head_bytes = p.kv_len * (p.head_dim + p.v_head_dim) * 2;
      const auto heads_in = [&](int64_t mib) { return heads_within(mib, kv_head_bytes, a.bh_count); };
      int64_t heads = heads_in(section_mib);
      const int64_t key_end = std::min<int64_t>(a.kv_len, a.mask_kv_len);
      const auto causal_grid = [&] {
        return make_causal_grid(a.q_len, key_end, a.causal_offset, CFG::BLOCK_M, CFG::BLOCK_N, a.m_blocks,
                                a.m_shift, a.bh_count, blocks, kv_head_bytes, head_dim_bucket(p));
      };
      // Within a budget of K/V, the section size that balances the grid (section_mib is the fallback's).
      if (forced == -1 && !draw) heads = cached_causal_section_heads(causal_grid());
      if (const int forced_heads = section_heads_override(); forced_heads > 0)
        heads = std::min<int64_t>(forced_heads, a.bh_count);
      // The causal order's last rounds dealt by the launcher's table (causal_tail).
      if constexpr (TailTableOf<CFG>::value) {
        // (Unmasked kernels without softcap code only: the others' block loops stay as they were.)
        if (p.causal && !draw && !no_tail && p.mask_kind == MaskKind::none && !(p.softcap > 0.f) &&
            CFG::BLOCKS_PER_SM == 1) {
          if (const auto tail = cached_causal_tail(causal_grid(), heads); tail && tail->round > 0) {
            a.tail_round = int(tail->round);
            std::copy(tail->tiles.begin(), tail->tiles.end(), a.tail_tiles);
          }
        }
      }
      a.lpt_heads = int(heads);
      a.div_section = FastDiv::make(a.lpt_heads * a.m_blocks);
      a.div_lpt_heads = FastDiv::make(a.lpt_heads);
    }
    if (draw) {
      a.tile_counter = static_cast<int*>(p.workspace);
      if (const cudaError_t err = cudaMemsetAsync(p.workspace, 0, sizeof(int), stream); err != cudaSuccess) return err;
    }
  }
  const bool dependent = GridDependencyOf<CFG>::value && dependent_launch();
  if (ClusterOf<CFG>::value > 1 || dependent) {
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t cfg = launch_config<CFG>(unsigned(blocks), stream, dependent, attrs);
    if (const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a, extra...); err != cudaSuccess) return err;
    return cudaGetLastError();
  }
  kernel<<<unsigned(blocks), CFG::THREADS, CFG::SMEM_BYTES, stream>>>(a, extra...);
  return cudaGetLastError();
}

// "flash_fwd<float16,d128,m128,n64,w4,b2>" (the config's NAME); ",masked" / ",unaligned" mark those variants.
template <typename T, typename CFG>
const char* kernel_name(bool aligned, bool masked) {
  auto make = [](bool al, bool ma) {
    return str_cat(CFG::NAME, "<", dtype_name(std::is_same_v<T, __half> ? DType::f16 : DType::bf16), ",d",
                   CFG::HEAD_DIM, ",m", CFG::BLOCK_M, ",n", CFG::BLOCK_N, ",w", CFG::NUM_WARPS, ",b",
                   CFG::BLOCKS_PER_SM, ma ? ",masked" : "", al ? "" : ",unaligned", ">");
  };
  static const std::string names[2][2] = {{make(false, false), make(false, true)},
                                          {make(true, false), make(true, true)}};
  return names[aligned][masked].c_str();
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

}  // namespace trt_fastops::attention
