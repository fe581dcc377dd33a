// Warp-specialised flash-attention forward for sm_90a (FlashAttention-3's
// structure, our own code). Device code only; the host side is attention_hopper.cu.
//
// A CTA owns 64 * CONSUMERS query rows and is 1 + CONSUMERS warpgroups:
//   producer (warpgroup 0, registers given back with setmaxnreg): one thread
//     issues TMA loads of Q once and of K_j / V_j into a STAGES-deep ring of
//     shared-memory buffers; each buffer has a "full" mbarrier (completed by
//     the TMA byte count) and an "empty" one (completed when all consumer
//     warps are done reading it). Warp 2 sends each consumer's output rows,
//     staged in shared memory, out with TMA stores.
//   consumers (warpgroups 1.., 64 rows each, registers raised; 2 consumers at
//     240 registers for d128, 3 at 160 for d64, where the exponentials weigh more,
//     1 at 224 with two CTAs per SM for d64 grids that would leave SMs idle,
//     4 at 112 with 64-key blocks for d64 sequences that 192-row tiles pad,
//     2 at 232 with 64- or 80-key blocks for d256):
//     S = Q K^T and O += P V with wgmma, the online softmax in registers.
// Within a consumer, S_{j+1} = Q K_{j+1}^T and O += P_j V_j are issued together
// and the softmax of S_{j+1} runs while P_j V_j is still on the tensor cores;
// O is brought to the new max (rescaled) just before the next P V is issued,
// while the next S product runs. PINGPONG additionally makes the
// consumers take turns issuing (named barriers, round robin), so one's softmax
// overlaps the others' matrix products.
// Tiles use the canonical 128-byte-swizzled layout ([D / 64][rows][64]) that
// both TMA (CU_TENSOR_MAP_SWIZZLE_128B) and the wgmma descriptors understand.
// Persistent (one CTA per SM walks the tiles), so a tile's output store and
// the next tile's Q load overlap the matrix work. The tiles come in a computed
// order (persistent_tile) or, for causal inputs given a workspace, drawn from
// an atomic counter (FlashArgs::tile_counter, zeroed before the launch): the
// issuing thread draws and passes each tile on through a shared-memory ring. CLUSTER configs
// launch thread-block clusters: CUDA graphs holding them are instantiated anew, never updated
// in place (GraphCache).
#pragma once

#include <cstdint>

#include <cuda.h>  // CUtensorMap (the type only; maps are encoded on the host)

#include "plugins/attention/attention_hopper.cuh"
#include "plugins/common/hopper.cuh"

namespace trt_fastops::attention {

// Tensor maps of Q, K, V and the output as 4-D tensors (dim, seq, head,
// batch), boxes of 64 dims x BLOCK_M (Q), BLOCK_N (K, V) or 64 (the output:
// one consumer's rows) rows.
struct TmaMaps {
  CUtensorMap q, k, v, o;
  // 0: no map for the output (or attention_set_output_store's consumers): the
  // consumers store their rows themselves. Also keeps ptxas's uniform datapath
  // in the consumer loop: without that cold copy the loop's descriptors went
  // through R2UR before every wgmma (ptxas 13.0, bench/NOTES-attention-log.md item 45).
  int o_mapped;
};
// Both travel as kernel parameters (4 KiB at most; the tail table is most of FlashArgs).
static_assert(sizeof(FlashArgs) + sizeof(TmaMaps) <= 4096 - 64, "kernel parameters past 4 KiB");

// Drawn tiles (FlashArgs::tile_counter) in flight from the issuing thread to
// the consumers and the store warp: the issuing thread writes tile `it` into
// slot it % TILE_RING before its q_full arrival for that tile, and writes it
// again (tile it + TILE_RING) only after q_empty of tile it + TILE_RING - 1,
// which the consumers release only once the store warp is past tile it + 1
// (their o_empty wait): three slots would do.
inline constexpr int TILE_RING = 4;

template <int D, int BN, int CONSUMERS, int STAGES, bool PINGPONG, int CLUSTER_CTAS = 1, bool PACKED = false>
struct HopperWsConfig {
  static constexpr const char* NAME = CLUSTER_CTAS > 1 ? "flash_fwd_ws_pingpong_c2"
                                      : PACKED         ? "flash_fwd_ws_pingpong_packed"
                                      : PINGPONG       ? "flash_fwd_ws_pingpong"
                                                       : "flash_fwd_ws";
  // CLUSTER > 1: CTAs in clusters of that many, on neighbouring query tiles of one head (the
  // launcher's grid and persistent_tile's order); each CTA loads its share of every K / V
  // block's 64-column atoms and multicasts it to all, and a stage is free once every CTA's
  // consumer warpgroups have released it, one warp of each in each CTA (CUTLASS's
  // PipelineTmaAsync in clusters; FlashAttention-3's non-causal d128 forward). Non-causal,
  // unmasked inputs only, no drawn tiles.
  static constexpr int CLUSTER = CLUSTER_CTAS;
  static_assert(CLUSTER == 1 || (CLUSTER == 2 && PINGPONG && D / 64 % CLUSTER == 0), "clusters of two, d128 ping-pong");
  static_assert(STAGES >= 2, "K/V ring of two or more stages");
  // PACK_HEADS: tiles over the heads' query rows laid end to end (FlashArgs::packed_tiles), so a
  // head whose rows are not a whole number of tiles pads none: a tile's 64-row consumer slots
  // each lie in one head, at most two heads a tile (q_len a multiple of 64, at least 128). Q comes
  // a slot at a time (Q_BOX_ROWS); K / V come for each head of the tile, the second's into a
  // second ring (KV_STREAMS) whose stages share the first's barriers; each consumer reads its
  // head's. Non-causal, unmasked inputs without softcap (all tiles then walk the same key blocks).
  static constexpr bool PACK_HEADS = PACKED;
  static_assert(!PACKED || (CLUSTER == 1 && CONSUMERS >= 2), "packed tiles: no clusters, two or more slots");
  static constexpr int KV_STREAMS = PACKED ? 2 : 1;
  static constexpr int HEAD_DIM = D, BLOCK_M = 64 * CONSUMERS, BLOCK_N = BN, NUM_WARPS = 4 * (CONSUMERS + 1);
  // One consumer (64-row tiles, for grids that leave SMs idle): two CTAs per
  // SM, so an SM's tensor cores and exponential units are shared by two tiles
  // only when there are more tiles than SMs.
  static constexpr int BLOCKS_PER_SM = CONSUMERS == 1 ? 2 : 1;
  static constexpr int THREADS = NUM_WARPS * 32, NUM_STAGES = STAGES, NUM_CONSUMERS = CONSUMERS;
  static constexpr bool PING_PONG = PINGPONG;
  // O brought to S_nb's max after P_{nb-1} V_{nb-1} lands, beside the
  // exponentials and P's packing (FlashAttention-3's order), rather than between
  // the S_nb and P_{nb-1} V_{nb-1} issues: d64's 192-row tile ran 0-6 % faster
  // (two settled A/Bs; causal 8k / 16k +2.5-6 %); d128 ran 1-4 % slower, the
  // other d64 tiles within noise, and the masked (key-row) build 0-3 % slower,
  // so those keep the early order (bench/NOTES-attention-log.md items 69-70).
  static constexpr bool RESCALE_LATE = D == 64 && CONSUMERS == 3;
  // P's row sums by the tensor cores (unmasked kernels): O += P V runs 8 columns wider
  // (m64n72k16), the extra ones reading a 16-row block of ones in shared memory, so
  // their accumulators hold the rows' sums of P and softmax_update drops its FADDs
  // (one per score). The ones sit after the K/V ring; each step's descriptor
  // reaches them through its leading byte offset. d64 +1.2 % (35 of 40 settled
  // readings faster); d128, as a separate m64n8k16 beside each step (V's two atoms
  // already set the offset's stride), -2 % (bench/NOTES-attention-log.md item 78).
  static constexpr bool SUM_BY_MMA = D == 64;
  static constexpr int ONES_BYTES = SUM_BY_MMA ? 16 * 128 : 0;
  static constexpr bool PERSISTENT = true;  // BLOCKS_PER_SM resident CTAs per SM walk the tiles
  static constexpr bool GRID_DEPENDENCY = true;  // waits for the grid ahead (grid_dependency_wait)
  static constexpr bool Q_BY_TMA = true;    // rows outside [0, q_len) arrive as zeros (TMA bounds)
  // 65536 registers per SM: 128 * 24 + 256 * 240, 128 * 32 + 384 * 160, two
  // CTAs of 128 * 32 + 128 * 224, or 128 * 24 + 512 * 112 (four consumers:
  // 64-key blocks, 80 registers of S, P and O). setmaxnreg moves registers
  // within the CTA's launch allocation: 168 x 384, 128 x 384, 128 x 256 and
  // 96 x 640 threads. d256 (O alone 128 registers a consumer thread) gives its
  // issuing thread 32, 128 * 32 + 256 * 232: at 24 its four-atom Q, K and V
  // loads spilled a register.
  static constexpr int PRODUCER_REGISTERS = (CONSUMERS == 2 && D <= 128) || CONSUMERS == 4 ? 24 : 32;
  static constexpr int CONSUMER_REGISTERS =
      CONSUMERS == 1 ? 224 : CONSUMERS == 2 ? (D <= 128 ? 240 : 232) : CONSUMERS == 3 ? 160 : 112;
  static_assert(CONSUMERS >= 1 && CONSUMERS <= 4, "one to four consumer warpgroups");
  static_assert(CONSUMERS < 4 || BN <= 64, "four consumers hold 64-key blocks only");
  static_assert(!(PINGPONG && CONSUMERS == 1), "ping-pong turns need two or more consumers");
  static constexpr int TILE_Q = BLOCK_M * D, TILE_KV = BN * D;  // elements
  static constexpr int Q_BOX_ROWS = PACKED ? 64 : BLOCK_M;       // Q's tensor-map box
  // Output staging: the tile's rows, or (O_SLOT: blocks wider than 128 keys or heads wider than
  // 128 dims, whose K/V ring leaves no room for the whole tile's) one consumer's 64 rows at a
  // time, the consumers taking the slot in turn: consumer c stages tile it's rows once the store
  // warp has read the slot's previous user's (consumer c - 1's of tile it, or the last
  // consumer's of tile it - 1), which o_empty[that consumer] marks.
  // O_IN_V: where even the slot doesn't fit beside Q and the ring (d256's 80-key blocks), the
  // whole tile's rows are staged in the V stages (FlashAttention-3's smem_o over smem_v): each
  // consumer waits until every consumer's last P V has read them, and the producer loads the next
  // tile's V only once the stores have read the staged rows (its Q and first K load before that).
  static constexpr int RING_BYTES = (TILE_Q + 2 * STAGES * KV_STREAMS * TILE_KV) * 2 + ONES_BYTES + 1024;
  // BARRIERS' bytes and the ints after them, with O_EMPTY (not known yet) at its most, CONSUMERS.
  static constexpr int MOST_BARRIER_BYTES = (2 + 4 * STAGES + 4 + 2 * CONSUMERS) * 8 + (6 + TILE_RING) * 4;
  static constexpr bool O_IN_V = RING_BYTES + 64 * D * 2 + MOST_BARRIER_BYTES > 227 * 1024;
  static constexpr bool O_SLOT = !O_IN_V && (BN > 128 || D > 128);
  // Causal persistent grids end on the launcher's tail table (persistent_tile, causal_tail): the
  // tiles that run causal inputs by default (not O_SLOT / O_IN_V: d256 keeps a CTA per tile or
  // its sections; not packed), of up to three consumers.
  static constexpr bool TAIL_TABLE = !O_SLOT && !O_IN_V && !PACKED && CONSUMERS <= 3;
  static constexpr int TILE_O = O_IN_V ? 0 : O_SLOT ? 64 * D : TILE_Q, O_EMPTY = O_SLOT ? CONSUMERS : 1;
  // O_IN_V: the staged tile's 64-column atoms (BLOCK_M rows each) a V stage holds.
  static constexpr int O_ATOMS_PER_V = TILE_KV / (BLOCK_M * 64);
  static_assert(!O_IN_V || (!SUM_BY_MMA && CLUSTER == 1 && STAGES * O_ATOMS_PER_V >= D / 64),
                "O_IN_V: the tile's output fits in the V stages");
  // Q, the output staging tile (so the next tile's Q can land during this
  // tile's last P V and epilogue; none under O_IN_V), STAGES x (K, V) (PACK_HEADS: twice, the second
  // head's after the first's), SUM_BY_MMA's ones (ONES_BYTES),
  // 1024 bytes of alignment slack, then the barriers: q_full, q_empty, k_full[STAGES], v_full[STAGES],
  // k_empty[STAGES], v_empty[STAGES], scan_full[2], scan_empty[2],
  // o_full[CONSUMERS], o_empty, then the
  // key-padding data: a two-slot ring of mask bounds from the scanning warp to
  // the issuing thread (2 x 2 ints) and the current tile's block counts for the
  // consumers (2 ints), then the drawn tiles' ring (TILE_RING ints).
  static constexpr int BARRIERS = 2 + 4 * STAGES + 4 + CONSUMERS + O_EMPTY;
  static constexpr int SMEM_BYTES =
      (TILE_Q + TILE_O + 2 * STAGES * KV_STREAMS * TILE_KV) * 2 + ONES_BYTES + 1024 + BARRIERS * 8 +
      (6 + TILE_RING) * 4;
  static_assert(D % 64 == 0 && BN % 16 == 0 && BN <= 256, "wgmma / TMA tiles");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA");
  static_assert(BLOCKS_PER_SM * (SMEM_BYTES + 1024) <= 228 * 1024, "shared memory per SM (1 KiB reserved per CTA)");
};

// Round `it` of a persistent grid: CTA blockIdx.x's tile, or `tiles` once
// none is left. Round it runs tiles [it * G, it * G + G) (G = gridDim.x).
// SNAKE (lpt_heads > 0: tiles of falling cost, block_work's causal order):
// CTAs take them in order on even rounds and in reverse on odd ones, so no CTA
// keeps drawing the heaviest. balance_ways > 0 (head-major tiles, each head's
// first a partial query block): the same tiles per round, but the partial ones
// go to CTAs [0, ways) in turn (head h's to CTA h % ways) and the full ones to
// the other CTAs in order. With ways = tiles % G, the CTAs that run a tile in
// the last round are the ones that drew the light tiles: d64 at 4k keys, the
// longest CTA runs 21.2 full tiles' time instead of 22 (bench/NOTES-attention-log.md item 60).
// TAIL (kernels with HopperWsConfig::TAIL_TABLE): from round a.tail_round on, the CTA's tiles
// come from the launcher's table (causal_tail), tiles once its column ends. (A branch and one
// load: with selects ptxas reordered the d128 kernel's softmax, with per-CTA offsets it spilled a
// register in the 24-register producer warps; this way every block loop stays as it was.)
template <bool TAIL = false>
__device__ __forceinline__ int persistent_tile(const FlashArgs& a, int it, int tiles) {
  const int g = int(gridDim.x), c = int(blockIdx.x), start = it * g;
  if (a.balance_ways <= 0) {
    if constexpr (TAIL) {
      if (a.tail_round > 0 && it >= a.tail_round) {
        const int t = int(a.tail_tiles[(it - a.tail_round) * g + c]);
        return t == TAIL_NONE ? tiles : t;
      }
    }
    return start + ((a.lpt_heads > 0 && (it & 1)) ? g - 1 - c : c);
  }
  if (start >= tiles) return tiles;
  const int m = a.m_blocks, ways = a.balance_ways;
  const int h0 = a.div_m_blocks.div(start + m - 1);                   // first head whose partial tile is in the round
  const int p = a.div_m_blocks.div(min(start + g, tiles) + m - 1) - h0;  // partial tiles in the round
  const int s = h0 - a.div_balance.div(h0) * ways;                    // CTA of head h0's partial tile
  int takers_below = p;                                               // CTAs below c that take a partial tile
  if (c < ways) {
    const int d = c >= s ? c - s : c - s + ways;
    if (d < p) return (h0 + d) * m;
    takers_below = s + p <= ways ? min(max(c - s, 0), p) : min(max(c - s, 0), ways - s) + min(c, s + p - ways);
  }
  const int q = start - h0 + c - takers_below;  // full tiles before this CTA's
  if (q + a.bh_count >= tiles) return tiles;
  const int head = a.div_full_blocks.div(q);
  return head * m + 1 + (q - head * (m - 1));
}

// Key blocks consumer c's 64 rows of a tile (rows from m0) read: a prefix of
// the tile's n_blocks, shorter near the causal diagonal for all but the last
// consumer, none for rows wholly outside [0, q_len) (m_shift's padding before
// row 0, the last tile's past q_len). narrow: none of those rows sees a key in
// the second half of the last of them (the causal diagonal, the keys' end).
template <int BN>
__device__ __forceinline__ int consumer_blocks(const FlashArgs& a, int m0, int c, int n_blocks, bool& narrow) {
  narrow = false;
  const int r0 = max(m0 + 64 * c, 0), r1 = min(m0 + 64 * c + 64, a.q_len);
  if (r0 >= r1) return 0;
  const int last = last_visible_key<false>(a, r1 - 1);  // of the consumer's last row
  if (last < 0) return 0;
  const int nc = min(n_blocks, last / BN + 1);
  narrow = nc == last / BN + 1 && last % BN < BN / 2;
  return nc;
}

// Persistent: CTA c runs tiles persistent_tile(0), persistent_tile(1), ... in
// block_work's order. The K/V ring and the Q buffer keep their barrier phases
// across tiles.
// KEY_ROW (with MASKED): the mask has one row for every query (key padding),
// loaded per key block while the S product runs. Warp 1 of the producer
// warpgroup (otherwise idle) scans each tile's mask row (key_row_bounds), up to
// two tiles ahead through a two-slot ring (a scan inside the issuing warp
// spilled at 24 registers): key blocks past the last live key are neither
// loaded nor computed, and blocks whose mask is all no-op take the unmasked
// score preparation (no mask loads or adds). The issuing thread publishes the
// tile's two block counts before its q_full arrival (a release), so each
// consumer reads them after its q_full wait and all walk the same blocks.
// With three consumers the prefetched mask is held packed (KeyRowMaskPacked).
// MASK (KEY_ROW): the mask's element type, or void for any (dispatch_mask).
// SOFTCAP: built for softcapped scores too; without it (the launcher's choice
// for inputs without softcap) the kernel has half the code (tanhf per score in
// each copy of the score preparation), which matters where a tile's first
// instructions come from L2 or DRAM: short grids, inside a model.
template <typename T, typename CFG, bool MASKED, bool KEY_ROW = false, typename MASK = void, bool SOFTCAP = true>
__global__ void __launch_bounds__(CFG::THREADS, CFG::BLOCKS_PER_SM)
    flash_fwd_ws_kernel(const __grid_constant__ FlashArgs a, const __grid_constant__ TmaMaps maps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = CFG::HEAD_DIM, BM = CFG::BLOCK_M, BN = CFG::BLOCK_N, STAGES = CFG::NUM_STAGES;
  constexpr int NT = BN / 8, DT = D / 8, ATOMS = D / 64;
  constexpr uint32_t Q_BYTES = CFG::TILE_Q * 2, KV_BYTES = CFG::TILE_KV * 2;
  constexpr int CONSUMERS = CFG::NUM_CONSUMERS, CONSUMER_WARPS = 4 * CONSUMERS;
  // The tail table's reads (persistent_tile<TAIL>): unmasked kernels without softcap code only.
  constexpr bool TAIL = CFG::TAIL_TABLE && !MASKED && !SOFTCAP;

  extern __shared__ unsigned char smem_raw[];
  T* s_q = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* s_o = s_q + CFG::TILE_Q;
  T* s_kv = s_o + CFG::TILE_O;  // stage i: K at s_kv + 2i * TILE_KV, V right after
  // PACK_HEADS: the second head's ring, stage i at s_kv + 2 (STAGES + i) * TILE_KV.
  T* s_ones = s_kv + 2 * STAGES * CFG::KV_STREAMS * CFG::TILE_KV;  // SUM_BY_MMA: 16 rows of 64 ones (1024-aligned)
  // O_IN_V: the staged output's 64-column atom `at` (BLOCK_M rows) in the V stages.
  auto o_in_v = [&](int at) {
    constexpr int PER_V = CFG::O_IN_V ? CFG::O_ATOMS_PER_V : 1;  // (others never call it)
    return s_kv + (2 * (at / PER_V) + 1) * CFG::TILE_KV + (at % PER_V) * BM * 64;
  };
  uint64_t* q_full = reinterpret_cast<uint64_t*>(reinterpret_cast<unsigned char*>(s_ones) + CFG::ONES_BYTES);
  uint64_t* q_empty = q_full + 1;
  uint64_t* k_full = q_empty + 1;
  uint64_t* v_full = k_full + STAGES;
  uint64_t* k_empty = v_full + STAGES;
  uint64_t* v_empty = k_empty + STAGES;
  uint64_t* scan_full = v_empty + STAGES;  // KEY_ROW: slot s of the scan ring written / read (else tie_wait's)
  uint64_t* scan_empty = scan_full + 2;
  uint64_t* o_full = scan_empty + 2;       // consumer c's rows of s_o staged
  uint64_t* o_empty = o_full + CONSUMERS;  // s_o read by the tile's stores (O_SLOT: by consumer c's, o_empty[c])
  int* scan_slots = reinterpret_cast<int*>(o_empty + CFG::O_EMPTY);  // per slot: zero_end, live_end
  int* key_blocks = scan_slots + 4;                          // the current tile's, for the consumers
  int* tile_ring = key_blocks + 2;                           // drawn tiles (TILE_RING)
  constexpr bool key_row = MASKED && KEY_ROW;
  constexpr bool late_rescale = CFG::RESCALE_LATE && !MASKED;  // see HopperWsConfig::RESCALE_LATE
  // Tiles drawn from a counter: unmasked kernels only (the key-row kernels'
  // scanning warp runs ahead of the issuing thread; the general mask code
  // spills more with it).
  const bool drawn = !MASKED && a.tile_counter != nullptr;
  // P_{nb-1} V_{nb-1}'s wait held below row 0's max (ping-pong, unmasked kernels): ptxas puts a
  // wgmma wait as early as it may, before the whole softmax, unless a barrier-class instruction
  // that needs a late value comes first. A never-taken arrive on scan_full (unused without key
  // rows) is that instruction: the softmax's maxima then overlap the product, with no block
  // boundary (item 73's branch ran 4 % slower). d128 +1.4 %, d64 +0.6 % (NOTES item 75).
  constexpr bool tie_wait = CFG::PING_PONG && !MASKED;
  // Row 1's max after row 0's (softmax_update's ROW_CHAIN): d128 only, where it measured faster.
  constexpr bool row_chain = tie_wait && D == 128;
  constexpr bool mma_sum = CFG::SUM_BY_MMA && !MASKED;
  constexpr int DO = DT + (mma_sum ? 1 : 0);  // o's column tiles: the last holds the row sums
  // A consumer's last key block whose second half none of its rows sees (consumer_blocks'
  // narrow: half the consumers' diagonal blocks in causal tiles) runs its score preparation,
  // softmax and P V on its first half only (its S stays whole: see issue_s). d64's unmasked
  // 128-key tiles of one and three consumers: causal 512 - 2k +2-3 % (bench/NOTES-attention-log.md
  // item 87). d128 read -0.5 % non-causal, where no block is narrow (its kernel's code grew by a
  // fifth), and the two-consumer d64 tile spilled 4 bytes; masked kernels walk the tile's
  // blocks, not the consumer's.
  constexpr bool narrow_blocks = !MASKED && D == 64 && BN == 128 && CONSUMERS != 2;
  constexpr bool pack_heads = CFG::PACK_HEADS;
  static_assert(!pack_heads || (!MASKED && !SOFTCAP), "packed tiles: unmasked inputs without softcap");

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t cta_rank = CFG::CLUSTER > 1 ? cluster_cta_rank() : 0;
  const int tiles = pack_heads ? a.packed_tiles : a.m_blocks * a.bh_count;
  if constexpr (mma_sum) {
    // Ones for the row sums, written before any product reads them (async proxy).
    const uint32_t one2 = std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;
    for (int i = tid; i < CFG::ONES_BYTES / 16; i += CFG::THREADS)
      reinterpret_cast<uint4*>(s_ones)[i] = make_uint4(one2, one2, one2, one2);
    fence_proxy_async_shared();
  }
  if (tid == 0) {
    mbar_init(q_full, 1);
    mbar_init(q_empty, CONSUMER_WARPS);
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(k_full + st, 1);
      mbar_init(v_full + st, 1);
      // This CTA's consumer warps, or (CLUSTER) every CTA's consumer warpgroups.
      constexpr int KV_RELEASES = CFG::CLUSTER > 1 ? CONSUMERS * CFG::CLUSTER : CONSUMER_WARPS;
      mbar_init(k_empty + st, KV_RELEASES);
      mbar_init(v_empty + st, KV_RELEASES);
    }
    if constexpr (key_row) {
      for (int sl = 0; sl < 2; ++sl) {
        mbar_init(scan_full + sl, 1);
        mbar_init(scan_empty + sl, 1);
      }
    }
    for (int c = 0; c < CONSUMERS; ++c) mbar_init(o_full + c, 128);  // the consumer's threads
    for (int c = 0; c < CFG::O_EMPTY; ++c) mbar_init(o_empty + c, 32);  // the store warp's lanes
    if constexpr (tie_wait) mbar_init(scan_full, 1);
    mbar_init_fence();
  }
  __syncthreads();
  if constexpr (CFG::CLUSTER > 1) cluster_sync();  // the other CTAs' barriers, before any load or release reaches them
  // Launched with programmatic stream serialization (launch_kernel): the set-up above overlaps the
  // grid ahead's last CTAs; no thread touches global memory before that grid is done.
  grid_dependency_wait();

  if (warp < 4) {
    // Producer. Use u of a buffer (u = 0, 1, ...) first waits for the
    // consumers' release of use u - 1.
    setmaxnreg_dec<CFG::PRODUCER_REGISTERS>();
    if (tid == 0) {
      tma_prefetch_descriptor(&maps.q);
      tma_prefetch_descriptor(&maps.k);
      tma_prefetch_descriptor(&maps.v);
      int kv = 0;
      // Drawn: the CTA's first tile is blockIdx.x, each next one gridDim.x plus
      // the counter's old value, drawn a tile ahead (the atomic's round trip
      // overlaps this tile's loads). Without a tile left, the consumers and the
      // store warp get `tiles` through the ring.
      int tile = drawn ? int(blockIdx.x) : persistent_tile<TAIL>(a, 0, tiles);
      for (int it = 0;; ++it) {
        if (tile >= tiles) {
          // The CTA's last tile is loading: the next grid may launch once every CTA is here, so
          // its CTAs take the SMs as this grid's leave them (SMs this grid leaves idle stay so
          // until its last round; a trigger at the start read 1.3 % slower on d128's 128-CTA grids).
          launch_dependents();
          if (drawn) {
            if (it > 0) mbar_wait(q_empty, (it - 1) & 1);
            tile_ring[it % TILE_RING] = tiles;
            mbar_arrive(q_full);  // a release: the ring's word is seen after the wait
          }
          break;
        }
        const int next = drawn ? atomicAdd(a.tile_counter, 1) + int(gridDim.x) : 0;
        BlockWork w =
            pack_heads ? packed_work<BM, BN>(a, tile, 0) : block_work<BM, BN, MASKED, KEY_ROW, SOFTCAP>(a, tile);
        // PACK_HEADS: the K / V head of the tile's last slot where it differs from the first's
        // (the second ring's; a slot past the last row counts as the last head's).
        int kvh2 = 0, b2 = 0;
        bool second = false;
        if constexpr (pack_heads) {
          const BlockWork w2 = packed_work<BM, BN>(a, tile, CONSUMERS - 1);
          kvh2 = w2.kvh;
          b2 = w2.b;
          second = kvh2 != w.kvh || b2 != w.b;
        }
        const uint32_t kv_bytes = second ? 2 * KV_BYTES : KV_BYTES;
        // CLUSTER: this CTA's share of a K or V block's 64-column atoms, multicast to every CTA.
        // (Without clusters load_kv keeps its own loops: through this lambda ptxas ordered the
        // producer's code differently, where now every kernel without clusters is as before.)
        auto multicast_share = [&](T* dst, const CUtensorMap* map, uint64_t* bar, int nb) {
#pragma unroll
          for (int at = 0; at < ATOMS; ++at) {
            if (at % CFG::CLUSTER == int(cta_rank))
              tma_load_4d_multicast(dst + at * BN * 64, map, bar, uint16_t((1u << CFG::CLUSTER) - 1), at * 64,
                                    nb * BN, w.kvh, w.b);
          }
        };
        auto load_kv = [&](int nb) {
          const int st = kv % STAGES, round = kv / STAGES;
          T* s_k = s_kv + 2 * st * CFG::TILE_KV;
          T* s_v = s_k + CFG::TILE_KV;
          if (round > 0) mbar_wait(k_empty + st, (round - 1) & 1);
          mbar_arrive_expect_tx(k_full + st, kv_bytes);  // CLUSTER: the whole block, every CTA's share
          if constexpr (CFG::CLUSTER > 1) {
            multicast_share(s_k, &maps.k, k_full + st, nb);
          } else {
#pragma unroll
            for (int at = 0; at < ATOMS; ++at)
              tma_load_4d(s_k + at * BN * 64, &maps.k, k_full + st, at * 64, nb * BN, w.kvh, w.b);
            if (pack_heads && second) {
#pragma unroll
              for (int at = 0; at < ATOMS; ++at)
                tma_load_4d(s_k + 2 * STAGES * CFG::TILE_KV + at * BN * 64, &maps.k, k_full + st, at * 64, nb * BN,
                            kvh2, b2);
            }
          }
          if (round > 0) mbar_wait(v_empty + st, (round - 1) & 1);
          // O_IN_V: the previous tile's staged rows, read by its stores, before this tile's first V.
          if (CFG::O_IN_V && nb == 0 && it > 0) mbar_wait(o_empty, (it - 1) & 1);
          mbar_arrive_expect_tx(v_full + st, kv_bytes);
          if constexpr (CFG::CLUSTER > 1) {
            multicast_share(s_v, &maps.v, v_full + st, nb);
          } else {
#pragma unroll
            for (int at = 0; at < ATOMS; ++at)
              tma_load_4d(s_v + at * BN * 64, &maps.v, v_full + st, at * 64, nb * BN, w.kvh, w.b);
            if (pack_heads && second) {
#pragma unroll
              for (int at = 0; at < ATOMS; ++at)
                tma_load_4d(s_v + 2 * STAGES * CFG::TILE_KV + at * BN * 64, &maps.v, v_full + st, at * 64, nb * BN,
                            kvh2, b2);
            }
          }
          ++kv;
        };
        if (it > 0) mbar_wait(q_empty, (it - 1) & 1);
        if (drawn) tile_ring[it % TILE_RING] = tile;  // published by the q_full arrival below
        // KEY_ROW: Q and the first K/V block are on their way before the
        // tile's mask bounds are awaited (a tile that runs at all keeps its
        // first block: key_row_blocks never shrinks n_blocks below 1), so the
        // scan's latency hides behind theirs; q_full's one arrival comes
        // after the counts are published (a release). (Consumers issuing the
        // first S product before the counts, and the second block loaded
        // ahead, measured no faster on the H100.)
        if constexpr (key_row) {
          mbar_expect_tx(q_full, Q_BYTES);
        } else {
          mbar_arrive_expect_tx(q_full, Q_BYTES);
        }
        if constexpr (pack_heads) {
          // A slot at a time, each from its own head (a slot past the last row reads the last
          // head's last rows: never used).
#pragma unroll
          for (int c = 0; c < CONSUMERS; ++c) {
            int row;
            const int bh = packed_slot(a, tile, c, BM, row);
            const int bq = min(bh, a.bh_count - 1), b = a.div_q_heads.div(bq);
            const int r = bh < a.bh_count ? row : a.q_len - 64;
#pragma unroll
            for (int at = 0; at < ATOMS; ++at)
              tma_load_4d(s_q + at * BM * 64 + c * 64 * 64, &maps.q, q_full, at * 64, r, bq - b * a.q_heads, b);
          }
        } else {
#pragma unroll
          for (int at = 0; at < ATOMS; ++at)
            tma_load_4d(s_q + at * BM * 64, &maps.q, q_full, at * 64, w.m0, w.h, w.b);
        }
        const bool any = w.n_blocks > 0;
        if (any) load_kv(0);
        if (CFG::O_IN_V && !any && it > 0) mbar_wait(o_empty, (it - 1) & 1);  // one wait a tile, in order
        if constexpr (key_row) {
          const int sl = it & 1;
          mbar_wait(scan_full + sl, (it >> 1) & 1);
          const KeyBounds kb{scan_slots[2 * sl], scan_slots[2 * sl + 1]};
          mbar_arrive(scan_empty + sl);
          const int zero_blocks = key_row_blocks<BN>(kb, w);
          // The consumers read the previous tile's counts before releasing q_empty.
          key_blocks[0] = w.n_blocks;
          key_blocks[1] = zero_blocks;
          mbar_arrive(q_full);
        }
        for (int nb = any ? 1 : 0; nb < w.n_blocks; ++nb) load_kv(nb);
        tile = drawn ? next : persistent_tile<TAIL>(a, it + 1, tiles);
      }
    } else if (key_row && warp == 1) {
      // The mask scans, in the tiles' order; use u of a slot waits for the
      // issuing thread's release of use u - 1.
      for (int it = 0;; ++it) {
        const int tile = persistent_tile<TAIL>(a, it, tiles);
        if (tile >= tiles) break;
        int m_block;
        const int bh = tile_head(a, tile, m_block);
        const KeyBounds kb = key_row_bounds<MASK>(a, bh / a.q_heads, bh % a.q_heads, lane);
        const int sl = it & 1;
        if (it >= 2) mbar_wait(scan_empty + sl, ((it >> 1) - 1) & 1);
        if (lane == 0) {
          scan_slots[2 * sl] = kb.zero_end;
          scan_slots[2 * sl + 1] = kb.live_end;
          mbar_arrive(scan_full + sl);
        }
        __syncwarp();
      }
    } else if (warp == 2) {
      // Output stores: each consumer stages its 64 rows in its part of s_o and
      // goes on to its next tile; lane 0 sends them with TMA stores (a warp
      // outside the consumers, so their registers hold no tensor-map
      // addresses) and frees s_o once the tile's stores have read it. Rows past
      // q_len are clipped, but a box that starts before row 0 (m_shift) is an
      // illegal instruction on the H100: the warp copies those rows itself.
      if (lane == 0) tma_prefetch_descriptor(&maps.o);
      for (int it = 0;; ++it) {
        int tile;
        if (drawn) {
          mbar_wait(o_full, it & 1);  // consumer 0 staged tile it (or read that none is left)
          tile = tile_ring[it % TILE_RING];
        } else {
          tile = persistent_tile<TAIL>(a, it, tiles);
        }
        if (tile >= tiles) break;
        int m_block = 0;
        int bh = pack_heads ? 0 : tile_head(a, tile, m_block);
        int b = a.div_q_heads.div(bh), h = bh - b * a.q_heads;
        const int m0 = m_block * BM - a.m_shift;
        constexpr int O_ROWS = CFG::O_SLOT ? 64 : BM;  // rows of the staging buffer
        for (int c = 0; c < CONSUMERS; ++c) {
          mbar_wait(o_full + c, it & 1);
          int row0 = m0 + 64 * c;
          if constexpr (pack_heads) {
            bh = packed_slot(a, tile, c, BM, row0);  // past the last row: row0 = q_len, not stored
            b = a.div_q_heads.div(min(bh, a.bh_count - 1));
            h = bh - b * a.q_heads;
          }
          const int local0 = CFG::O_SLOT ? 0 : 64 * c;  // the consumer's first row in s_o
          if (!maps.o_mapped || row0 + 64 <= 0 || row0 >= a.q_len) {
            // stored by the consumers / no rows
          } else if (row0 >= 0) {
            if (lane == 0) {
#pragma unroll
              for (int at = 0; at < ATOMS; ++at)
                tma_store_4d(&maps.o, (CFG::O_IN_V ? o_in_v(at) : s_o + at * O_ROWS * 64) + local0 * 64, at * 64,
                             row0, h, b);
              tma_store_commit();
            }
          } else {
            // 4-byte steps: the producer's 24 registers hold no 16-byte ones beside the loop's state.
            copy_staged_rows<T, 64, D, uint32_t, 1>(
                a, static_cast<T*>(a.out) + b * a.o_sb + h * a.o_sh, row0, local0, lane,
                [&](int row, int col) {
                  if constexpr (CFG::O_IN_V) return o_in_v(col >> 6) + sw128_offset<O_ROWS>(row, col & 63);
                  return s_o + sw128_offset<O_ROWS>(row, col);
                });
          }
          // Every lane releases its own reads of s_o (the copies'; lane 0's TMA stores'):
          // under O_SLOT the slot is the next consumer's once these rows are read,
          // otherwise s_o is the next tile's once all consumers' rows are.
          if (CFG::O_SLOT || c == CONSUMERS - 1) {
            if (lane == 0) tma_store_wait<0, true>();
            mbar_arrive(o_empty + (CFG::O_SLOT ? c : 0));
          }
        }
      }
      if (lane == 0) tma_store_wait<0, false>();  // the rows written before the CTA exits
    }
  } else {
    setmaxnreg_inc<CFG::CONSUMER_REGISTERS>();
    const int cw = warp - 4;  // consumer warp: accumulator rows 16 * cw ...
    const int cg = cw >> 2;   // consumer warpgroup: rows 64 * cg ...
    // cg broadcast from lane 0, for Q's wgmma descriptors only: ptxas then
    // knows they are warp-uniform and keeps them off R2UR in the block loop
    // (CUTLASS's canonical_warp_idx_sync). Broadcasting cw itself put every
    // cg-derived value (barrier ids, row offsets) in uniform registers, which
    // overflowed into local memory in the d128 key-row tiles (ptxas 13.0).
    const int cg_uniform = __shfl_sync(0xffffffffu, cg, 0);
    const int g = lane >> 2, t = lane & 3;
    const int warp_row0 = cw * 16;

    float o[1][DO][4];
    float row_max[1][2], row_sum[1][2];

    // Q's descriptor for k step kk. hoist_q builds all of them before the tile loop, through a
    // shuffle from lane 0: ptxas then can't rebuild them from the shared-memory base in the
    // block loop (two uniform instructions and a mask per S product) and holds each in a
    // uniform register group of its own, as FA3's loop does. Unmasked d64 kernels without
    // softcap only: d64 +0.6 %, d128 fp16 1-2 % slower (NOTES item 81); the general-mask
    // kernels spilled more with it.
    constexpr bool hoist_q = !MASKED && !SOFTCAP && D == 64;
    const uint64_t desc_q0 = sw128_desc(s_q + cg_uniform * 64 * 64, 16);
    auto q_desc = [&](int kk) {
      return desc_advance(desc_q0, ((kk >> 2) * BM * 64 + (kk & 3) * 16) * sizeof(T));
    };
    uint64_t desc_qs[D / 16];
    if constexpr (hoist_q) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) desc_qs[kk] = __shfl_sync(0xffffffffu, q_desc(kk), 0);
    }
    // S = Q K^T from stage st (K-major A and B), written fresh (no accumulation). Always the
    // whole block: a narrow block's S as m64n64 products into s's first half had ptxas
    // serialise every wgmma of the kernel (C7511 / C7515); into an array of its own it compiled
    // cleanly but measured level (bench/NOTES-attention-log.md item 88 (a)).
    // PACK_HEADS: the ring of this consumer's head this tile (the second's, s_kv + 2 STAGES TILE_KV,
    // where its head is not the tile's first).
    const T* kv_ring = s_kv;
    auto issue_s = [&](float (&s)[1][NT][4], int st) {
      const T* s_k = kv_ring + 2 * st * CFG::TILE_KV;
      const uint64_t desc_k0 = sw128_desc(s_k, 16);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t desc_q = hoist_q ? desc_qs[kk] : q_desc(kk);
        const uint64_t desc_k = desc_advance(desc_k0, ((kk >> 2) * BN * 64 + (kk & 3) * 16) * sizeof(T));
        Wgmma<BN, T>::ss(s[0], desc_q, desc_k, kk > 0 ? 1 : 0);
      }
    };
    // O += P V from stage st: 16 keys per step; V's 64-wide column atoms are BN * 128 bytes apart.
    // mma_sum: DO * 8 = D + 8 columns, the last 8 from the ones' atom, a leading byte offset past
    // V's that shrinks as each step's start moves on, so all steps read the same 16 rows of ones.
    // narrow: the block's first BN / 2 keys only. Fenced and committed here, so no branch falls
    // between a fence and its commit.
    auto issue_pv = [&](const uint32_t (&ap)[NT / 2][1][4], int st, bool narrow) {
      const T* s_v = kv_ring + (2 * st + 1) * CFG::TILE_KV;
      const uint64_t desc_v0 = sw128_desc(s_v, mma_sum ? uint32_t(s_ones - s_v) * sizeof(T) : BN * 128);
      auto pv_step = [&](int ks) {
        const uint32_t bytes = ks * 16 * 64 * sizeof(T);
        Wgmma<DO * 8, T>::rs(o[0], ap[ks][0], mma_sum ? desc_advance_lbo(desc_v0, bytes) : desc_advance(desc_v0, bytes));
      };
      if constexpr (narrow_blocks) {
        if (narrow) {
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < BN / 32; ++ks) pv_step(ks);
          wgmma_commit();
          return;
        }
      }
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < BN / 16; ++ks) pv_step(ks);
      wgmma_commit();
    };
    // PINGPONG turns: consumer c waits on barrier 1 + c before issuing its
    // matrix products and then lets consumer c + 1 (mod CONSUMERS) go. The
    // last consumer opens with a free arrival for consumer 0, which closes
    // with one extra wait, so every barrier sees as many arrivals as waits.
    auto turn_begin = [&] {
      if constexpr (CFG::PING_PONG) named_barrier_sync(1 + cg, 256);
    };
    auto turn_end = [&] {
      if constexpr (CFG::PING_PONG) named_barrier_arrive(1 + (cg + 1) % CONSUMERS, 256);
    };
    auto release = [&](uint64_t* bar) {
      if (lane == 0) mbar_arrive(bar);  // wgmma waits are warp-wide: the whole warp is past its reads
    };
    // A K / V stage. CLUSTER: warp r of each consumer warpgroup releases it in CTA r (whose loads
    // fill this CTA's copy too); that warp's wgmma wait covers its warpgroup's product, whose
    // operands the four warps read together (CUTLASS's spread_arrivals_to_warpgroup relies on the
    // same). Lane r of every consumer warp releasing it in CTA r ran 0.5 % faster to 2.6 %
    // slower (bench/NOTES-attention-log.md item 85).
    auto release_kv = [&](uint64_t* bar) {
      if constexpr (CFG::CLUSTER > 1) {
        if (lane == 0 && (cw & 3) < CFG::CLUSTER) mbar_arrive_cluster(bar, uint32_t(cw & 3));
      } else {
        release(bar);
      }
    };
    if constexpr (CFG::PING_PONG) {
      if (cg == CONSUMERS - 1) named_barrier_arrive(1, 256);
    }
    // Key-padding masks (one mask row for all queries) are loaded while S runs,
    // for the blocks past the no-op ones; three consumers (160 registers) hold
    // them packed (KeyRowMaskPacked: the launcher sends only masks it can hold).
    constexpr bool packed_mask = key_row && CONSUMERS == 3;
    std::conditional_t<packed_mask, KeyRowMaskPacked<NT>, KeyRowMask<NT>> km;
    BlockWork w_cur{};
    int zero_blocks = 0;  // KEY_ROW: leading blocks whose mask is a no-op
    // KEY_ROW: the mask's log2 values to the scores' units (block_work<.., KEY_ROW> keeps raw scores).
    auto mask_unit = [&] { return w_cur.raw_scores ? a.inv_scale_log2 : 1.f; };
    auto load_mask = [&](int nb) {
      if constexpr (packed_mask) {
        if (nb >= zero_blocks) load_key_row_mask_packed<NT>(km, a, w_cur, nb * BN, t);
      } else if constexpr (key_row) {
        if (nb >= zero_blocks) load_key_row_mask<NT, MASK>(km, a, w_cur, nb * BN, t, mask_unit());
      }
    };
    // The block's scores prepared, then its softmax; narrow: of its first BN / 2 keys only.
    auto softmax_block = [&](float (&s)[1][NT][4], float (&alpha)[1][2], int nb, bool narrow) {
      if constexpr (narrow_blocks) {
        if (narrow) {
          prepare_scores<1, NT, MASKED, SOFTCAP, NT / 2>(s, a, w_cur, w_cur.m0 + warp_row0, nb * BN, g, t);
          softmax_update<1, NT, row_chain, !mma_sum, NT / 2>(s, row_max, row_sum, w_cur.exp_scale, alpha);
          return;
        }
      }
      if constexpr (key_row) {
        if (nb < zero_blocks) {
          prepare_scores<1, NT, false, SOFTCAP>(s, a, w_cur, w_cur.m0 + warp_row0, nb * BN, g, t);
        } else {
          scale_scores<1, NT, SOFTCAP>(s, a, w_cur);
          if constexpr (packed_mask) {
            apply_key_row_mask_packed<1, NT>(s, km, a, w_cur.m0 + warp_row0, nb * BN, g, t, mask_unit());
          } else {
            apply_key_row_mask<1, NT>(s, km, a, w_cur.m0 + warp_row0, nb * BN, g, t);
          }
        }
      } else {
        prepare_scores<1, NT, MASKED, SOFTCAP>(s, a, w_cur, w_cur.m0 + warp_row0, nb * BN, g, t);
      }
      softmax_update<1, NT, row_chain, !mma_sum>(s, row_max, row_sum, w_cur.exp_scale, alpha);
    };
    auto pack = [&](const float (&s)[1][NT][4], uint32_t (&ap)[NT / 2][1][4], bool narrow) {
      if constexpr (narrow_blocks) {
        if (narrow) return pack_p<T, 1, NT, NT / 2>(s, ap);
      }
      pack_p<T, 1, NT>(s, ap);
    };

    int kv = 0;
    for (int it = 0;; ++it) {
      int tile;
      if (drawn) {
        mbar_wait(q_full, it & 1);  // the issuing thread wrote the ring before its arrival
        int published = 0;
        if (lane == 0) published = tile_ring[it % TILE_RING];
        tile = __shfl_sync(0xffffffffu, published, 0);  // warp-uniform for ptxas
      } else {
        tile = persistent_tile<TAIL>(a, it, tiles);
      }
      if (tile >= tiles) {
        if (drawn) {
          // The store warp learns it from o_full, whose previous phase it must have seen first.
          if (it > 0) mbar_wait(o_empty + CFG::O_EMPTY - 1, (it - 1) & 1);
          mbar_arrive(o_full + cg);
        }
        break;
      }
      if constexpr (pack_heads) {
        // This consumer's own head and rows, and its head's ring.
        w_cur = packed_work<BM, BN>(a, tile, cg_uniform);
        const BlockWork w0 = packed_work<BM, BN>(a, tile, 0);
        kv_ring = s_kv + (w_cur.kvh != w0.kvh || w_cur.b != w0.b ? 2 * STAGES * CFG::TILE_KV : 0);
      } else {
        w_cur = block_work<BM, BN, MASKED, KEY_ROW, SOFTCAP>(a, tile);
      }
      const BlockWork& w = w_cur;
#pragma unroll
      for (int dt = 0; dt < DO; ++dt) o[0][dt][0] = o[0][dt][1] = o[0][dt][2] = o[0][dt][3] = 0.f;
      row_max[0][0] = row_max[0][1] = NEG_INF;
      row_sum[0][0] = row_sum[0][1] = 0.f;

      mbar_wait(q_full, it & 1);
      if constexpr (key_row) {
        // The issuing thread's counts for this tile. Lane 0 reads them, so the
        // read is ordered before this warp's q_empty release (lane 0 arrives).
        int published[2] = {0, 0};
        if (lane == 0) {
          published[0] = key_blocks[0];
          published[1] = key_blocks[1];
        }
        w_cur.n_blocks = __shfl_sync(0xffffffffu, published[0], 0);
        zero_blocks = __shfl_sync(0xffffffffu, published[1], 0);
      }
      // This consumer's blocks: the tile's first nc. The rest it only releases
      // (below); the consumers' matrix products and exponentials then serve the
      // rows that need them. Unmasked kernels only: the masked ones have no
      // register for the second count (they spilled). From cg_uniform: a loop
      // bound ptxas can't prove warp-uniform took the loop's wgmma descriptors
      // off the uniform datapath (R2UR before every wgmma, 5-8 % slower).
      bool narrow = false;  // the consumer's last block is narrow (narrow_blocks)
      const int nc = MASKED ? w.n_blocks : consumer_blocks<BN>(a, w.m0, cg_uniform, w.n_blocks, narrow);
      narrow = narrow_blocks && narrow;
      if (nc == 0) {
        release(q_empty);
      } else {
        float s[1][NT][4];
        uint32_t ap[NT / 2][1][4];
        float alpha[1][2];

        int st = kv % STAGES;
        mbar_wait(k_full + st, (kv / STAGES) & 1);
        turn_begin();
        wgmma_fence();
        issue_s(s, st);
        wgmma_commit();
        turn_end();
        load_mask(0);
        wgmma_wait<0>();
        pin_registers<NT>(s[0]);
        release_kv(k_empty + st);
        if (nc == 1) release(q_empty);  // the next tile's Q may land now
        const bool narrow0 = narrow && nc == 1;  // block 0 is the consumer's last
        softmax_block(s, alpha, 0, narrow0);  // o is still zero: nothing to rescale
        pack(s, ap, narrow0);

        // Block nb's S beside block nb - 1's P V, then block nb's softmax (narrow_s: its first half).
        auto step = [&](int nb, bool narrow_s) {
          const int pst = st, pphase = (kv / STAGES) & 1;  // block nb - 1 (its P V is still to do)
          ++kv;
          st = kv % STAGES;
          mbar_wait(k_full + st, (kv / STAGES) & 1);
          mbar_wait(v_full + pst, pphase);
          turn_begin();
          wgmma_fence();
          issue_s(s, st);
          wgmma_commit();
          // O to block nb - 1's max while S_nb runs (the fence orders these
          // writes before the P V product that accumulates into o).
          if (!late_rescale && nb > 1) rescale_o<1, DO>(o, alpha);
          issue_pv(ap, pst, false);
          turn_end();
          load_mask(nb);  // overlaps the S product
          wgmma_wait<1>();  // S_nb has landed; P_{nb-1} V_{nb-1} may still run
          pin_registers<NT>(s[0]);
          release_kv(k_empty + st);
          if (nb == nc - 1) release(q_empty);
          softmax_block(s, alpha, nb, narrow_s);
          if constexpr (tie_wait) {
            // No max has these bits (FMNMX gives 0x7fffffff for NaN); were it ever taken, the
            // arrive would complete a phase nobody waits for.
            if (__float_as_uint(row_max[0][0]) == 0xffc0deadu) mbar_arrive(scan_full);
          }
          wgmma_wait<0>();
          pin_registers<DO>(o[0]);
          if (late_rescale) rescale_o<1, DO>(o, alpha);  // o is at block nb - 1's max until here
          release_kv(v_empty + pst);
          pack(s, ap, narrow_s);
        };
        // A narrow last block takes its step after the loop, so the loop's code stays as it was
        // (the narrow step inside it, behind a branch, ran non-causal tiles ~2 % slower).
        const int steady_end = narrow && nc > 1 ? nc - 1 : nc;  // (nc == 1: the block above was it)
        for (int nb = 1; nb < steady_end; ++nb) step(nb, false);
        if (steady_end < nc) step(nc - 1, true);

        mbar_wait(v_full + st, (kv / STAGES) & 1);
        turn_begin();
        if (!late_rescale && nc > 1) rescale_o<1, DO>(o, alpha);
        issue_pv(ap, st, narrow);
        turn_end();
        wgmma_wait<0>();
        pin_registers<DO>(o[0]);
        release_kv(v_empty + st);
        ++kv;
      }
      if (!MASKED && nc < w.n_blocks) {
        // Every consumer takes the tile's n_blocks + 1 ping-pong turns: this one
        // takes turns nc + 1 .. n_blocks (0 .. n_blocks without blocks) empty,
        // each after releasing skipped block k - 1 once it has landed. A release
        // before the load could count toward the stage's previous use; block
        // k - 1 lands before the others' turns that need block k, so the ring
        // and the loads never wait on each other.
        for (int k = nc == 0 ? 0 : nc + 1; k <= w.n_blocks; ++k) {
          if (k > nc) {
            const int st = kv % STAGES, phase = (kv / STAGES) & 1;
            mbar_wait(k_full + st, phase);
            release_kv(k_empty + st);
            mbar_wait(v_full + st, phase);
            release_kv(v_empty + st);
            ++kv;
          }
          turn_begin();
          turn_end();
        }
      }
      // s_o is free once the previous tile's TMA stores have read it (a tile
      // ago: no wait in practice). One barrier for all consumers: a wait on a
      // per-consumer address from cg took the whole loop off the uniform datapath in
      // ptxas 13.0 (descriptors through R2UR before every wgmma). O_SLOT's per-consumer
      // barrier is indexed from cg_uniform, which keeps the loop uniform (no R2UR).
      if constexpr (CFG::O_SLOT) {
        // The slot's previous user: consumer cg - 1 on this tile, the last consumer on the one before.
        const int prev = cg_uniform == 0 ? CONSUMERS - 1 : cg_uniform - 1, use = cg_uniform == 0 ? it - 1 : it;
        if (use >= 0) mbar_wait(o_empty + prev, use & 1);
      } else if (it > 0) {
        mbar_wait(o_empty, (it - 1) & 1);
      }
      if constexpr (CFG::O_IN_V) {
        // The V stages, once every consumer's last P V of each has read them (this one's: its wait).
#pragma unroll
        for (int u = kv - STAGES; u < kv; ++u) {
          if (u >= 0) mbar_wait(v_empty + u % STAGES, (u / STAGES) & 1);
        }
      }
      if constexpr (mma_sum) {
        // Every lane of a quad holds its rows' whole sums: no shuffles in store_output.
        row_sum[0][0] = o[0][DT][0];
        row_sum[0][1] = o[0][DT][2];
      }
      store_output<T, 1, DT, true, !mma_sum>(
          a, w, o, row_max, row_sum, warp_row0, g, t, lane,
          [&](int row, int col) {
            if constexpr (CFG::O_IN_V) return o_in_v(col >> 6) + sw128_offset<BM>(row, col & 63);
            return s_o + (CFG::O_SLOT ? sw128_offset<64>(row - 64 * cg, col) : sw128_offset<BM>(row, col));
          },
          !maps.o_mapped);
      fence_proxy_async_shared();  // the staged rows, before the TMA store reads them
      mbar_arrive(o_full + cg);
    }
    if constexpr (CFG::PING_PONG) {
      if (cg == 0) named_barrier_sync(1, 256);  // the last consumer's final arrival
    }
  }
  if constexpr (CFG::CLUSTER > 1) cluster_sync();  // the others' last releases may still reach this CTA's barriers
#endif
}

}  // namespace trt_fastops::attention
