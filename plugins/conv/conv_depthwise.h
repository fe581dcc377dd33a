// Depthwise convolution (c_in == group: one input channel per group, any
// channel multiplier kg = c_out / group) on trt_fastops' own kernel
// (conv_depthwise.cuh): the tiling the host chooses, and the host functions
// conv_fallback.cu calls. Plain data; compiles as C++ or CUDA.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "plugins/conv/conv.h"
#include "plugins/conv/conv_geometry.h"

namespace trt_fastops::conv {

// Kernel variants: 0 = any kernel / stride / dilation (runtime loops), else a
// square K x K kernel with equal strides S and no dilation, unrolled.
enum : int { DW_GENERIC = 0, DW_K3S1 = 1, DW_K3S2 = 2, DW_K5S1 = 3, DW_K5S2 = 4, DW_K7S1 = 5, DW_VARIANTS = 6 };

struct DwShape {
  int k, s;
};
constexpr DwShape dw_variant_shape(int variant) {
  return variant == DW_K3S1   ? DwShape{3, 1}
         : variant == DW_K3S2 ? DwShape{3, 2}
         : variant == DW_K5S1 ? DwShape{5, 1}
         : variant == DW_K5S2 ? DwShape{5, 2}
         : variant == DW_K7S1 ? DwShape{7, 1}
                              : DwShape{0, 0};
}

constexpr int dw_round4(int n) { return (n + 3) / 4 * 4; }
// Shared memory of a tile: input box, weights + biases (padded to 4), the box slots.
constexpr int dw_smem_floats(int box_cells, int weight_and_bias_cells) {
  return 2 * box_cells + dw_round4(weight_and_bias_cells);
}

// A work item is one thread's outputs of one output channel: DW_ITEM_COLS
// adjacent columns x dw_item_rows rows (unrolled variants: the input window
// of a row is read once and used by every output row that needs it), or
// DW_ITEM_COLS columns strided by the tile's column groups in one row (generic:
// neighbouring lanes read neighbouring shared-memory words).
constexpr int DW_ITEM_COLS = 4;
constexpr int dw_item_rows(int k, int s) { return k == 0 ? 1 : (s == 1 && k <= 5) ? 4 : 2; }

constexpr int DW_MAX_THREADS = 256;
// Staged path: a tile's P planes give about this many items by default (one
// per thread of a full CTA); autotuning also tries smaller tiles (more CTAs
// per SM, more tiles per CTA).
constexpr int DW_STAGED_ITEMS = DW_MAX_THREADS;
constexpr int DW_PREFETCH = 16;        // input elements each thread holds in registers per tile
constexpr int DW_WEIGHT_PREFETCH = 4;  // weights each thread holds in registers per tile
constexpr int DW_MIN_STAGES = 2, DW_MAX_STAGES = 4;  // staged path: cp.async buffers per CTA

// The tiling of one launch. A tile is P consecutive (image, channel) planes
// x a band of output rows x a band of output columns; P > 1 only when one
// tile covers whole planes. Its input box (rows x cols per plane, zero
// outside x) goes to shared memory once as float32, with the weights and
// biases of its P * kg output channels; a persistent grid walks the tiles, each CTA
// prefetching its next tile into registers while it computes the current one.
// Staged (whole planes only): the tile's P planes are one contiguous run of
// x, copied raw by cp.async into one of `stages` shared-memory buffers
// several tiles ahead, then widened into the box; box_cells is then bounded
// by shared memory instead of DW_PREFETCH registers per thread.
struct DepthwiseTiling {
  int variant = DW_GENERIC;
  int item_rows = 1;     // output rows per item
  int threads = 0;       // CTA size, a multiple of 32, <= DW_MAX_THREADS
  int planes = 1;        // P: planes per tile
  int tile_rows = 0;     // RT: item rows (row groups) per tile
  int tile_cols = 0;     // CT: column groups per tile
  int row_tiles = 0, col_tiles = 0;  // tiles per plane block along h / w
  int tiles = 0;         // plane blocks * row_tiles * col_tiles (< 2^31)
  int box_rows = 0, box_cols = 0;    // input box per plane; box_cols a multiple of 4
  int plane_cells = 0;   // box_rows * box_cols
  int box_cells = 0;     // P * plane_cells <= threads * DW_PREFETCH (staged: shared memory bounds it)
  int weight_cells = 0;  // P * kg * ks
  int bias_cells = 0;    // P * kg; weight_cells + bias_cells <= threads * DW_WEIGHT_PREFETCH
  int items = 0;         // P * kg * RT * CT
  bool rows_fixed = false;  // row_tiles == 1: every tile's box starts at the same input row
  bool cols_fixed = false;  // col_tiles == 1: box slots are the same for every tile
  int grid = 0;          // CTAs (<= tiles)
  int smem_bytes = 0;
  bool staged = false;   // whole-plane tiles through cp.async staging buffers
  int stages = 0;        // staged: buffers (DW_MIN_STAGES..DW_MAX_STAGES), tiles in flight = stages - 1
  int copy_bytes = 0;    // staged: cp.async width (4, 8, 16); x and P * in_sp elements are multiples of it
  int stage_bytes = 0;   // staged: one buffer, P * in_sp elements rounded up to 16 bytes
  int smem_limit = 0;    // staged: the kernel's dynamic shared-memory opt-in (the device's maximum)
  FastDiv div_plane_cells, div_box_cols;  // box slot -> (plane, row, col)
  FastDiv div_tile_cols, div_tile_rows, div_kg;  // item -> (plane, channel, row group, column group)
  FastDiv div_col_tiles, div_row_tiles;          // tile -> (plane block, row tile, column tile)
  FastDiv div_in_w;      // staged: plane element -> (row, column)
};

// True when p (already validated into g) can run on the depthwise kernel, with
// its tiling in *t: Conv (not ConvTranspose), 1-D or 2-D, c_in == group, an
// input box of some tile and one plane's weights fit the per-thread register
// prefetch (or, staged, a whole plane's box fits shared memory and x's
// alignment allows cp.async of at least 4 bytes), and the offsets stay in the
// kernel's 32-bit ranges. Queries the current device (SM count, shared memory,
// occupancy) for the grid size and the staged choice; planning only. The plan
// depends on x's alignment (part of the plan-cache key).
// staged_items: the staged path's items per tile (0: DW_STAGED_ITEMS; -1:
// never staged, the register path only), for autotuning (fallback_variants).
bool plan_depthwise(const ConvParams& p, const ConvGeometry& g, DepthwiseTiling* t, int staged_items = 0);

// Enqueues the depthwise kernel (never synchronises or allocates).
cudaError_t run_depthwise(const DepthwiseTiling& t, const ConvGeometry& g, const ConvParams& p, cudaStream_t stream);

// "depthwise<float16,k3s1>", "depthwise<float32,generic>", "depthwise<float16,k3s2,staged>".
std::string depthwise_kernel_name(const DepthwiseTiling& t, const ConvParams& p);

}  // namespace trt_fastops::conv
