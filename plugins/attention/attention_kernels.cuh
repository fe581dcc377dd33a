// Flash-attention forward for sm_80+ (mma.sync m16n8k16, float32 accumulation).
// Device code only; the host side is attention_launch.cu.
//
// One CTA owns BLOCK_M query rows of one (batch, query head) and walks the key
// blocks [0, n_end) of its kv head (GQA by head mapping: no K/V copies):
//   S = Q K^T            Q from shared memory (ldmatrix), K tile by ldmatrix
//   scores -> log2 units (scale, softcap), masks (bounds, causal, bool/additive)
//   online softmax       running row max / row sum in float32, O rescaled
//   O += P V             P re-packed from the S accumulators, V by ldmatrix.trans
// Each warp owns M_TILES 16-row slices; the score matrix never leaves registers.
// Pipeline (FlashAttention-2's): K_j and V_j single-buffered, V_j is fetched
// while S_j is computed and K_{j+1} while P_j V_j is.
// Shared-memory rows hold HEAD_DIM 16-bit values plus 16 bytes of padding.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "plugins/attention/attention_schedule.h"
#include "plugins/common/mma.cuh"

namespace trt_fastops::attention {

constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// n / d for 0 <= n < 2^31 by a multiply-high and a shift, the divisor's
// constants set on the host (CUTLASS's FastDivmod scheme): a run-time integer
// division is a ~20-instruction dependent sequence, and every tile starts with
// three to five of them (tile_head, block_work).
struct FastDiv {
  int d = 1;
  uint32_t mul = 0, shift = 0;
  static FastDiv make(int divisor) {
    FastDiv f;
    f.d = divisor;
    if (divisor > 1) {
      int log2_ceil = 0;
      while ((int64_t(1) << log2_ceil) < divisor) ++log2_ceil;
      const int p = 31 + log2_ceil;
      f.mul = uint32_t(((uint64_t(1) << p) + uint64_t(divisor) - 1) / uint64_t(divisor));
      f.shift = uint32_t(p - 32);
    }
    return f;
  }
#ifdef __CUDACC__
  __device__ __forceinline__ int div(int n) const {
    return d == 1 ? n : int(__umulhi(uint32_t(n), mul) >> shift);
  }
#endif
};

// Kernel arguments (the launcher derives them from AttentionParams).
struct FlashArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss;
  int q_heads, group, q_len, kv_len, head_dim, v_head_dim;
  int bh_count, m_blocks;
  int m_shift;          // rows query block 0 starts before row 0 (see make_args); they are never stored
  int lpt_heads;        // > 0: tile order in sections of this many heads (see block_work); 0: head-major
  FastDiv div_m_blocks, div_q_heads, div_group, div_section, div_lpt_heads;  // by m_blocks, q_heads, group,
                                                                            // lpt_heads * m_blocks, lpt_heads
  float scale_log2;     // scale * log2(e)
  float softcap;        // 0: none
  float scale_softcap;  // scale / softcap
  float inv_scale_log2;  // 1 / scale_log2 (0 when scale_log2 <= 0): key-row masks in raw score units
  int causal;
  int causal_offset;  // clamped by the launcher to [-q_len - 1, kv_len + 1]
  int mask_kind;   // MaskKind
  int mask_dtype;  // DType of an additive mask
  const void* mask;
  int64_t m_sb, m_sh, m_sq, m_sk, mask_kv_len;
  int balance_ways;  // > 0: head-major, partial tiles dealt to CTAs [0, balance_ways) (persistent_tile)
  FastDiv div_balance, div_full_blocks;  // by balance_ways, m_blocks - 1
  // Non-null (warp-specialised kernels): CTAs draw their tiles after the
  // first (blockIdx.x) from this counter, zeroed before the launch.
  int* tile_counter;
  // > 0 (HopperWsConfig::PACK_HEADS): the heads' query rows laid end to end in this many tiles
  // (packed_work), so no head pads its last tile; q_len is a multiple of 64.
  int packed_tiles;
  FastDiv div_q_len;  // by q_len (packed tiles)
  // > 0: in round tail_round + r CTA c runs tile tail_tiles[r * gridDim.x + c], none once that is
  // TAIL_NONE (persistent_tile's tail: causal_tail's table; kernels with HopperWsConfig::TAIL_TABLE).
  int tail_round;
  uint16_t tail_tiles[TAIL_ENTRIES];
};

// MIN_BLOCKS: CTAs per SM to fit (caps registers at 65536 / (THREADS * MIN_BLOCKS)).
template <int D, int BM, int BN, int WARPS, int MIN_BLOCKS>
struct FlashConfig {
  static constexpr const char* NAME = "flash_fwd";
  static constexpr int HEAD_DIM = D, BLOCK_M = BM, BLOCK_N = BN, NUM_WARPS = WARPS, BLOCKS_PER_SM = MIN_BLOCKS;
  static constexpr int THREADS = WARPS * 32;
  static constexpr bool PERSISTENT = false;  // one CTA per tile
  static constexpr bool Q_BY_TMA = false;    // Q rows come by cp.async from row m0 on (no rows before 0)
  static constexpr int M_TILES = BM / (16 * WARPS);  // 16-row MMA tiles per warp
  static constexpr int N_TILES = BN / 8;             // 8-key score tiles
  static constexpr int D_TILES = D / 8;              // 8-wide output tiles
  static constexpr int SMEM_BYTES = (BM + 2 * BN) * (D + 8) * 2;
  static_assert(M_TILES >= 1 && BM == M_TILES * 16 * WARPS, "BLOCK_M must split into 16-row warp tiles");
  static_assert(BN % 16 == 0 && D % 16 == 0, "tiles are multiples of 16");
};

// Shared-memory rows are padded by 16 bytes: the 8 rows one ldmatrix phase
// reads then start 4 banks apart (conflict-free), and every fragment address
// is a per-thread base plus a compile-time offset (an XOR swizzle needs one
// register per distinct address, which spills at two 16-row tiles per warp).
template <int D>
constexpr int smem_stride() {
  return D + 8;
}
// Element offset of (row, 16-byte chunk) in a [rows, D] tile.
template <int D>
__device__ __forceinline__ int padded_offset(int row, int chunk) {
  return row * smem_stride<D>() + chunk * 8;
}

// Copies rows [0, ROWS) x dims [0, D) of a tile into shared memory; rows >=
// rows_valid and dims >= dims_valid become zeros. ALIGNED: 16-byte cp.async
// (rows 16-byte aligned, dims_valid a multiple of 8); otherwise element loads.
template <typename T, int D, int ROWS, int THREADS, bool ALIGNED>
__device__ __forceinline__ void load_tile(T* smem, const T* __restrict__ src, int64_t row_stride, int rows_valid,
                                          int dims_valid, int tid) {
  constexpr int CHUNKS = D / 8;
  static_assert(THREADS % CHUNKS == 0 && (ROWS * CHUNKS) % THREADS == 0, "tile chunks split evenly over the threads");
  constexpr int ROW_STEP = THREADS / CHUNKS;  // rows one pass of the block covers
  const int c = tid % CHUNKS;
  int r = tid / CHUNKS;
  // One running pointer (not one hoisted 64-bit offset per pass: registers are scarce).
  const T* g = src + r * row_stride + c * 8;
  const int64_t g_step = ROW_STEP * row_stride;
  T* dst = smem + padded_offset<D>(r, c);
  const bool col_ok = c * 8 < dims_valid;
#pragma unroll
  for (int it = 0; it < ROWS / ROW_STEP; ++it) {
    const bool row_ok = r < rows_valid;
    if constexpr (ALIGNED) {
      const bool ok = row_ok && col_ok;
      cp_async_16_zfill(dst, ok ? g : src, ok);
    } else {
      alignas(16) T vals[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) vals[e] = (row_ok && c * 8 + e < dims_valid) ? g[e] : T(0.f);
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(vals);
    }
    r += ROW_STEP;
    g += g_step;
    dst += ROW_STEP * smem_stride<D>();
  }
}

// ---------------------------------------------------------------------------
// Pieces shared by the sm80 (mma.sync) and Hopper (wgmma) kernels. Both hold
// scores and outputs in the m16n8 accumulator layout: per warp, tiles of 16
// rows; element e of n-tile nt sits at (row g + (e >> 1) * 8, col nt * 8 + 2t + (e & 1)).

constexpr float NEG_INF = -std::numeric_limits<float>::infinity();

// Which (batch, head, query block) a CTA owns and the keys it must visit.
struct BlockWork {
  int bh, b, h, kvh, m0;
  int n_blocks;      // key blocks of BN in [0, n_end)
  float exp_scale;   // score units -> log2 units (raw scores) or 1 (already in log2 units)
  bool raw_scores;
};

// tile: the work item (blockIdx.x, or the persistent kernel's tile index).
// Returns its batch * q_heads + head and sets its query block.
__device__ __forceinline__ int tile_head(const FlashArgs& a, int tile, int& m_block) {
  int bh;
  if (a.lpt_heads > 0) {
    // Sections of lpt_heads heads (their K/V fit in L2 together); within a
    // section, every head's heaviest (causal: last) query block, then the next
    // heaviest, ...: consecutive tiles cost about the same, so a persistent
    // grid walking them round robin stays balanced.
    const int per_section = a.lpt_heads * a.m_blocks;
    const int section = a.div_section.div(tile);
    const int first = section * a.lpt_heads;
    const int heads = min(a.lpt_heads, a.bh_count - first);
    const int r = tile - section * per_section;
    const int q = heads == a.lpt_heads ? a.div_lpt_heads.div(r) : r / heads;  // the last section may be short
    bh = first + (r - q * heads);
    m_block = a.m_blocks - 1 - q;
  } else {
    // Consecutive tiles share a head (its K/V stay in L2 while all its query
    // blocks read them); within a head the heaviest (causal: last) block first.
    bh = a.div_m_blocks.div(tile);
    m_block = a.m_blocks - 1 - (tile - bh * a.m_blocks);
  }
  return bh;
}

// RAW_MASK: an additive mask is applied in raw units (key-row masks of the
// warp-specialised kernel: load_key_row_mask's `unit`), so it keeps raw mode.
// SOFTCAP false: a kernel built for inputs without softcap (the launcher sends
// it none), which then carries no softcap code.
template <int BM, int BN, bool MASKED, bool RAW_MASK = false, bool SOFTCAP = true>
__device__ __forceinline__ BlockWork block_work(const FlashArgs& a, int tile) {
  BlockWork w;
  int m_block;
  w.bh = tile_head(a, tile, m_block);
  w.b = a.div_q_heads.div(w.bh);
  w.h = w.bh - w.b * a.q_heads;
  w.kvh = a.div_group.div(w.h);
  w.m0 = m_block * BM - a.m_shift;
  // Keys past n_end are masked for every row of this block.
  int64_t n_end = a.kv_len;
  if (MASKED && a.mask_kv_len < n_end) n_end = a.mask_kv_len;
  if (a.causal) {
    const int64_t visible = int64_t(w.m0) + BM + a.causal_offset;  // keys j < visible for the last row
    if (visible < n_end) n_end = visible;
  }
  w.n_blocks = n_end > 0 ? int((n_end + BN - 1) / BN) : 0;
  // Raw mode (scale folded into the exponent, one FFMA per element) unless
  // softcap or an additive mask needs log2 units first; needs a positive scale.
  w.raw_scores = !(SOFTCAP && a.softcap > 0.f) && !(MASKED && a.mask_kind == 2 && !RAW_MASK) && a.scale_log2 > 0.f;
  w.exp_scale = w.raw_scores ? a.scale_log2 : 1.f;
  return w;
}

// Packed tiles (FlashArgs::packed_tiles; non-causal, unmasked): tile `tile`'s 64-row slot `slot`
// holds rows tile * BM + 64 * slot of the heads' rows end to end, all in one head (q_len is a
// multiple of 64). Returns that head (bh_count for a slot past the last row) and sets `row`, the
// slot's first row in it (q_len past the last row, so no row of it runs or is stored).
__device__ __forceinline__ int packed_slot(const FlashArgs& a, int tile, int slot, int block_m, int& row) {
  const int flat = tile * block_m + 64 * slot;
  const int bh = a.div_q_len.div(flat);
  row = bh < a.bh_count ? flat - bh * a.q_len : a.q_len;
  return bh;
}

// The work of consumer c (rows 64 c ..) of a packed tile: block_work's for its own head, m0 set
// so that m0 + 64 c is its first row (a slot past the last row: the last head's, no rows). Packed
// inputs are non-causal, unmasked and without softcap: every key block, raw scores.
// (block_work keeps its own code: built through a shared helper, ptxas scheduled the d128 kernels'
// loops differently.)
template <int BM, int BN>
__device__ __forceinline__ BlockWork packed_work(const FlashArgs& a, int tile, int c) {
  BlockWork w;
  int row;
  w.bh = min(packed_slot(a, tile, c, BM, row), a.bh_count - 1);
  w.b = a.div_q_heads.div(w.bh);
  w.h = w.bh - w.b * a.q_heads;
  w.kvh = a.div_group.div(w.h);
  w.m0 = row - 64 * c;
  // In 32 bits (the launcher sends kv_len < 2^31 - 256): as block_work's 64-bit form, the count
  // took the consumers' block loop off the uniform datapath (24 R2UR a trip) and spilled.
  w.n_blocks = a.kv_len > 0 ? (a.kv_len + BN - 1) / BN : 0;
  w.raw_scores = a.scale_log2 > 0.f;
  w.exp_scale = w.raw_scores ? a.scale_log2 : 1.f;
  return w;
}

// Scores to log2 units when the kernel can't fold the scale into the
// exponent (softcap, additive mask). The softcap test is uniform: outside the
// loop, so the plain case never evaluates tanhf. SOFTCAP: block_work's.
// NTU: the first NTU score tiles only (a narrow last block; see softmax_update).
template <int MT, int NT, bool SOFTCAP = true, int NTU = NT>
__device__ __forceinline__ void scale_scores(float (&s)[MT][NT][4], const FlashArgs& a, const BlockWork& w) {
  if (w.raw_scores) return;
  auto each = [&](auto f) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NTU; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = f(s[mt][nt][e]);
  };
  if (SOFTCAP && a.softcap > 0.f) {
    const float cap_log2 = a.softcap * LOG2E, inv_cap = a.scale_softcap;
    each([&](float x) { return cap_log2 * tanhf(x * inv_cap); });
  } else {
    const float scale = a.scale_log2;
    each([&](float x) { return x * scale; });
  }
}

// The last key query row `row` may see: bounds, the causal frontier and (MASKED)
// the end of a short mask, which pads with "masked".
template <bool MASKED>
__device__ __forceinline__ int last_visible_key(const FlashArgs& a, int row) {
  int last = a.causal ? int(min(int64_t(row) + a.causal_offset, int64_t(a.kv_len) - 1)) : a.kv_len - 1;
  if (MASKED && a.mask_kv_len - 1 < last) last = int(a.mask_kv_len - 1);
  return last;
}

// f(typed mask pointer, value) with value(element) -> the score offset in log2
// units (bool: 0 or -inf; additive: the value times log2(e)). The mask kind
// and dtype are uniform, so the per-element loops carry no switch. MASK: the
// mask's element type when the kernel is built for one (the key-row kernels
// for an additive mask of their own dtype), void for any (a copy of f's code
// per type: the key-row kernels' code was 2.7x the unmasked kernels', which
// showed where their first instructions come from DRAM; typed_key_row_mask).
template <typename MASK = void, typename F>
__device__ __forceinline__ void dispatch_mask(const FlashArgs& a, F&& f) {
  if constexpr (std::is_same_v<MASK, __half>) {
    f(static_cast<const __half*>(a.mask), [](__half m) { return __half2float(m) * LOG2E; });
  } else if constexpr (std::is_same_v<MASK, __nv_bfloat16>) {
    f(static_cast<const __nv_bfloat16*>(a.mask), [](__nv_bfloat16 m) { return __bfloat162float(m) * LOG2E; });
  } else {
    static_assert(std::is_void_v<MASK>, "a typed mask is float16 or bfloat16");
    if (a.mask_kind == 1) {
      f(static_cast<const unsigned char*>(a.mask), [](unsigned char m) { return m != 0 ? 0.f : NEG_INF; });
    } else if (a.mask_dtype == 0) {
      f(static_cast<const float*>(a.mask), [](float m) { return m * LOG2E; });
    } else if (a.mask_dtype == 1) {
      f(static_cast<const __half*>(a.mask), [](__half m) { return __half2float(m) * LOG2E; });
    } else {
      f(static_cast<const __nv_bfloat16*>(a.mask), [](__nv_bfloat16 m) { return __bfloat162float(m) * LOG2E; });
    }
  }
}

// Bounds of a key-padding mask row (one mask row for every query: m_sq == 0),
// read from the mask itself when a tile starts. Keys [0, zero_end) carry a
// no-op mask (additive +-0, boolean true): their key blocks take the unmasked
// score preparation, no mask loads or adds. Keys >= live_end are dead: their
// blocks are neither loaded nor computed. Both change no result (below).
struct KeyBounds {
  int zero_end, live_end;
};

// Dead keys (log2 units, as dispatch_mask's values): -inf (boolean false,
// additive -inf), or an additive value at least DEAD_MASK_GAP below the
// largest value of the first keys scanned (a reference key r before live_end).
// Why skipping them is exact: a query row sees a prefix of the keys (bounds,
// causal frontier, mask_kv_len), so a row that sees a key j >= live_end also
// sees r; its max is >= logit(r), and logit(j) - logit(r) <= (scaled-score spread)
// - DEAD_MASK_GAP. For a spread below 8800 (natural-log units, i.e. |scale * q.k|
// differences, after softcap) the exponent is below -150 and exp2 returns
// exactly 0 in float32: the row max, sum, lse and output are bit-identical
// whether or not j is computed. The gap is 9000 (not 10000) so that BERT's
// -10000 padding still counts in bfloat16, where it rounds to -9984; masks as
// large as 1e8 in magnitude keep that margin (float32 sums round by < 8).
// Relative to r and not absolute, so live keys near -10000 (e.g. -9999 beside
// -10000) are never dropped. NaN is neither no-op nor dead.
constexpr float DEAD_MASK_GAP = 9000.f * LOG2E;

// Warp-wide scan of one mask row of n keys (element stride `stride`), every
// lane returns the same bounds. VECTOR: one 8-byte load of VEC elements per
// lane per chunk (stride 1, 8-byte aligned row), else VEC element loads (8
// bytes, not 16, and values folded one at a time: the scanning warp of the
// warp-specialised kernel holds 24 registers). Two passes, each stopping
// early: forward until the first key that is not a no-op (zero_end; the keys
// seen give the reference max), backward until the first live key (live_end).
// A BERT row (zeros, then padding) is read about once in all.
template <int VEC, bool VECTOR, typename M, typename V>
__device__ __forceinline__ KeyBounds scan_key_row(const M* __restrict__ row, int64_t stride, int n, int lane,
                                                  V value) {
  static_assert(!VECTOR || VEC * sizeof(M) == 8, "one 8-byte load per lane");
  constexpr int CHUNK = 32 * VEC;
  constexpr int NONE = 0x7fffffff;
  // f(key, value) for this lane's keys [key0, key0 + VEC) below n, each folded
  // as it is converted (the warp that scans may hold few registers).
  auto each = [&](int key0, auto&& f) {
    if constexpr (VECTOR) {
      if (key0 + VEC <= n) {
        const uint2 raw = *reinterpret_cast<const uint2*>(row + key0);
        M m[VEC];
        memcpy(m, &raw, 8);
#pragma unroll
        for (int e = 0; e < VEC; ++e) f(key0 + e, value(m[e]));
      } else {
#pragma unroll 1
        for (int key = key0; key < n; ++key) f(key, value(row[key]));  // the row's last, partial group
      }
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (key0 + e < n) f(key0 + e, value(row[int64_t(key0 + e) * stride]));
    }
  };
  KeyBounds kb{n, 0};
  float ref = NEG_INF;
  for (int c0 = 0; c0 < n; c0 += CHUNK) {
    int first = NONE;
    each(c0 + lane * VEC, [&](int key, float x) {
      ref = fmaxf(ref, x);
      if (x != 0.f) first = min(first, key);
    });
    first = __reduce_min_sync(0xffffffffu, first);
    if (first != NONE) {
      kb.zero_end = first;
      break;
    }
  }
  if (kb.zero_end == n) return KeyBounds{n, n};  // every key a no-op, so every key live
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ref = fmaxf(ref, __shfl_xor_sync(0xffffffffu, ref, off));
  for (int c0 = (n - 1) / CHUNK * CHUNK; c0 >= 0; c0 -= CHUNK) {
    int last = -1;
    each(c0 + lane * VEC, [&](int key, float x) {
      if (!(x == NEG_INF || x - ref <= -DEAD_MASK_GAP)) last = key;  // keys ascend: the last live one stays
    });
    last = __reduce_max_sync(0xffffffffu, last);
    if (last >= 0) {
      kb.live_end = last + 1;
      break;
    }
  }
  return kb;
}

// Bounds of the key-padding row of (batch b, head h): warp-wide, over the keys
// that exist for it (below kv_len and mask_kv_len; those past mask_kv_len are
// masked anyway). MASK: dispatch_mask's.
template <typename MASK = void>
__device__ __forceinline__ KeyBounds key_row_bounds(const FlashArgs& a, int b, int h, int lane) {
  const int n = int(min(int64_t(a.kv_len), a.mask_kv_len));
  KeyBounds kb{0, 0};
  if (n <= 0) return kb;
  const int64_t head = b * a.m_sb + h * a.m_sh;
  dispatch_mask<MASK>(a, [&](const auto* m, auto value) {
    using M = std::remove_cv_t<std::remove_pointer_t<decltype(m)>>;
    constexpr int VEC = 8 / sizeof(M);
    const M* row = m + head;
    if (a.m_sk == 1 && (reinterpret_cast<uintptr_t>(row) & 7) == 0) {
      kb = scan_key_row<VEC, true>(row, 1, n, lane, value);
    } else {
      kb = scan_key_row<2, false>(row, a.m_sk, n, lane, value);
    }
  });
  return kb;
}

// The key blocks of a tile with a key-padding mask of bounds kb: w.n_blocks
// shrinks to the blocks below live_end (unless every key is dead: live_end 0
// keeps the row's exact fully-masked semantics, all blocks run); returns how
// many leading blocks have no-op masks.
template <int BN>
__device__ __forceinline__ int key_row_blocks(const KeyBounds& kb, BlockWork& w) {
  if (kb.live_end > 0) w.n_blocks = min(w.n_blocks, (kb.live_end + BN - 1) / BN);
  return min(kb.zero_end / BN, w.n_blocks);
}

// A key-padding mask (one mask row for every query: m_sq == 0) for one key
// block: this thread's keys' values in log2 units (bool: 0 or -inf). Loaded
// before the block's scores are ready, so the loads overlap the S product.
template <int NT>
struct KeyRowMask {
  float v[NT][2];
};

// `unit` takes the values to the scores' units: 1 (log2), or inv_scale_log2
// for raw scores (block_work's RAW_MASK: scaling every score of a tile whose
// blocks are mostly no-op cost the key-padding kernel 10-30 %).
template <int NT, typename MASK = void>
__device__ __forceinline__ void load_key_row_mask(KeyRowMask<NT>& km, const FlashArgs& a, const BlockWork& w, int n0,
                                                  int t, float unit = 1.f) {
  const int64_t head = w.b * a.m_sb + w.h * a.m_sh;
  const int key_cap = int(a.mask_kv_len - 1);  // >= 0: a block is visited only below mask_kv_len
  dispatch_mask<MASK>(a, [&](const auto* m, auto value) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        km.v[nt][e] = value(m[head + int64_t(min(n0 + nt * 8 + 2 * t + e, key_cap)) * a.m_sk]) * unit;
  });
}

// Applies a prefetched key-row mask and the bounds / causal frontier.
template <int MT, int NT>
__device__ __forceinline__ void apply_key_row_mask(float (&s)[MT][NT][4], const KeyRowMask<NT>& km, const FlashArgs& a,
                                                   int warp_m0, int n0, int g, int t) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int last = last_visible_key<true>(a, warp_m0 + mt * 16 + g + hr * 8);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& sv = s[mt][nt][hr * 2 + e];
          sv = n0 + nt * 8 + 2 * t + e > last ? NEG_INF : sv + km.v[nt][e];
        }
    }
}

// The same block of a float16 / bfloat16 additive mask, kept packed: this
// thread's two keys of each 8-key tile come in one 32-bit load and stay one
// register until applied, half of KeyRowMask's: with it the three-consumer
// d64 tile carries a prefetched mask without spilling (bool masks, a second
// load width, spilled it again). Needs key stride 1, an even mask_kv_len and
// rows aligned to a key pair (the launcher's key_row_packable).
template <int NT>
struct KeyRowMaskPacked {
  uint32_t v[NT];
};

template <int NT>
__device__ __forceinline__ void load_key_row_mask_packed(KeyRowMaskPacked<NT>& km, const FlashArgs& a,
                                                         const BlockWork& w, int n0, int t) {
  const int64_t head = w.b * a.m_sb + w.h * a.m_sh;
  const int pair_cap = int(a.mask_kv_len) - 2;  // the last pair (mask_kv_len is even, >= 2 when a block runs)
  const uint16_t* row = static_cast<const uint16_t*>(a.mask) + head;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
    km.v[nt] = *reinterpret_cast<const uint32_t*>(row + min(n0 + nt * 8 + 2 * t, pair_cap));
}

// apply_key_row_mask for a packed block; the values are dispatch_mask's times
// `unit` (load_key_row_mask's).
template <int MT, int NT>
__device__ __forceinline__ void apply_key_row_mask_packed(float (&s)[MT][NT][4], const KeyRowMaskPacked<NT>& km,
                                                          const FlashArgs& a, int warp_m0, int n0, int g, int t,
                                                          float unit) {
  auto apply = [&](auto unpack) {  // unpack(pair) -> the two keys' values in log2 units
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int last = last_visible_key<true>(a, warp_m0 + mt * 16 + g + hr * 8);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float2 mv = unpack(km.v[nt]);
          const int key = n0 + nt * 8 + 2 * t;
          float& s0 = s[mt][nt][hr * 2];
          float& s1 = s[mt][nt][hr * 2 + 1];
          s0 = key > last ? NEG_INF : s0 + mv.x;
          s1 = key + 1 > last ? NEG_INF : s1 + mv.y;
        }
      }
  };
  const float f = LOG2E * unit;
  if (a.mask_dtype == 1) {
    apply([f](uint32_t p) {
      __half2 h;
      memcpy(&h, &p, 4);
      return make_float2(__low2float(h) * f, __high2float(h) * f);
    });
  } else {
    apply([f](uint32_t p) {
      __nv_bfloat162 h;
      memcpy(&h, &p, 4);
      return make_float2(__low2float(h) * f, __high2float(h) * f);
    });
  }
}

// Scores of one key block: to log2 units when needed, then every mask.
// warp_m0: query row of the warp's first fragment row; n0: first key of the block.
// NTU (unmasked only): the block's first NTU * 8 keys only (a narrow last block).
template <int MT, int NT, bool MASKED, bool SOFTCAP = true, int NTU = NT>
__device__ __forceinline__ void prepare_scores(float (&s)[MT][NT][4], const FlashArgs& a, const BlockWork& w,
                                               int warp_m0, int n0, int g, int t) {
  static_assert(NTU == NT || !MASKED, "narrow blocks in the unmasked kernels only");
  scale_scores<MT, NT, SOFTCAP, NTU>(s, a, w);
  const bool need_mask =
      MASKED || n0 + NTU * 8 > a.kv_len || (a.causal && n0 + NTU * 8 - 1 > warp_m0 + a.causal_offset);
  if (!need_mask) return;
  if constexpr (!MASKED) {
    // Bounds and the causal frontier only.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int last = last_visible_key<false>(a, warp_m0 + mt * 16 + g + hr * 8);
#pragma unroll
        for (int nt = 0; nt < NTU; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (n0 + nt * 8 + 2 * t + e > last) s[mt][nt][hr * 2 + e] = NEG_INF;
      }
  } else if (a.m_sq == 0) {
    // One mask row for every query (key padding): each value loaded once, applied to all rows.
    KeyRowMask<NT> km;
    load_key_row_mask<NT>(km, a, w, n0, t);
    apply_key_row_mask<MT, NT>(s, km, a, warp_m0, n0, g, t);
  } else {
    // A mask row per query. Unconditional loads at a clamped key (no branch
    // around them), so all of a row's mask loads are in flight at once; then one select each.
    const int64_t head = w.b * a.m_sb + w.h * a.m_sh;
    const int key_cap = int(a.mask_kv_len - 1);  // >= 0: a block is visited only below mask_kv_len
    auto rows = [&](const auto* mask, auto value) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int row = warp_m0 + mt * 16 + g + hr * 8;
          const int last = last_visible_key<true>(a, row);
          // Rows before 0 (m_shift) and past q_len are never stored: they read row 0 / the last.
          const auto* mrow = mask + head + int64_t(min(max(row, 0), a.q_len - 1)) * a.m_sq;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int key = n0 + nt * 8 + 2 * t + e;
              const float mv = value(mrow[int64_t(min(key, key_cap)) * a.m_sk]);
              float& sv = s[mt][nt][hr * 2 + e];
              sv = key > last ? NEG_INF : sv + mv;
            }
        }
    };
    dispatch_mask(a, rows);
  }
}

// Online softmax over one key block, in two halves so a kernel can run the
// first while its previous P V product is still in flight: softmax_update moves
// the running row max / sum on and turns s into unnormalised probabilities,
// returning alpha (how much the old max outweighs the new); rescale_o then
// brings o to the new max. ROW_CHAIN: row 1's max starts from row 0's through
// fmaf(max0, 0, -inf) (-inf or NaN, so fmaxf keeps row_max: exact), which
// ptxas can't fold; it then runs row 1's max chain beside row 0's
// exponentials instead of both maxima ahead of every exponential
// (FlashAttention-3's order; d128 +1.3 %, d64 -0.4 %: NOTES item 77).
// SUM false: row_sum is left alone (the caller's P V product sums the rows).
// NTU: only the first NTU score tiles, where the others are masked for every
// row (a narrow last block: their probabilities are zeros the caller never uses).
template <int MT, int NT, bool ROW_CHAIN = false, bool SUM = true, int NTU = NT>
__device__ __forceinline__ void softmax_update(float (&s)[MT][NT][4], float (&row_max)[MT][2], float (&row_sum)[MT][2],
                                               float exp_scale, float (&alpha)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float max0 = 0.f;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = row_max[mt][hr];
      if (ROW_CHAIN && hr == 1) mx = fmaxf(mx, fmaf(max0, 0.f, NEG_INF));
#pragma unroll
      for (int nt = 0; nt < NTU; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][hr * 2], s[mt][nt][hr * 2 + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      max0 = mx;
      const float m_use = mx == NEG_INF ? 0.f : mx * exp_scale;  // fully masked so far: exp2(-inf - 0) = 0
      alpha[mt][hr] = fast_exp2(row_max[mt][hr] * exp_scale - m_use);
      row_max[mt][hr] = mx;
      float sum = SUM ? row_sum[mt][hr] * alpha[mt][hr] : 0.f;
#pragma unroll
      for (int nt = 0; nt < NTU; ++nt) {
        const float p0 = fast_exp2(fmaf(s[mt][nt][hr * 2], exp_scale, -m_use));
        const float p1 = fast_exp2(fmaf(s[mt][nt][hr * 2 + 1], exp_scale, -m_use));
        s[mt][nt][hr * 2] = p0;
        s[mt][nt][hr * 2 + 1] = p1;
        if (SUM) sum += p0 + p1;
      }
      if (SUM) row_sum[mt][hr] = sum;
    }
  }
}

template <int MT, int DT>
__device__ __forceinline__ void rescale_o(float (&o)[MT][DT][4], const float (&alpha)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) {
      o[mt][dt][0] *= alpha[mt][0];
      o[mt][dt][1] *= alpha[mt][0];
      o[mt][dt][2] *= alpha[mt][1];
      o[mt][dt][3] *= alpha[mt][1];
    }
}

template <int MT, int NT, int DT>
__device__ __forceinline__ void online_softmax(float (&s)[MT][NT][4], float (&o)[MT][DT][4], float (&row_max)[MT][2],
                                               float (&row_sum)[MT][2], float exp_scale) {
  float alpha[MT][2];
  softmax_update<MT, NT>(s, row_max, row_sum, exp_scale, alpha);
  rescale_o<MT, DT>(o, alpha);
}

// P (from the score accumulators) as m16k16 A fragments, one per 16 keys (NTU: of the first NTU * 8).
template <typename T, int MT, int NT, int NTU = NT>
__device__ __forceinline__ void pack_p(const float (&s)[MT][NT][4], uint32_t (&ap)[NT / 2][MT][4]) {
#pragma unroll
  for (int ks = 0; ks < NTU / 2; ++ks)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      ap[ks][mt][0] = pack2<T>(s[mt][2 * ks][0], s[mt][2 * ks][1]);
      ap[ks][mt][1] = pack2<T>(s[mt][2 * ks][2], s[mt][2 * ks][3]);
      ap[ks][mt][2] = pack2<T>(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
      ap[ks][mt][3] = pack2<T>(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
    }
}

// A warp's copy of ROWS staged output rows, stage(local_row0 + r, col), to
// the output rows first_row + r of `out` (one head's), a V (16 or 4 bytes)
// per lane and step; rows before 0 or past q_len and columns past v_head_dim
// are skipped. DIMS: the staged row's width in elements.
template <typename T, int ROWS, int DIMS, typename V = uint4,
          int UNROLL = ROWS * DIMS * int(sizeof(T)) / int(sizeof(V)) / 32, typename Stage>
__device__ __forceinline__ void copy_staged_rows(const FlashArgs& a, T* out, int first_row, int local_row0, int lane,
                                                 Stage stage) {
  constexpr int PER = int(sizeof(V) / sizeof(T)), CHUNKS = DIMS / PER;  // elements per V, Vs per row
#pragma unroll UNROLL
  for (int idx = lane; idx < ROWS * CHUNKS; idx += 32) {
    const int r = idx / CHUNKS, c = idx % CHUNKS;
    const int row = first_row + r;
    if (unsigned(row) < unsigned(a.q_len) && c * PER < a.v_head_dim) {
      *reinterpret_cast<V*>(out + int64_t(row) * a.o_ss + c * PER) =
          *reinterpret_cast<const V*>(stage(local_row0 + r, c * PER));
    }
  }
}

// Normalise, write lse and the output rows of this warp. ALIGNED: rows are
// staged in shared memory at stage(local_row, col) (memory only this warp
// uses now) and leave as 16-byte stores, or (copy_out false) stay there for
// the caller's TMA store; otherwise element stores. QUAD_SUM: row_sum holds
// each lane's part of the row (summed over the quad here), else the whole row's.
// DTA: o's column tiles (DT of them stored).
template <typename T, int MT, int DT, bool ALIGNED, bool QUAD_SUM = true, int DTA = DT, typename Stage>
__device__ __forceinline__ void store_output(const FlashArgs& a, const BlockWork& w, float (&o)[MT][DTA][4],
                                             const float (&row_max)[MT][2], const float (&row_sum)[MT][2],
                                             int warp_row0, int g, int t, int lane, Stage stage,
                                             bool copy_out = true) {
  T* out = static_cast<T*>(a.out) + w.b * a.o_sb + w.h * a.o_sh;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float sum = row_sum[mt][hr];
      if (QUAD_SUM) {
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      }
      const int local_row = warp_row0 + mt * 16 + g + hr * 8;
      const int row = w.m0 + local_row;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;  // fully masked row -> zeros
      if constexpr (ALIGNED) {
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          *reinterpret_cast<uint32_t*>(stage(local_row, dt * 8 + 2 * t)) =
              pack2<T>(o[mt][dt][hr * 2] * inv, o[mt][dt][hr * 2 + 1] * inv);
        }
      } else if (unsigned(row) < unsigned(a.q_len)) {  // rows before 0 (m_shift) or past q_len: not stored
        T* orow = out + int64_t(row) * a.o_ss;
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          const int col = dt * 8 + 2 * t;
          if (col < a.v_head_dim) orow[col] = T(o[mt][dt][hr * 2] * inv);
          if (col + 1 < a.v_head_dim) orow[col + 1] = T(o[mt][dt][hr * 2 + 1] * inv);
        }
      }
      if (a.lse != nullptr && t == 0 && unsigned(row) < unsigned(a.q_len)) {
        a.lse[int64_t(w.bh) * a.q_len + row] =
            sum > 0.f ? (row_max[mt][hr] * w.exp_scale + __log2f(sum)) * LN2 : NEG_INF;
      }
    }
  }
  if (ALIGNED && copy_out) {
    __syncwarp();
    copy_staged_rows<T, MT * 16, DT * 8>(a, out, w.m0 + warp_row0, warp_row0, lane, stage);
  }
}

// MASKED: an attn_mask is present (its per-element loads cost registers, so
// the kernel without one carries no mask code at all).
template <typename T, typename CFG, bool ALIGNED, bool MASKED>
__global__ void __launch_bounds__(CFG::THREADS, CFG::BLOCKS_PER_SM) flash_fwd_kernel(const FlashArgs a) {
  constexpr int D = CFG::HEAD_DIM, BM = CFG::BLOCK_M, BN = CFG::BLOCK_N;
  constexpr int MT = CFG::M_TILES, NT = CFG::N_TILES, DT = CFG::D_TILES, THREADS = CFG::THREADS;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* s_q = reinterpret_cast<T*>(smem_raw);
  T* s_k = s_q + BM * smem_stride<D>();
  T* s_v = s_k + BN * smem_stride<D>();

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;  // MMA fragment row group / column pair
  const BlockWork w = block_work<BM, BN, MASKED>(a, blockIdx.x);
  const int warp_row0 = warp * MT * 16;

  const T* q = static_cast<const T*>(a.q) + w.b * a.q_sb + w.h * a.q_sh + int64_t(w.m0) * a.q_ss;
  const T* k = static_cast<const T*>(a.k) + w.b * a.k_sb + w.kvh * a.k_sh;
  const T* v = static_cast<const T*>(a.v) + w.b * a.v_sb + w.kvh * a.v_sh;

  load_tile<T, D, BM, THREADS, ALIGNED>(s_q, q, a.q_ss, a.q_len - w.m0, a.head_dim, tid);
  if (w.n_blocks > 0) load_tile<T, D, BN, THREADS, ALIGNED>(s_k, k, a.k_ss, a.kv_len, a.head_dim, tid);
  cp_async_commit();

  float o[MT][DT][4];
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = NEG_INF;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  for (int nb = 0; nb < w.n_blocks; ++nb) {
    const int n0 = nb * BN;
    cp_async_wait_all();
    __syncthreads();  // K_nb (and Q) visible; every warp is done with V_{nb-1}
    load_tile<T, D, BN, THREADS, ALIGNED>(s_v, v + int64_t(n0) * a.v_ss, a.v_ss, a.kv_len - n0, a.v_head_dim, tid);
    cp_async_commit();

    // S = Q K^T
    float s[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t aq[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int row = warp_row0 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(aq[mt], s_q + padded_offset<D>(row, kk * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t bk[4];
        const int key = np * 16 + (lane & 7) + (lane >> 4) * 8;
        ldmatrix_x4(bk, s_k + padded_offset<D>(key, kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(s[mt][2 * np], aq[mt], bk[0], bk[1]);
          mma_16816<T>(s[mt][2 * np + 1], aq[mt], bk[2], bk[3]);
        }
      }
    }

    prepare_scores<MT, NT, MASKED>(s, a, w, w.m0 + warp_row0, n0, g, t);
    online_softmax<MT, NT, DT>(s, o, row_max, row_sum, w.exp_scale);

    cp_async_wait_all();
    __syncthreads();  // V_nb visible; every warp is done with K_nb
    if (nb + 1 < w.n_blocks) {
      const int n1 = n0 + BN;
      load_tile<T, D, BN, THREADS, ALIGNED>(s_k, k + int64_t(n1) * a.k_ss, a.k_ss, a.kv_len - n1, a.head_dim, tid);
      cp_async_commit();
    }

    // P as A fragments (16-bit pairs; the float32 scores die here), then O += P V.
    uint32_t ap[BN / 16][MT][4];
    pack_p<T, MT, NT>(s, ap);
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bv[4];
        const int key = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(bv, s_v + padded_offset<D>(key, dp * 2 + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_16816<T>(o[mt][2 * dp], ap[ks][mt], bv[0], bv[1]);
          mma_16816<T>(o[mt][2 * dp + 1], ap[ks][mt], bv[2], bv[3]);
        }
      }
    }
  }
  cp_async_wait_all();  // nothing may stay in flight when the CTA exits
  // Without key blocks no barrier ran: other warps' cp.async writes into this
  // warp's Q rows (the tile is loaded cooperatively) may be unfinished.
  if (w.n_blocks == 0) __syncthreads();

  // Aligned rows are staged in this warp's own rows of the Q tile (no other
  // warp reads them).
  store_output<T, MT, DT, ALIGNED>(a, w, o, row_max, row_sum, warp_row0, g, t, lane,
                                   [&](int row, int col) { return s_q + row * smem_stride<D>() + col; });
}

}  // namespace trt_fastops::attention
