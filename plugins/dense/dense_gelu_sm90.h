// Internal: Dense's sm_90a path for activation "gelu", called by
// dense_launch.cc only. dense_gelu_sm90.cu holds CUTLASS 3.x GEMMs (TMA loads
// and stores, wgmma, warp-specialised kernels, most persistent) whose epilogue
// computes Y = GELU(X · W + bias) from the float32 accumulators: the bias
// added and the exact erf GELU applied in float32, one rounding to Y's dtype.
//
// That translation unit is compiled once per tile configuration (CMake:
// TRT_FASTOPS_DENSE_SM90_TILES, one object library per tile, sm_90a only) and
// only where TRT_FASTOPS_CUDA_ARCHS has 90a. CMake then defines, for the kernel
// library, TRT_FASTOPS_DENSE_SM90_BUILT: the built tiles as a comma-separated
// list of DenseSm90Tile enumerators. Without it no tile exists and the
// launcher never takes the path.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"
#include "plugins/dense/dense.h"

namespace trt_fastops::dense {

// Every tile configuration the source knows (each x float16 / bfloat16). The
// default build compiles a few (CMakeLists.txt); a tuning build
// (-DTRT_FASTOPS_DENSE_SM90_TILES=all) compiles them all for
// scripts/bench_dense.py --tiles. Names: schedule_MxN (K tile 64 throughout).
//   coop: cooperative, two consumer warpgroups share one tile (persistent);
//   pp:   ping-pong, two consumer warpgroups alternate tiles, so one's
//         epilogue (bias + erf GELU) overlaps the other's main loop;
//   sk:   cooperative with CUTLASS's stream-K scheduler (K split across CTAs
//         when there are fewer tiles than SMs; needs workspace);
//   ws:   one consumer warpgroup, one tile per CTA (not persistent: the grid
//         is the tile count), the least set-up for grids of a wave or less;
//   _c2:  2x1 thread-block clusters (W tiles multicast to both CTAs);
//   _eN:  epilogue subtiles of N columns (fewer, larger TMA stores than CUTLASS's 32).
enum class DenseSm90Tile : int32_t {
  coop_128x256 = 0,
  pp_64x128,
  pp_128x128,
  pp_64x256,
  pp_64x64,
  coop_128x128,
  coop_256x128,
  sk_128x128,
  sk_128x256,
  coop_128x256_c2,
  pp_128x128_c2,
  coop_128x256_e64,   // epilogue subtile 128x64 (auto: 128x32)
  coop_128x256_e128,  // epilogue subtile 128x128
  pp_64x64_c2,
  pp_64x32,  // small-M tiles (session 16): fewer bytes per CTA at M <= 512
  pp_64x48,
  pp_64x96,
  coop_128x96,
  ws_64x48,
  ws_64x64,
  ws_64x64_e64,
  ws_64x64_c2,
  coop_128x96_c2,
  count,
};

enum class DenseSm90Schedule : int32_t { coop, pp, ws };

struct DenseSm90TileInfo {
  const char* name;  // the enumerator's name
  int tile_m, tile_n;
  DenseSm90Schedule schedule;
  bool stream_k;     // schedule coop only (CUTLASS's stream-K kernel is cooperative)
  int cluster_m;     // CTAs per cluster along M (1: no cluster)
  int epi_n = 0;     // columns per epilogue subtile (0: CUTLASS's choice)
};
// Indexed by DenseSm90Tile; the kernels are built from these values
// (dense_gelu_sm90.cu), the launcher's tile rule reads them.
inline constexpr DenseSm90Schedule COOP = DenseSm90Schedule::coop, PP = DenseSm90Schedule::pp,
                                   WS = DenseSm90Schedule::ws;
inline constexpr DenseSm90TileInfo DENSE_SM90_TILES[] = {
    {"coop_128x256", 128, 256, COOP, false, 1}, {"pp_64x128", 64, 128, PP, false, 1},
    {"pp_128x128", 128, 128, PP, false, 1},     {"pp_64x256", 64, 256, PP, false, 1},
    {"pp_64x64", 64, 64, PP, false, 1},         {"coop_128x128", 128, 128, COOP, false, 1},
    {"coop_256x128", 256, 128, COOP, false, 1}, {"sk_128x128", 128, 128, COOP, true, 1},
    {"sk_128x256", 128, 256, COOP, true, 1},    {"coop_128x256_c2", 128, 256, COOP, false, 2},
    {"pp_128x128_c2", 128, 128, PP, false, 2},  {"coop_128x256_e64", 128, 256, COOP, false, 1, 64},
    {"coop_128x256_e128", 128, 256, COOP, false, 1, 128}, {"pp_64x64_c2", 64, 64, PP, false, 2},
    {"pp_64x32", 64, 32, PP, false, 1},         {"pp_64x48", 64, 48, PP, false, 1, 16},
    {"pp_64x96", 64, 96, PP, false, 1, 32},     {"coop_128x96", 128, 96, COOP, false, 1, 32},
    {"ws_64x48", 64, 48, WS, false, 1, 16},     {"ws_64x64", 64, 64, WS, false, 1},
    {"ws_64x64_e64", 64, 64, WS, false, 1, 64}, {"ws_64x64_c2", 64, 64, WS, false, 2},
    {"coop_128x96_c2", 128, 96, COOP, false, 2, 32},
};
static_assert(sizeof(DENSE_SM90_TILES) / sizeof(DENSE_SM90_TILES[0]) == size_t(DenseSm90Tile::count),
              "one DENSE_SM90_TILES entry per DenseSm90Tile");
constexpr const DenseSm90TileInfo& dense_sm90_tile_info(DenseSm90Tile tile) { return DENSE_SM90_TILES[int(tile)]; }

// TMA needs 16-byte aligned rows and base addresses: K and N multiples of 8
// (16-bit elements), X, W and Y 16-byte aligned.
constexpr int64_t DENSE_SM90_ALIGN_ELEMS = 8;
constexpr uintptr_t DENSE_SM90_ALIGN_BYTES = 16;

// Enqueues Y = GELU(X · W + bias) on `stream` with one tile configuration;
// each is defined by its own object (dense_gelu_sm90.cu compiled with
// TRT_FASTOPS_DENSE_SM90_TILE=<enumerator>), so callers name only built tiles.
// The caller (launch_dense) has checked what the kernels need: dtype float16 /
// bfloat16, activation gelu, k > 0, K and N multiples of 8, m, n, k <=
// INT32_MAX, X, W and Y 16-byte aligned, a compute capability 9.0 device
// current. `device` and `sm_count` are the current device's (the persistent
// grid's size). Uses the params' workspace where CUTLASS asks for one (the
// stream-K tiles; a request beyond workspace_bytes is refused, never
// allocated). Never synchronises. Errors name the CUTLASS step:
//   "Dense: CUTLASS sm_90a GEMM <float16,coop_128x256> for X [4096, 768] x W [768, 3072]:
//    can_implement failed: Error Invalid Problem"
template <DenseSm90Tile TILE>
Status launch_dense_gelu_sm90(const DenseParams& p, int device, int sm_count, cudaStream_t stream);

}  // namespace trt_fastops::dense
