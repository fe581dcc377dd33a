// Internal: Dense's sm_90a path for activation "gelu", called by
// dense_launch.cc only. dense_gelu_sm90.cu holds CUTLASS 3.x GEMMs (TMA loads
// and stores, wgmma, warp-specialised persistent kernels) whose epilogue
// computes Y = GELU(X · W + bias) from the float32 accumulators: the bias
// added and the exact erf GELU applied in float32, one rounding to Y's dtype.
//
// That translation unit is compiled for sm_90a only, and only where
// TRT_FASTOPS_CUDA_ARCHS has 90a; CMake then defines TRT_FASTOPS_DENSE_SM90
// for the kernel library. Without it, this function does not exist and the
// launcher never takes the path.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"
#include "plugins/dense/dense.h"

namespace trt_fastops::dense {

// The two tile configurations (x float16 / bfloat16: four kernels in all).
enum class DenseSm90Tile : int32_t {
  large = 0,  // 128x256x64, cooperative: two consumer warpgroups share one tile
  small = 1,  // 64x128x64, ping-pong: two consumer warpgroups alternate tiles (small M / few tiles)
};
constexpr int64_t DENSE_SM90_LARGE_TILE_M = 128, DENSE_SM90_LARGE_TILE_N = 256;
// M at or below this runs the small tile (so does a large-tile grid with fewer
// tiles than SMs).
constexpr int64_t DENSE_SM90_SMALL_M = 512;
// TMA needs 16-byte aligned rows and base addresses: K and N multiples of 8
// (16-bit elements), X, W and Y 16-byte aligned.
constexpr int64_t DENSE_SM90_ALIGN_ELEMS = 8;
constexpr uintptr_t DENSE_SM90_ALIGN_BYTES = 16;

// Enqueues Y = GELU(X · W + bias) on `stream` with the given tile. The caller
// (launch_dense) has checked what the kernels need: dtype float16 / bfloat16,
// activation gelu, k > 0, K and N multiples of 8, m, n, k <= INT32_MAX, X, W and
// Y 16-byte aligned, a compute capability 9.0 device current. `device` and
// `sm_count` are the current device's (the persistent grid's size). Uses the
// params' workspace when CUTLASS asks for one (none for these kernels; a
// request beyond workspace_bytes is refused, never allocated). Never
// synchronises. Errors name the CUTLASS step:
//   "Dense: CUTLASS sm_90a GEMM <float16,128x256x64> for X [4096, 768] x W [768, 3072]:
//    can_implement failed: Error Invalid Problem"
Status launch_dense_gelu_sm90(const DenseParams& p, DenseSm90Tile tile, int device, int sm_count,
                              cudaStream_t stream);

}  // namespace trt_fastops::dense
