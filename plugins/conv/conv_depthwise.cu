// Host side of the depthwise convolution kernel (conv_depthwise.cuh):
// eligibility, tiling choice, launch.
//
// Instantiations: 3 dtypes x 6 variants (generic, 3x3 s1, 3x3 s2, 5x5 s1,
// 5x5 s2, 7x7 s1) x 2 paths (register prefetch, staged). Everything else
// (sizes, pads, kg, activation, bias, store alignment, stage count, cp.async
// width) stays runtime.
#include "plugins/conv/conv_depthwise.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "plugins/common/cuda_utils.cuh"
#include "plugins/common/device.h"
#include "plugins/common/dispatch.cuh"
#include "plugins/common/dtype.h"
#include "plugins/common/smem_optin.h"
#include "plugins/conv/conv_depthwise.cuh"

namespace trt_fastops::conv {
namespace {

// The kernel keeps box, plane and row offsets (slot, row shift, plane limit)
// in int32; plan_depthwise keeps every one of them below this.
constexpr int64_t kOffsetLimit = int64_t(1) << 30;
constexpr int kDefaultSms = 132;     // when the device cannot be queried (sizing the grid only)
constexpr int kDefaultBlocksPerSm = 2;

// Rough per-thread instruction counts for comparing tilings: a load of one box
// cell (slots reused / recomputed per tile), and a tile's fixed work
// (barriers, tile decode, the weight copy).
constexpr double kLoadCost = 8.0;
constexpr double kLoadCostRecomputed = 20.0;
constexpr double kTileCost = 200.0;

// Staged path: one CTA's shared memory stays below kStagedSmemCap so that two
// fit on an SM (compute needs the warps).
constexpr int64_t kStagedSmemCap = 113 * 1024;
constexpr int kDefaultSmemOptin = 48 * 1024;  // needs no opt-in

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t v, int64_t m) { return ceil_div(v, m) * m; }

int variant_of(const ConvGeometry& g) {
  if (g.kernel[1] != g.kernel[2] || g.stride[1] != g.stride[2] || g.dilation[1] != 1 || g.dilation[2] != 1)
    return DW_GENERIC;
  for (int v = 1; v < DW_VARIANTS; ++v) {
    const DwShape s = dw_variant_shape(v);
    if (s.k == g.kernel[2] && s.s == g.stride[2]) return v;
  }
  return DW_GENERIC;
}

// Per kernel instantiation: which devices have its shared-memory opt-in.
template <typename T, int K, int S, bool STAGED>
std::atomic<uint64_t> dw_smem_ready{0};

// f(conv_depthwise_kernel<T, K, S, STAGED>) for the variant's K and S, after
// opting the kernel into smem_limit bytes of dynamic shared memory where
// smem_bytes needs more than the default 48 KiB (smem_limit is the device's
// maximum, the same on every call: allow_dynamic_smem sets it once).
template <typename T, bool STAGED, typename F>
cudaError_t with_kernel(int variant, int smem_bytes, int smem_limit, F&& f) {
  return dispatch_int<DW_GENERIC, DW_K3S1, DW_K3S2, DW_K5S1, DW_K5S2, DW_K7S1>(variant, [&](auto V) -> cudaError_t {
    constexpr DwShape s = dw_variant_shape(V.value);
    auto kernel = conv_depthwise_kernel<T, s.k, s.s, STAGED>;
    if (smem_bytes > kDefaultSmemOptin) {
      if (smem_bytes > smem_limit) return cudaErrorInvalidValue;
      if (const cudaError_t e = allow_dynamic_smem(kernel, smem_limit, dw_smem_ready<T, s.k, s.s, STAGED>);
          e != cudaSuccess)
        return e;
    }
    return f(kernel);
  });
}

// Resident CTAs per SM of the kernel for t (0 when the device cannot say).
int blocks_per_sm(DType dtype, const DepthwiseTiling& t) {
  int per_sm = 0;
  const cudaError_t err = dispatch_dtype(dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    return dispatch_bool(t.staged, [&](auto STAGED) -> cudaError_t {
      return with_kernel<T, STAGED.value>(t.variant, t.smem_bytes, t.smem_limit, [&](auto kernel) -> cudaError_t {
        return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, t.threads, t.smem_bytes);
      });
    });
  });
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return per_sm;
}

// Widest cp.async (16, 8, 4 bytes) that every tile's chunk start allows: x's
// address and the chunk length (P planes) both multiples of it; 0 if none.
int staged_copy_bytes(const void* x, int64_t chunk_bytes) {
  for (int w = 16; w >= 4; w /= 2)
    if (is_aligned(x, static_cast<uintptr_t>(w)) && chunk_bytes % w == 0) return w;
  return 0;
}

// Staged shared memory: box and weights as float32 (no slots), then the buffers.
int64_t staged_smem_bytes(int64_t box_cells, int64_t weight_and_bias_cells, int64_t stage_bytes, int64_t stages) {
  return int64_t(sizeof(float)) * (box_cells + dw_round4(static_cast<int>(weight_and_bias_cells))) +
         stages * stage_bytes;
}

int device_sms_or_default() {
  const int sms = current_device_sms();
  return sms >= 1 ? sms : kDefaultSms;
}

struct Choice {
  int64_t planes = 0, tile_rows = 0, threads = 0;
  double cost = std::numeric_limits<double>::infinity();
};

}  // namespace

bool plan_depthwise(const ConvParams& p, const ConvGeometry& g, DepthwiseTiling* out, int staged_items) {
  if (p.transpose || g.transpose || g.cg != 1 || g.in[0] != 1 || g.kernel[0] != 1 || g.out[0] != 1 ||
      g.pad[0] != 0)
    return false;
  const int64_t planes = g.batch * g.c_in;  // <= x's element count: no overflow
  if (planes <= 0 || g.kg <= 0 || g.out_sp <= 0 || g.in_sp <= 0) return false;
  const int variant = variant_of(g);
  const DwShape shape = dw_variant_shape(variant);
  const int64_t ir = dw_item_rows(shape.k, shape.s);
  const int64_t ic = DW_ITEM_COLS;
  const int64_t in_w = g.in[2], out_h = g.out[1], out_w = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2], sh = g.stride[1], sw = g.stride[2];
  const int64_t dh = g.dilation[1], dw = g.dilation[2], pt = g.pad[1], pl = g.pad[2];
  const int64_t kg = g.kg, ks = g.ks;
  const int64_t max_box = int64_t(DW_MAX_THREADS) * DW_PREFETCH;
  const int64_t max_weights = int64_t(DW_MAX_THREADS) * DW_WEIGHT_PREFETCH;
  if (kg * (ks + 1) > max_weights) return false;  // one plane's weights and biases must fit
  // Box origins (oh0 * sh - pad) and the reach of the last tap stay int32,
  // and so does the per-tile row shift ih_lo * in_w.
  if ((out_h - 1) * sh + std::abs(pt) + (kh - 1) * dh >= kOffsetLimit) return false;
  if ((out_w - 1) * sw + std::abs(pl) + (kw - 1) * dw >= kOffsetLimit) return false;
  if (((out_h - 1) * sh + std::abs(pt)) * in_w >= kOffsetLimit) return false;

  const int64_t rg_full = ceil_div(out_h, ir);  // row groups of a whole plane
  const int64_t cg_full = ceil_div(out_w, ic);  // column groups of a whole row
  auto box_rows = [&](int64_t rt) { return (rt * ir - 1) * sh + (kh - 1) * dh + 1; };
  auto box_cols = [&](int64_t ct) { return round_up((ct * ic - 1) * sw + (kw - 1) * dw + 1, 4); };
  // Column groups per tile: the whole width when one row group of it fits,
  // else the widest band that does (the slots then move with each tile).
  int64_t ct = cg_full;
  if (box_rows(1) * box_cols(ct) > max_box) {
    if (box_rows(1) * box_cols(1) > max_box) return false;  // even one item's window is too large
    int64_t lo = 1, hi = cg_full;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (box_rows(1) * box_cols(mid) <= max_box) lo = mid; else hi = mid - 1;
    }
    ct = lo;
  }
  const int64_t col_tiles = ceil_div(cg_full, ct);
  const int sms = device_sms_or_default();

  // Staged path: whole-plane tiles (one row tile, one column tile) whose box,
  // weights and two staging buffers fit shared memory, with a cp.async width
  // of at least 4 bytes. P: about staged_items items per tile, at least one
  // tile per SM, the weights' register prefetch; among P / 2 .. P the widest
  // copy wins (e.g. 7x7 float16 planes are 98 bytes: P a multiple of 8 copies
  // 16 bytes at a time).
  Choice best;
  int copy_bytes = 0;
  int64_t stage_bytes = 0;
  const int smem_optin = device_smem_optin();
  const int64_t esize = dtype_size(p.dtype);
  const int64_t wb_plane = kg * (ks + 1);  // weights and biases of one plane
  auto staged_buffer = [&](int64_t np) { return round_up(np * g.in_sp * esize, 16); };
  if (col_tiles == 1 && staged_items >= 0) {
    const int64_t staged_want = staged_items > 0 ? staged_items : DW_STAGED_ITEMS;
    const int64_t plane_cells = box_rows(rg_full) * box_cols(ct);
    const int64_t items_plane = kg * rg_full * ct;
    const int64_t smem_cap = std::min<int64_t>(smem_optin, kStagedSmemCap);
    auto smem_of = [&](int64_t np, int64_t stages) {
      return staged_smem_bytes(np * plane_cells, np * wb_plane, staged_buffer(np), stages);
    };
    const int64_t p_hi = std::min({planes, int64_t(g.c_in), ceil_div(planes, sms),
                                   int64_t(DW_MAX_THREADS) * DW_WEIGHT_PREFETCH / wb_plane});
    int64_t p_want = std::max<int64_t>(1, std::min(p_hi, staged_want / items_plane));
    while (p_want > 1 && smem_of(p_want, DW_MIN_STAGES) > smem_cap) --p_want;
    if (smem_of(p_want, DW_MIN_STAGES) <= smem_cap) {
      for (int64_t np = p_want; np >= std::max<int64_t>(1, (p_want + 1) / 2); --np) {
        const int w = staged_copy_bytes(p.x, np * g.in_sp * esize);
        if (w > copy_bytes) {
          copy_bytes = w;
          best.planes = np;
        }
      }
    }
    if (copy_bytes >= 4 && ceil_div(planes, best.planes) > std::numeric_limits<int32_t>::max()) copy_bytes = 0;
    if (copy_bytes >= 4) {
      const int64_t np = best.planes;
      best.tile_rows = rg_full;
      // One item per thread where P allows, and every weight in the register prefetch.
      const int64_t want =
          std::max(round_up(np * items_plane, 32), round_up(ceil_div(np * wb_plane, DW_WEIGHT_PREFETCH), 32));
      best.threads = std::min<int64_t>(DW_MAX_THREADS, std::max<int64_t>(64, want));
      stage_bytes = staged_buffer(np);
    }
  }
  const bool staged = copy_bytes >= 4;

  // Candidates: tile_rows row groups per tile (all of a plane, then P planes
  // per tile, or a band) x CTA size; cost = waves x instructions of one tile,
  // with instructions per thread ~ item rounds x item work + box cells x load work.
  const bool unrolled = variant != DW_GENERIC;
  const double item_cost =
      unrolled ? double(ir * ic * kh * kw) + double((ir - 1) * sh + kh) * double(ceil_div((ic - 1) * sw + kw, 4)) +
                     double(kh * kw) + double(ir * ic * 4) + 40.0
               : 1.25 * double(ic * kh * kw) + double(kh * kw) + double(ic * 4) + 40.0;
  const double load_cost = col_tiles == 1 ? kLoadCost : kLoadCostRecomputed;
  for (int64_t rt = 1; rt <= rg_full && !staged; ++rt) {
    const int64_t rows = box_rows(rt);
    const int64_t plane_cells = rows * box_cols(ct);
    if (plane_cells > max_box) break;
    const int64_t row_tiles = ceil_div(rg_full, rt);
    // rt - 1 gives as many tiles with less waste: skip rt.
    if (rt > 1 && row_tiles > 1 && ceil_div(rg_full, rt - 1) == row_tiles) continue;
    const bool whole = row_tiles == 1 && col_tiles == 1;
    const int64_t p_max =
        whole ? std::min({planes, int64_t(g.c_in), max_box / plane_cells, max_weights / (kg * (ks + 1))}) : 1;
    for (int64_t np = 1; np <= p_max; ++np) {
      // Slots: plane * in_sp + box row * in_w + column; the per-tile limit: planes * in_sp.
      if ((np - 1) * g.in_sp + (rows + 1) * in_w >= kOffsetLimit ||
          np * g.in_sp > std::numeric_limits<int32_t>::max())
        break;
      const int64_t box = np * plane_cells;
      const int64_t weights = np * kg * (ks + 1);  // and biases
      const int64_t items = np * kg * rt * ct;
      const int64_t tiles = ceil_div(planes, np) * row_tiles * col_tiles;
      if (tiles > std::numeric_limits<int32_t>::max()) continue;
      const double waves = double(ceil_div(tiles, sms));
      for (int64_t threads = 32; threads <= DW_MAX_THREADS; threads += 32) {
        if (box > threads * DW_PREFETCH || weights > threads * DW_WEIGHT_PREFETCH) continue;
        const double per_thread = double(ceil_div(items, threads)) * item_cost +
                                  double(ceil_div(box, threads)) * load_cost + kTileCost;
        const double cost = waves * double(threads) * per_thread;
        if (cost < best.cost) {
          best.cost = cost;
          best.planes = np;
          best.tile_rows = rt;
          best.threads = threads;
        }
      }
    }
  }
  if (best.threads == 0) return false;

  DepthwiseTiling t;
  t.variant = variant;
  t.item_rows = static_cast<int>(ir);
  t.threads = static_cast<int>(best.threads);
  t.planes = static_cast<int>(best.planes);
  t.tile_rows = static_cast<int>(best.tile_rows);
  t.tile_cols = static_cast<int>(ct);
  t.row_tiles = static_cast<int>(ceil_div(rg_full, best.tile_rows));
  t.col_tiles = static_cast<int>(col_tiles);
  t.tiles = static_cast<int>(ceil_div(planes, best.planes) * t.row_tiles * t.col_tiles);
  t.box_rows = static_cast<int>(box_rows(best.tile_rows));
  t.box_cols = static_cast<int>(box_cols(ct));
  t.plane_cells = t.box_rows * t.box_cols;
  t.box_cells = t.planes * t.plane_cells;
  t.weight_cells = static_cast<int>(best.planes * kg * ks);
  t.bias_cells = static_cast<int>(best.planes * kg);
  t.items = static_cast<int>(best.planes * kg * best.tile_rows * ct);
  t.rows_fixed = t.row_tiles == 1;
  t.cols_fixed = t.col_tiles == 1;
  t.smem_bytes = dw_smem_floats(t.box_cells, t.weight_cells + t.bias_cells) * static_cast<int>(sizeof(float));
  t.staged = staged;
  t.div_in_w = FastDiv(static_cast<uint32_t>(g.in[2]));
  t.div_plane_cells = FastDiv(static_cast<uint32_t>(t.plane_cells));
  t.div_box_cols = FastDiv(static_cast<uint32_t>(t.box_cols));
  t.div_tile_cols = FastDiv(static_cast<uint32_t>(t.tile_cols));
  t.div_tile_rows = FastDiv(static_cast<uint32_t>(t.tile_rows));
  t.div_kg = FastDiv(static_cast<uint32_t>(kg));
  t.div_col_tiles = FastDiv(static_cast<uint32_t>(t.col_tiles));
  t.div_row_tiles = FastDiv(static_cast<uint32_t>(t.row_tiles));

  // Persistent grid: as many CTAs as fit on the device at once (each then
  // overlaps its next tile's loads with the current tile's compute).
  int per_sm = 0;
  if (staged) {
    // Stages: the most staged bytes in flight per SM, (stages - 1) x resident
    // CTAs (more buffers can cost a CTA); fewer buffers on a tie. Without a
    // device answer, 3 if they fit.
    t.copy_bytes = copy_bytes;
    t.stage_bytes = static_cast<int>(stage_bytes);
    t.smem_limit = smem_optin;
    const int64_t cap = std::min<int64_t>(smem_optin, kStagedSmemCap);
    int best_stages = 0, best_score = 0;
    for (int st = DW_MIN_STAGES; st <= DW_MAX_STAGES; ++st) {
      const int64_t smem = staged_smem_bytes(t.box_cells, t.weight_cells + t.bias_cells, stage_bytes, st);
      if (smem > cap) break;
      t.stages = st;
      t.smem_bytes = static_cast<int>(smem);
      const int blocks = blocks_per_sm(p.dtype, t);
      const int score = blocks < 1 ? (st <= 3 ? st : 0) : blocks * (st - 1);
      if (score > best_score) {
        best_score = score;
        best_stages = st;
        per_sm = blocks;
      }
    }
    if (best_stages == 0) return false;  // cannot happen: the choice above checked DW_MIN_STAGES
    t.stages = best_stages;
    t.smem_bytes = static_cast<int>(staged_smem_bytes(t.box_cells, t.weight_cells + t.bias_cells, stage_bytes,
                                                      best_stages));
  } else {
    per_sm = blocks_per_sm(p.dtype, t);
  }
  if (per_sm < 1) per_sm = kDefaultBlocksPerSm;
  t.grid = static_cast<int>(std::min<int64_t>(t.tiles, int64_t(sms) * per_sm));
  *out = t;
  return true;
}

cudaError_t run_depthwise(const DepthwiseTiling& t, const ConvGeometry& g, const ConvParams& p, cudaStream_t stream) {
  // What the kernel relies on (plan_depthwise guarantees it; a damaged plan must not run).
  if (t.tiles < 1 || t.grid < 1 || t.grid > t.tiles || t.threads < 32 || t.threads > DW_MAX_THREADS ||
      t.threads % 32 != 0 || (!t.staged && t.box_cells > t.threads * DW_PREFETCH) ||
      t.weight_cells + t.bias_cells > t.threads * DW_WEIGHT_PREFETCH || t.box_cols % 4 != 0 ||
      t.variant < 0 || t.variant >= DW_VARIANTS)
    return cudaErrorInvalidValue;
  const int64_t elem_bytes = dtype_size(p.dtype);
  // Staged: whole-plane tiles, every tile's chunk start a multiple of the copy
  // width (x's alignment is part of the plan-cache key, so a plan only meets
  // the x it was made for), the buffers as large as P planes.
  if (t.staged &&
      (t.row_tiles != 1 || t.col_tiles != 1 || t.stages < DW_MIN_STAGES || t.stages > DW_MAX_STAGES ||
       (t.copy_bytes != 4 && t.copy_bytes != 8 && t.copy_bytes != 16) ||
       !is_aligned(p.x, static_cast<uintptr_t>(t.copy_bytes)) ||
       (int64_t(t.planes) * g.in_sp * elem_bytes) % t.copy_bytes != 0 ||
       t.stage_bytes % 16 != 0 || int64_t(t.stage_bytes) < int64_t(t.planes) * g.in_sp * elem_bytes ||
       int64_t(t.smem_bytes) != staged_smem_bytes(t.box_cells, t.weight_cells + t.bias_cells, t.stage_bytes,
                                                  t.stages)))
    return cudaErrorInvalidValue;
  // y stores: 4 outputs at once needs out_w % 4 == 0 (every row start and item
  // column is then a multiple of 4) and y aligned to 4 elements; pairs likewise.
  const uintptr_t elem = static_cast<uintptr_t>(elem_bytes);
  const int store_mode = (g.out[2] % 4 == 0 && is_aligned(p.y, 4 * elem))   ? 2
                         : (g.out[2] % 2 == 0 && is_aligned(p.y, 2 * elem)) ? 1
                                                                            : 0;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    DepthwiseArgs<T> a;
    a.g = g;
    a.t = t;
    a.x = static_cast<const T*>(p.x);
    a.w = static_cast<const T*>(p.w);
    a.bias = static_cast<const T*>(p.bias);
    a.y = static_cast<T*>(p.y);
    a.store_mode = store_mode;
    return dispatch_bool(t.staged, [&](auto STAGED) -> cudaError_t {
      return with_kernel<T, STAGED.value>(t.variant, t.smem_bytes, t.smem_limit, [&](auto kernel) -> cudaError_t {
        kernel<<<t.grid, t.threads, t.smem_bytes, stream>>>(a);
        return cudaGetLastError();
      });
    });
  });
}

std::string depthwise_kernel_name(const DepthwiseTiling& t, const ConvParams& p) {
  const DwShape s = dw_variant_shape(t.variant);
  const std::string v = t.variant == DW_GENERIC
                            ? std::string("generic")
                            : "k" + std::to_string(s.k) + "s" + std::to_string(s.s);
  return std::string("depthwise<") + dtype_name(p.dtype) + "," + v + (t.staged ? ",staged>" : ">");
}

}  // namespace trt_fastops::conv
