// Host side of the sm_90a attention path (attention_hopper.cuh). Its kernels
// carry code only where the build targets sm_90a; elsewhere they are empty and
// hopper_path_available() is false, so the sm80 path runs.
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "plugins/attention/attention_hopper.cuh"
#include "plugins/attention/attention_hopper_ws.cuh"
#include "plugins/attention/attention_hopper.h"
#include "plugins/attention/attention_launch_common.cuh"
#include "plugins/common/dispatch.cuh"

namespace trt_fastops::attention {
namespace {

// Tile variants per head-dim bucket. The warp-specialised kernels
// (HopperWsConfig<D, BLOCK_N, consumer warpgroups, STAGES, PINGPONG>, TMA-fed)
// come first; variant 0 is the default. Masked inputs take MASKED_VARIANT (the
// three-consumer d64 tile spills with the general mask code), key-padding masks
// KEY_ROW_TILE (d256: the warp-specialised tile, whose general mask code
// spills, or its 80-key tile, WIDE_KEY_ROW_TILE, from as many keys as unmasked
// inputs take it; elsewhere MASKED_VARIANT), or where key_row_packable accepts them
// KEY_ROW_VARIANT (the three-consumer d64 tile holds those packed; -1: none).
// d64 picks its rows per tile (TWO_CONSUMER_VARIANT: 128, ONE_CONSUMER_VARIANT:
// 64, FOUR_CONSUMER_VARIANT: 256 rows of 64-key blocks, else 192, PACKED_VARIANT
// for 192 over all heads' rows end to end) with d64_rows's cost model. The
// plain wgmma kernel (HopperConfig<D, BLOCK_N, CTAs/SM>) follows from
// FIRST_BASIC on and runs where the warp-specialised one
// can't (no tensor maps for these strides, d256 masks other than key padding,
// the 'wgmma' path forced): 64-key tiles at 2 CTAs/SM, 1.1-1.3x its 128-key
// tiles. The rest serve the benchmark's tile sweep (losers of earlier sweeps,
// such as a 3-stage d64 ring, were dropped to keep the instantiations few).
template <int D>
struct HopperTiles;
template <>
struct HopperTiles<64> {
  using Variants = std::tuple<HopperWsConfig<64, 128, 3, 2, true>, HopperWsConfig<64, 128, 2, 2, true>,
                              HopperWsConfig<64, 128, 3, 2, false>, HopperWsConfig<64, 128, 1, 2, false>,
                              HopperWsConfig<64, 64, 4, 4, true>, HopperConfig<64, 64, 2>,
                              HopperWsConfig<64, 128, 3, 2, true, 1, true>, HopperWsConfig<64, 128, 3, 2, true>>;
  static constexpr int FIRST_BASIC = 5, MASKED_VARIANT = 1, KEY_ROW_VARIANT = 0, KEY_ROW_TILE = MASKED_VARIANT;
  static constexpr int WIDE_KEY_ROW_TILE = -1;
  static int plain_tile(const AttentionParams&) { return 0; }  // rows per tile: d64_rows
  static constexpr int TWO_CONSUMER_VARIANT = 1, ONE_CONSUMER_VARIANT = 3, FOUR_CONSUMER_VARIANT = 4;
  // Variant 0's tile over the heads' rows end to end (HopperWsConfig::PACK_HEADS), where d64_rows
  // picks 192 rows and pack_heads_fit accepts the inputs; UNPACKED_VARIANT forces variant 0's tile
  // a head at a time (the same kernel: for A/B timing against the packed one).
  static constexpr int PACKED_VARIANT = 6, UNPACKED_VARIANT = 7;
  static_assert(std::tuple_element_t<TWO_CONSUMER_VARIANT, Variants>::BLOCK_M == 128 &&
                std::tuple_element_t<ONE_CONSUMER_VARIANT, Variants>::BLOCK_M == 64 &&
                std::tuple_element_t<FOUR_CONSUMER_VARIANT, Variants>::BLOCK_M == 256 &&
                std::tuple_element_t<0, Variants>::BLOCK_M == 192 &&
                std::tuple_element_t<PACKED_VARIANT, Variants>::PACK_HEADS &&
                std::is_same_v<std::tuple_element_t<UNPACKED_VARIANT, Variants>, std::tuple_element_t<0, Variants>>);
};
template <>
struct HopperTiles<128> {
  using Variants = std::tuple<HopperWsConfig<128, 128, 2, 2, true>, HopperWsConfig<128, 128, 2, 2, false>,
                              HopperWsConfig<128, 176, 2, 2, true>, HopperConfig<128, 64, 2>,
                              HopperWsConfig<128, 176, 2, 2, true, 2>>;
  static constexpr int FIRST_BASIC = 3, MASKED_VARIANT = 0, KEY_ROW_VARIANT = -1, KEY_ROW_TILE = MASKED_VARIANT;
  static constexpr int WIDE_KEY_ROW_TILE = -1;
  // The 176-key tile in clusters of two CTAs sharing each K / V block (TMA multicast; FA3's
  // non-causal d128 kernel), for non-causal unmasked inputs without softcap whose heads have an
  // even count of whole query tiles (cluster_fits), from CLUSTER_MIN_KEYS keys (clusters_pay).
  // Against variant 0 (H200, settled, interleaved): 1k keys -5 %, 4k -1 to -4.5 %, 8k +3.4-5.5 %,
  // 12k +1.3-1.9 %, 16k +0.3-3.7 %, 32k +0.1-0.3 % (bench/NOTES-attention-log.md item 85).
  static constexpr int CLUSTER_VARIANT = 4;
  static constexpr int64_t CLUSTER_MIN_KEYS = 8192;
  static bool cluster_fits(const AttentionParams& p) {
    constexpr int64_t BM = std::tuple_element_t<CLUSTER_VARIANT, Variants>::BLOCK_M;
    return !p.causal && p.mask_kind == MaskKind::none && !(p.softcap > 0.f) && p.q_len % BM == 0 &&
           (p.q_len / BM) % 2 == 0 && (schedule_override() == -1 || schedule_override() == SCHEDULE_NO_TAIL);
  }
  static bool clusters_pay(const AttentionParams& p) { return p.kv_len >= CLUSTER_MIN_KEYS && cluster_fits(p); }
  // 176-key blocks (FlashAttention-3's non-causal d128 tile) for non-causal unmasked inputs
  // without softcap whose keys they pad less (wide_blocks_pay).
  static constexpr int WIDE_VARIANT = 2;
  // Whether the wide blocks beat variant 0's at kv_len keys. Per key of a whole block the two
  // tiles run level (4224 keys, no padding in either: 0.4 % apart), but the wide tile's boundary
  // costs about a quarter block more (its one output slot), and 1 % is kept as slack. So: 528
  // keys +10-16 %, 1056 +3-6 %; 512-4096 (3 % more padding) 2-6 % slower (NOTES item 83).
  static bool wide_blocks_pay(int64_t kv_len) {
    constexpr int64_t NARROW = std::tuple_element_t<0, Variants>::BLOCK_N;
    constexpr int64_t WIDE = std::tuple_element_t<WIDE_VARIANT, Variants>::BLOCK_N;
    const int64_t narrow = (kv_len + NARROW - 1) / NARROW * NARROW, wide = (kv_len + WIDE - 1) / WIDE * WIDE;
    return (wide + WIDE / 4) * 101 < narrow * 100;
  }
  static int plain_tile(const AttentionParams& p) {
    if (p.causal) return 0;
    return clusters_pay(p) ? CLUSTER_VARIANT : wide_blocks_pay(p.kv_len) ? WIDE_VARIANT : 0;
  }
};
template <>
struct HopperTiles<256> {
  // FlashAttention-3's d256 structure: two ping-pong consumers of 64 rows, O 128 registers each.
  // Variant 0, 64-key blocks with the output staged a consumer's rows at a time
  // (HopperWsConfig::O_SLOT): against the plain wgmma kernel (H200, settled, interleaved)
  // 1.33-1.44x at 512-16k keys; key-padding masks and softcapped inputs take it, other masks keep
  // the plain kernel. Two-CTA clusters sharing K / V ran 3-5 % slower at 1k-16k
  // (bench/NOTES-attention-log.md item 95).
  using Variants = std::tuple<HopperWsConfig<256, 64, 2, 2, true>, HopperConfig<256, 64, 1>,
                              HopperWsConfig<256, 80, 2, 2, true>>;
  static constexpr int FIRST_BASIC = 1, MASKED_VARIANT = 1, KEY_ROW_VARIANT = -1, KEY_ROW_TILE = 0;
  // FlashAttention-3's 80-key blocks, the output staged in the V stages (HopperWsConfig::O_IN_V:
  // the next tile's V waits for the stores, its Q and first K don't), for unmasked inputs without
  // softcap, non-causal from 1k keys and causal from 4k (plain_tile). Against variant 0
  // (H200, settled, interleaved, fp16 / bf16): non-causal 512 keys -4 %, 1k +3.5 %, 2k +3-5 %,
  // 4k +4 %, 8k +7-8.5 %, 16k +4-6 %; causal 512 -4 %, 1k -0.5 to -4 %, 2k -0.7 / +2.6 %,
  // 4k +1.4 / +4.2 %, 8k +2-4 %, 16k +5-6 % (bench/NOTES-attention-log.md item 96).
  static constexpr int WIDE_VARIANT = 2;
  static int plain_tile(const AttentionParams& p) { return p.kv_len >= (p.causal ? 4096 : 1024) ? WIDE_VARIANT : 0; }
  // Key-padding masks take the 80-key tile where unmasked inputs would (its key-row builds have no
  // spills either), or where variant 2 is forced. Against the 64-key tile's key-row build (H200,
  // settled, BERT-style padding, fp16 / bf16): non-causal 1k +0.9 / -0.9 %, 4k +4.4 / +6.0 %, 16k
  // +9.9 / +8.5 %; causal 1k -6.0 / -3.5 %, 4k +2.7 / +1.9 %, 16k +6.4 / +6.1 % (item 96 (f)).
  static constexpr int WIDE_KEY_ROW_TILE = WIDE_VARIANT;
};

template <typename CFG>
constexpr bool is_warp_specialised = false;
template <int D, int BN, int CONSUMERS, int STAGES, bool PINGPONG, int CLUSTER, bool PACKED>
constexpr bool is_warp_specialised<HopperWsConfig<D, BN, CONSUMERS, STAGES, PINGPONG, CLUSTER, PACKED>> = true;
// Warp-specialised tiles with a key-row build per mask type (typed_key_row_mask);
// the three-consumer tile, for grids of several tiles per SM, keeps one build
// (typed, its 160-register consumers spill).
template <typename CFG>
constexpr bool typed_key_row_build = false;
template <int D, int BN, int CONSUMERS, int STAGES, bool PINGPONG, int CLUSTER, bool PACKED>
constexpr bool typed_key_row_build<HopperWsConfig<D, BN, CONSUMERS, STAGES, PINGPONG, CLUSTER, PACKED>> =
    CONSUMERS < 3;

// The driver's tensor-map encoder, looked up once (no link-time libcuda dependency).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // not sticky, but leave no error behind for the caller's check
      return PFN_cuTensorMapEncodeTiled_v12000(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return fn;
}

// A [batch, heads, len, dim] strided view as a 4-D tensor map (dim innermost),
// boxes of 64 dims x `rows`, 128-byte swizzle; loads read zeros outside the
// tensor and stores leave it unwritten.
bool encode_view(CUtensorMap* map, DType dtype, const void* base, const TensorView& view, int64_t batch, int64_t heads,
                 int64_t len, int64_t dim, int rows) {
  const auto encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[4] = {cuuint64_t(dim), cuuint64_t(std::max<int64_t>(len, 1)), cuuint64_t(heads),
                              cuuint64_t(batch)};
  // Strides of extent-1 dims are never applied; TMA still wants them valid.
  auto stride = [](int64_t elems, int64_t extent) -> cuuint64_t {
    return extent <= 1 || elems <= 0 ? 16 : cuuint64_t(elems) * 2;
  };
  const cuuint64_t strides[3] = {stride(view.stride_s, len), stride(view.stride_h, heads),
                                 stride(view.stride_b, batch)};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r =
      encode(map, dtype == DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
             const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// Q, K and V must have maps (Q's boxes of q_rows: a tile's, or a packed tile's slot); the output's
// is optional (without it, or with attention_set_output_store's consumers, they store their rows
// themselves).
bool encode_maps(const AttentionParams& p, int q_rows, int block_n, TmaMaps* maps) {
  if (!encode_view(&maps->q, p.dtype, p.q, p.q_view, p.batch, p.q_heads, p.q_len, p.head_dim, q_rows) ||
      !encode_view(&maps->k, p.dtype, p.k, p.k_view, p.batch, p.kv_heads, p.kv_len, p.head_dim, block_n) ||
      !encode_view(&maps->v, p.dtype, p.v, p.v_view, p.batch, p.kv_heads, p.kv_len, p.v_head_dim, block_n))
    return false;
  maps->o_mapped = output_store_by_tma() &&
                   encode_view(&maps->o, p.dtype, p.out, p.out_view, p.batch, p.q_heads, p.q_len, p.v_head_dim, 64);
  return true;
}

// Key-padding masks (one row for every query) that KeyRowMaskPacked can hold:
// float16 / bfloat16 additive, key stride 1, an even length and every row
// starting on a key pair (4 bytes).
bool key_row_packable(const AttentionParams& p) {
  return p.mask_kind == MaskKind::additive && (p.mask_dtype == DType::f16 || p.mask_dtype == DType::bf16) &&
         p.mask_stride_q == 0 && p.mask_stride_k == 1 && p.mask_kv_len % 2 == 0 && p.mask_stride_b % 2 == 0 &&
         p.mask_stride_h % 2 == 0 && (reinterpret_cast<uintptr_t>(p.mask) & 3) == 0;
}

// An additive key-padding mask of the inputs' dtype: the key-row kernels have
// a build for it (flash_fwd_ws_kernel's MASK). The build that reads any mask
// type carries a copy of its mask code per type (2.7x the unmasked kernel's
// code); on the H100 with BERT's mask (tune_attention --graph, us, any / typed):
// B1 S128 4.63 / 4.26, B1 S512 8.97 / 8.41, and after touching 216 MiB of other
// data (--before scatter, the first instructions then come from DRAM) 7.48 / 4.73,
// 15.07 / 13.03.
bool typed_key_row_mask(const AttentionParams& p) {
  return p.mask_kind == MaskKind::additive && p.mask_dtype == p.dtype;
}

// Non-causal unmasked inputs without softcap whose heads' rows can be laid end to end in 192-row
// tiles (HopperWsConfig::PACK_HEADS): each head a multiple of 64 rows (a slot lies in one head),
// at least 128 (at most two heads a tile), not a multiple of 192 (nothing to save), and the rows'
// count within 32-bit tile math.
bool pack_heads_fit(const AttentionParams& p) {
  return !p.causal && p.mask_kind == MaskKind::none && !(p.softcap > 0.f) && p.q_len % 64 == 0 && p.q_len >= 128 &&
         p.q_len % 192 != 0 && p.batch * p.q_heads * p.q_len <= int64_t(INT32_MAX) - 256 &&
         p.kv_len <= int64_t(INT32_MAX) - 256;
}

// d64 without causal masking: rows per tile, 64 (one consumer, two CTAs per
// SM) or 192 (three consumers). Each SM walks ceil(tiles / SMs) tiles of the
// persistent grid, less what partial tiles save where they are dealt apart
// (persistent_rounds), so a grid costs that many tiles x rows per tile, a
// 64-row tile's row 1.21x a 192-row tile's. The 192-row tile pads a 128-query
// sequence by half and a short grid leaves SMs idle. On the H100
// (tune_attention.py --graph, H12, BERT's key-padding mask, us for 64 / 128 /
// 192 rows): B1 S128 5.1 / 5.9 / -, B8 S128 7.0 / 7.1 / 7.4, B1 S512 10.0 /
// 11.4 / -, B8 S512 25.7 / 25.9 / 26.3, B32 S128 13.5 / 13.3 / 15.0, B32 S512
// 87.4 / 89.8 / 83.3. The 128-row tile (two consumers) is never better than 64
// rows by more than noise, so it only serves masks that are not key padding.
// Unmasked inputs without softcap may also take 256 rows (four consumers,
// 64-key blocks), a row 1.07x a 192-row tile's. Costs fitted to 55 grids
// (graphs, fp16, H12 and H16, 128 to 1k keys, and 16k tokens at H32, 512 to
// 4k; bench/NOTES-attention-log.md item 60), us for 64 / 192 / 256 rows: B32 S197
// 24.8 / 28.9 / 22.7, B32 S384 45.8 / 43.4 / 49.2, B32 S448 66.3 / 65.3 / 58.5,
// B32 S1k 261.9 / 229.5 / 250.4, and 16k tokens at H32 S512 - / 178.1 / 175.2;
// the pick is 0.1 % slower than the best on average, at most 1.9 %. Causal
// inputs keep 192 rows (256 ran 10-58 % slower).
// *packed: 192 rows over the heads' rows end to end (pack_heads_fit), where that costs no more than
// 192 rows a head: whole tiles, so ceil(rows / 192 / SMs) rounds (16k tokens at H32, 192 rows a
// head / packed: 512 keys 23.02 / 21 rounds, 1k 23 / 21, 2k 21.3 / 21, 4k 21.16 / 21, 8k and 16k
// 21 / 21). Measured on the H200 (settled, interleaved, fp16 / bf16), packed against 192 rows a
// head: 512 keys +8.8 % / +8.0 %, 1k +7.6 % / +7.4 %, 2k level, 4k -0.9 to +3 %, 8k and 16k
// +0.8-1.3 % (a head's partial last tile costs more than the model's 0.86); against 256 rows:
// 512 keys +1-4 % / +3-5 %, 1k +3.5-5 % / +5-6 %, 2k +5-6 % (bench/NOTES-attention-log.md item 97).
int d64_rows(const AttentionParams& p, bool* packed) {
  *packed = false;
  LaunchDevice dev;
  if (p.causal || current_launch_device(&dev) != cudaSuccess || dev.multiprocessors <= 0) return 192;
  auto cost = [&](int64_t rows, double per_row) {
    const int64_t per_head = (p.q_len + rows - 1) / rows, tiles = p.batch * p.q_heads * per_head;
    if (rows == 64) return double((tiles + dev.multiprocessors - 1) / dev.multiprocessors) * double(rows) * per_row;
    // One CTA per SM, partial tiles dealt apart (persistent_rounds). A partial
    // tile with one, two or three consumers idle costs 0.86, 0.58 or 0.5 of a
    // full one (item 59 (a) measured the first two; the third is a guess).
    const int64_t tail = p.q_len - (per_head - 1) * rows;
    const int64_t idle = rows / 64 - (tail + 63) / 64;
    const double partial_cost = idle <= 0 ? 1.0 : idle == 1 ? 0.86 : idle == 2 ? 0.58 : 0.5;
    return persistent_rounds(tiles, dev.multiprocessors, int(per_head), tail < rows, partial_cost) *
           double(rows) * per_row;
  };
  const bool plain = p.mask_kind == MaskKind::none && !(p.softcap > 0.f);
  const double c64 = cost(64, 1.21);
  double c192 = cost(192, 1.0);
  if (pack_heads_fit(p)) {
    const int64_t per_round = 192 * int64_t(dev.multiprocessors);
    const double c_packed = double((p.batch * p.q_heads * p.q_len + per_round - 1) / per_round) * 192;
    if (c_packed <= c192) {
      c192 = c_packed;
      *packed = true;
    }
  }
  const double c256 = plain ? cost(256, 1.07) : std::numeric_limits<double>::infinity();
  const int rows = c64 <= c192 && c64 <= c256 ? 64 : c256 < c192 ? 256 : 192;
  *packed = *packed && rows == 192;
  return rows;
}

// f(TypeTag<CFG>, MASKED, KEY_ROW, SOFTCAP) for the kernel that runs p: the
// bucket's variant, or for masked inputs its MASKED_VARIANT (a tile whose mask
// code does not spill), KEY_ROW_TILE (KEY_ROW: a key-padding mask, one row for
// every query; d256: WIDE_KEY_ROW_TILE where its 80-key tile pays) or
// KEY_ROW_VARIANT (packable key-padding masks), moved to the
// first plain wgmma config when the warp-specialised kernel is not allowed or
// p's views have no tensor maps. d64's rows per tile (d64_rows, or forced by
// variant TWO_CONSUMER_VARIANT / ONE_CONSUMER_VARIANT / FOUR_CONSUMER_VARIANT)
// apply to masked inputs too; the 64-row tile takes unmasked inputs and
// key-padding masks only (others: 128 rows), the 256-row tile unmasked inputs
// without softcap only (others: as for 192 rows), the packed tile (PACKED_VARIANT)
// the inputs pack_heads_fit accepts (others: as variant 0). Softcapped inputs take
// variant 0 built for softcap (unmasked) or MASKED_VARIANT's general mask code
// (any mask; its one build reads softcap at run time); the other
// warp-specialised kernels are built without softcap code (half the code:
// flash_fwd_ws_kernel's SOFTCAP). `maps` receives the encoded maps. Masked
// inputs instantiate at most five kernels per bucket and dtype, not all
// variants.
template <typename F>
auto dispatch_hopper_config(const AttentionParams& p, int variant, bool allow_ws, TmaMaps* maps, F&& f) {
  const bool masked = p.mask_kind != MaskKind::none;
  const bool softcap = p.softcap > 0.f;
  const bool key_row = masked && p.mask_stride_q == 0 && !softcap;
  using std::false_type, std::true_type;
  return dispatch_int<64, 128, 256>(head_dim_bucket(p), [&](auto D) {
    using Tiles = HopperTiles<D.value>;
    using Variants = typename Tiles::Variants;
    int index = variant;
    bool one = false, packed = false;
    if (index < 0 || index >= int(std::tuple_size_v<Variants>)) index = 0;
    // Unmasked inputs without softcap under the default variant: the bucket's pick (plain_tile).
    if (index == 0 && !masked && !softcap) index = Tiles::plain_tile(p);
    if constexpr (D.value == 128) {
      // The cluster tile forced (attention_set_tile_variant) where it can't run: the same tile
      // without clusters (the same results: a tile's arithmetic doesn't depend on its cluster).
      if (index == Tiles::CLUSTER_VARIANT && !Tiles::cluster_fits(p)) index = Tiles::WIDE_VARIANT;
    }
    if constexpr (D.value == 64) {
      // The packed tile forced where it can't run: as variant 0 (d64_rows, which picks it where it pays).
      if (index == Tiles::PACKED_VARIANT && !pack_heads_fit(p)) index = 0;
      bool pack_heads = false;
      const int rows = index == 0                             ? d64_rows(p, &pack_heads)
                       : index == Tiles::TWO_CONSUMER_VARIANT  ? 128
                       : index == Tiles::ONE_CONSUMER_VARIANT  ? 64
                       : index == Tiles::FOUR_CONSUMER_VARIANT ? 256
                                                               : 192;
      if (pack_heads) index = Tiles::PACKED_VARIANT;
      one = rows == 64 && (!masked || key_row);
      packed = key_row && rows >= 192 && key_row_packable(p);
      if (rows == 128) index = Tiles::TWO_CONSUMER_VARIANT;
      if (one) index = Tiles::ONE_CONSUMER_VARIANT;
      if (rows == 256) index = Tiles::FOUR_CONSUMER_VARIANT;  // masked or softcapped: moved on below
    }
    if (masked && !one) {
      // WIDE_KEY_ROW_TILE: where unmasked inputs would take that tile, or where it is forced.
      const bool wide_key_row = key_row && Tiles::WIDE_KEY_ROW_TILE >= 0 &&
                                (index == Tiles::WIDE_KEY_ROW_TILE ||
                                 (index == 0 && Tiles::plain_tile(p) == Tiles::WIDE_KEY_ROW_TILE));
      index = packed         ? Tiles::KEY_ROW_VARIANT
              : wide_key_row ? Tiles::WIDE_KEY_ROW_TILE
              : key_row      ? Tiles::KEY_ROW_TILE
                             : Tiles::MASKED_VARIANT;
    }
    // Softcap: the tiles built with it (d64: 192 rows unmasked, 128 masked).
    if (softcap && index != Tiles::FIRST_BASIC) index = masked ? Tiles::MASKED_VARIANT : 0;
    if (index != Tiles::FIRST_BASIC) {
      const auto [q_rows, block_n] = dispatch_variant<Variants>(index, [](auto cfg) {
        using C = typename decltype(cfg)::type;
        if constexpr (is_warp_specialised<C>) return std::pair<int, int>(C::Q_BOX_ROWS, C::BLOCK_N);
        return std::pair<int, int>(C::BLOCK_M, C::BLOCK_N);
      });
      if (!allow_ws || !encode_maps(p, q_rows, block_n, maps)) index = Tiles::FIRST_BASIC;
    }
    return dispatch_bool(masked, [&](auto MASKED) {
      using Basic = std::tuple_element_t<Tiles::FIRST_BASIC, Variants>;
      // The plain wgmma kernel reads softcap at run time: SOFTCAP is the ws kernels' only.
      if (index == Tiles::FIRST_BASIC) return f(TypeTag<Basic>{}, MASKED, false_type{}, true_type{});
      if constexpr (MASKED.value) {
        if constexpr (Tiles::KEY_ROW_VARIANT >= 0) {
          using KeyRow = std::tuple_element_t<Tiles::KEY_ROW_VARIANT, Variants>;
          if (packed) return f(TypeTag<KeyRow>{}, MASKED, true_type{}, false_type{});
        }
        if constexpr (D.value == 64) {
          using One = std::tuple_element_t<Tiles::ONE_CONSUMER_VARIANT, Variants>;
          if (index == Tiles::ONE_CONSUMER_VARIANT) return f(TypeTag<One>{}, MASKED, true_type{}, false_type{});
        }
        // The general mask code keeps its one build, softcap read at run time (d256's general
        // masks took the plain kernel above).
        return dispatch_bool(key_row, [&](auto KEY_ROW) {
          if constexpr (Tiles::WIDE_KEY_ROW_TILE >= 0) {
            using Wide = std::tuple_element_t<Tiles::WIDE_KEY_ROW_TILE, Variants>;
            if constexpr (KEY_ROW.value) {
              if (index == Tiles::WIDE_KEY_ROW_TILE) return f(TypeTag<Wide>{}, MASKED, KEY_ROW, false_type{});
            }
          }
          using Tile = std::tuple_element_t<KEY_ROW.value ? Tiles::KEY_ROW_TILE : Tiles::MASKED_VARIANT, Variants>;
          return f(TypeTag<Tile>{}, MASKED, KEY_ROW, std::bool_constant<!KEY_ROW.value>{});
        });
      } else {
        if (softcap) return f(TypeTag<std::tuple_element_t<0, Variants>>{}, MASKED, false_type{}, true_type{});
        return dispatch_variant<Variants>(index, [&](auto cfg) { return f(cfg, MASKED, false_type{}, false_type{}); });
      }
    });
  });
}

bool built_for_sm90a() {
#ifdef TRT_FASTOPS_CUDA_ARCHS
  return std::strstr(TRT_FASTOPS_CUDA_ARCHS, "90a") != nullptr;
#else
  return false;
#endif
}

}  // namespace

bool hopper_path_available() {
  LaunchDevice dev;
  return built_for_sm90a() && current_launch_device(&dev) == cudaSuccess && dev.cc_major == 9 && dev.cc_minor == 0;
}

bool hopper_path_supports(const AttentionParams& p) {
  return (p.dtype == DType::f16 || p.dtype == DType::bf16) && rows_aligned(p);
}

const char* hopper_kernel_name(const AttentionParams& p, int variant, bool allow_ws) {
  TmaMaps maps;
  return dispatch_dtype(p.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    return dispatch_hopper_config(p, variant, allow_ws, &maps, [&](auto cfg, auto MASKED, auto, auto) {
      return kernel_name<T, typename decltype(cfg)::type>(true, MASKED.value);
    });
  });
}

cudaError_t launch_attention_hopper(const AttentionParams& p, int variant, bool allow_ws, cudaStream_t stream) {
  TmaMaps maps;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      return dispatch_hopper_config(p, variant, allow_ws, &maps, [&](auto cfg, auto MASKED, auto KEY_ROW,
                                                                     auto SOFTCAP) {
        using CFG = typename decltype(cfg)::type;
        if constexpr (typed_key_row_build<CFG> && MASKED.value && KEY_ROW.value) {
          // Key padding in the inputs' own dtype (the additive masks of exported BERTs) takes a
          // kernel built for that mask type, the others one that reads any.
          return dispatch_bool(typed_key_row_mask(p), [&](auto TYPED) {
            using MASK = std::conditional_t<TYPED.value, T, void>;
            return launch_kernel<CFG, flash_fwd_ws_kernel<T, CFG, true, true, MASK, false>>(p, stream, maps);
          });
        } else if constexpr (is_warp_specialised<CFG>) {
          return launch_kernel<CFG, flash_fwd_ws_kernel<T, CFG, MASKED.value, KEY_ROW.value, void, SOFTCAP.value>>(
              p, stream, maps);
        } else {
          return launch_kernel<CFG, flash_fwd_hopper_kernel<T, CFG, MASKED.value>>(p, stream);
        }
      });
    }
  });
}

}  // namespace trt_fastops::attention
