// Framework-free launcher for Dense (Y = act(X · W + bias)) on CUDA through
// cuBLASLt, the bias added by cuBLASLt's BIAS epilogue (one kernel, no second
// pass over Y). Adapters (the ORT op) fill one DenseParams and call
// launch_dense; nothing here knows about any framework. Semantics (shapes,
// dtypes, messages): dense_op.h.
//
// activation = gelu (exact erf GELU of v = X · W + bias, in float32): cuBLASLt's
// GELU epilogue is the tanh approximation, so it cannot serve. On compute
// capability 9.0 with an sm_90a build, float16 / bfloat16, K and N multiples of
// 8 and 16-byte aligned X, W and Y: one CUTLASS GEMM whose epilogue adds the
// bias and applies GELU (dense_gelu_sm90.h). Anywhere else: cuBLASLt with the
// BIAS epilogue, then our erf-GELU kernel over Y in place (dense_gelu.h; Y is
// rounded to its dtype twice on that path). dense_kernel_name says which.
//
// cuBLASLt is loaded at run time (dlopen "libcublasLt.so.13", then
// "libcublasLt.so"): the kernel library has no link-time dependency on it.
// Where onnxruntime-gpu runs, its CUDA EP has already loaded libcublasLt.so.13
// into the process, and dlopen returns that copy.
//
// Plans: per (device, dtype, m, n, k, bias or not, the alignment of each
// pointer, workspace size) the three matrix layouts and the algorithm
// cublasLtMatmulAlgoGetHeuristic picks (its first choice) live in a bounded,
// thread-safe LRU cache (capacity: environment TRT_FASTOPS_DENSE_PLAN_CACHE,
// default 64, read once). Planning is host-only (no allocation, no
// synchronisation, no work on any stream), so it is allowed under CUDA-graph
// capture too. One cuBLASLt handle per device, created on first use and never
// destroyed (no safe point at process exit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"
#include "plugins/common/lru_cache.h"
#include "plugins/common/status.h"

namespace trt_fastops::dense {

// What follows the bias: nothing, or the exact GELU 0.5 v (1 + erf(v / sqrt 2)).
enum class DenseActivation : int32_t { none = 0, gelu = 1 };

// "none", "gelu" (the values of the op's 'activation' attribute).
inline const char* dense_activation_name(DenseActivation a) {
  switch (a) {
    case DenseActivation::none: return "none";
    case DenseActivation::gelu: return "gelu";
  }
  return "unknown";
}

// Row-major Y[m, n] = act(X[m, k] · W[k, n] (+ bias[n] broadcast over rows)).
// Accumulation in float32 (CUBLAS_COMPUTE_32F with a float32 scale type):
// float16 / bfloat16 inputs accumulate in float32, float32 inputs run in plain
// FP32 (no TF32). m == 0 or n == 0: nothing to do. k == 0: Y = bias broadcast
// over rows, or zeros without bias (stream-ordered copies / memset; with gelu
// and a bias, the GELU kernel then runs over Y; gelu(0) = 0 needs nothing).
struct DenseParams {
  DType dtype = DType::f32;  // of x, w, bias and y
  const void* x = nullptr;     // [m, k], row-major, device
  const void* w = nullptr;     // [k, n], row-major, device
  const void* bias = nullptr;  // [n] or null, device
  void* y = nullptr;           // [m, n], row-major, device
  int64_t m = 0, n = 0, k = 0;
  DenseActivation activation = DenseActivation::none;  // applied to v = X · W + bias in float32
  void* workspace = nullptr;   // device scratch for cuBLASLt (may be null when workspace_bytes == 0)
  size_t workspace_bytes = 0;  // dense_workspace_bytes() is what adapters should pass
};

// The workspace adapters should hand launch_dense: 32 MiB, cuBLAS's
// recommendation for Hopper.
size_t dense_workspace_bytes();

// Checks what launch_dense and the CPU reference rely on: a known dtype,
// sizes >= 0 with m * n elements fitting int64, pointers for every tensor the
// computation reads or writes (x and w only when k > 0; nothing when m or n is
// 0), a workspace pointer when workspace_bytes > 0, a known activation.
// "Dense: invalid params: ...".
Status validate_dense_params(const DenseParams& p);

// Enqueues Y on `stream` (the current device must be the one the pointers
// live on). Never allocates, never synchronises: safe under CUDA-graph
// capture. Errors name the failed step: "Dense: cannot load libcublasLt.so.13
// (CUDA 13 cuBLAS): ...", "Dense: cublasLtMatmul failed:
// CUBLAS_STATUS_NOT_SUPPORTED (...)", "Dense: invalid params: ...".
Status launch_dense(const DenseParams& p, cudaStream_t stream);

// Which implementation launch_dense runs for p on the current device (the
// same decision, the pointers' alignment included; only their values are
// read): "cutlass_sm90_gelu<float16,coop_128x256>" (CUTLASS, bias + GELU in
// its epilogue), "cublaslt" / "cublaslt_bias" (activation none),
// "cublaslt+gelu" / "cublaslt_bias+gelu" (the fallback: cuBLASLt, then our GELU
// kernel), "fill_k0" / "fill_k0+gelu" (K == 0), "none" (M or N == 0),
// "invalid" (validate_dense_params refuses p).
const char* dense_kernel_name(const DenseParams& p);

// Benchmark / test hook, process-wide from now on: how activation "gelu" runs
// where the sm_90a GEMM applies. "auto": the tile by M and the grid
// (dense_launch.cc sm90_tile); "fallback": cuBLASLt + the GELU kernel anyway;
// a tile name from dense_sm90_tiles(): that tile. Where the GEMM does not apply
// the fallback runs whatever the setting. *previous (may be null) gets the
// setting it replaces; an unknown name is refused ("Dense: unknown GELU path
// 'x' (this build has 'auto', 'fallback', 'coop_128x256', ...)"), the setting
// unchanged.
Status dense_set_gelu_path(const std::string& path, std::string* previous);
// The sm_90a GEMM tiles this build carries ("coop_128x256", "ws_64x64", ...;
// empty without an sm_90a build).
std::vector<std::string> dense_sm90_tiles();

// Whether cuBLASLt can be loaded (loads it on first call); *version (may be
// null) gets cublasLtGetVersion(), 0 when not loaded.
Status dense_library_status(size_t* version);

// The plan cache's counters (hits, misses, evictions, size, capacity; tests).
LruCacheStats dense_plan_cache_stats();
void dense_plan_cache_reset_stats();
// Drops every plan (a caller still running one keeps it until it returns).
void dense_plan_cache_clear();
// Capacity (>= 1; least recently used plans beyond it are evicted).
void dense_plan_cache_set_capacity(size_t capacity);

}  // namespace trt_fastops::dense
