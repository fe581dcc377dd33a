// Framework-free launcher for the layer-norm family (LayerNorm, SkipLayerNorm,
// RMSNorm). Adapters (ORT op, TensorRT plugin, pybind11) fill one NormParams
// and call launch_norm; nothing here knows about any framework.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"

namespace trt_fastops::norm {

enum class NormKind : int32_t { layer = 0, rms = 1 };

// The input is viewed as [rows, cols]: cols = product of dims [axis, rank).
// Per row r (all arithmetic in float32):
//   s      = x[r] + skip[r % skip_rows] + bias        (skip / bias optional)
//   mean   = kind == layer ? mean(s) : 0
//   rstd   = 1 / sqrt(mean((s - mean)^2) + epsilon)
//   y      = (s - mean) * rstd * gamma + beta         (beta optional)
// Optional outputs: sum_out = s (in dtype), mean_out / rstd_out (float32, one per row).
struct NormParams {
  NormKind kind = NormKind::layer;
  DType dtype = DType::f32;  // of x, skip, bias, gamma, beta, y, sum_out

  const void* x = nullptr;      // [rows, cols]
  const void* skip = nullptr;   // [skip_rows, cols] or null; broadcast over rows
  const void* bias = nullptr;   // [cols] or null, added with skip
  const void* gamma = nullptr;  // [cols], or one element when gamma_scalar
  const void* beta = nullptr;   // [cols] / one element, or null
  bool gamma_scalar = false;    // gamma (and beta) hold one element broadcast over cols
  bool beta_scalar = false;

  void* y = nullptr;          // [rows, cols]
  void* sum_out = nullptr;    // [rows, cols] or null
  float* mean_out = nullptr;  // [rows] or null (layer only)
  float* rstd_out = nullptr;  // [rows] or null

  int64_t rows = 0;
  int64_t cols = 0;
  int64_t skip_rows = 0;  // rows of skip (divides rows); ignored without skip
  float epsilon = 1e-5f;
};

// Enqueues the kernel on `stream`. Never synchronises, never allocates (safe
// under CUDA-graph capture). Returns cudaErrorInvalidValue for inconsistent
// params and cudaGetLastError() after the launch. rows == 0 is a no-op.
cudaError_t launch_norm(const NormParams& p, cudaStream_t stream);

// Which kernel variant launch_norm would pick (for tests and benchmarks).
const char* norm_kernel_name(const NormParams& p);

// Benchmark / test hook, process-wide from now on: which kernel path launch_norm
// (and norm_kernel_name) takes. automatic: the launcher's rule (norm_launch.cu);
// warp: one warp per row, 1, 2 or 4 vectors per lane; warp_fit: the same with
// exactly ceil(cols / VEC / 32) vectors per lane (3 at 768 halves); row: one CTA
// per row, one vector per thread; block: one CTA per row, 4 vectors per thread;
// generic: scalar loads (smem row cache when it fits). A forced path that cannot
// run the params (alignment, cols) falls back to the automatic choice. Returns
// the previous setting.
enum class NormPath : int32_t { automatic = 0, warp = 1, warp_fit = 2, row = 3, block = 4, generic = 5 };
NormPath norm_set_path(NormPath path);

}  // namespace trt_fastops::norm
