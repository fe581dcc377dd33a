// Framework-free launcher for Conv / ConvTranspose on CUDA (params: conv.h).
//
//   ConvPlanHandle plan;
//   size_t ws = 0;
//   Status st = conv_prepare(p, stream, &plan, &ws);          // cache hit: a lookup
//   ... allocate ws bytes of device memory (16-byte aligned) from the framework ...
//   st = conv_run(p, plan, workspace, ws, stream);            // enqueue only
//
// conv_prepare looks the signature (ConvKey, plan_cache.h) up in a bounded,
// thread-safe LRU cache. On a miss it plans: a cuDNN graph through
// cudnn-frontend (bias + activation fused into the graph, or the plain
// convolution followed by our bias/activation kernel, whichever autotuning
// times faster: conv_cudnn.h), or, when cuDNN
// refuses the configuration or is not installed, trt_fastops' own kernels
// (conv_fallback.cuh). With autotuning (ConvBackend::automatic), our kernel is
// timed against cuDNN's chosen plan on the same buffers with the same harness
// (conv_timing.h) and runs instead when it is strictly faster (it then needs
// only its own workspace). cuDNN only gets x, w, bias and y that are 16-byte
// aligned; other alignments (views, offsets) run on trt_fastops' kernels,
// which vectorise only on memory they checked or aligned themselves (the
// workspace, y for the bias pass). The decision is cached either way, so the second call
// with the same signature builds nothing. Planning may synchronise the stream,
// allocate temporary memory and (autotuning) run the convolution on p's
// buffers, so it never happens under CUDA-graph capture: a cache miss while
// `stream` is capturing is an error that says to warm up first.
//
// conv_run only enqueues (no allocation, no synchronisation: capture-safe).
// A cuDNN hit whose pointers were seen before replays a cached CUDA graph of
// that execution when the stream is not being captured (cuDNN's execute costs
// ~20 us of host time, a graph launch ~2-3 us; conv_cudnn.h has the design);
// so do the fallback's launches (2-4 launches of ~3 us; conv_replay.h).
// A cuDNN plan that fails at execution is replaced in the cache by the
// fallback, which runs for that call too (warning printed once per process).
//
// Environment (read when planning, except FORCE_FALLBACK which is read on
// every conv_prepare):
//   TRT_FASTOPS_CONV_FORCE_FALLBACK=1    every convolution on trt_fastops' kernels
//   TRT_FASTOPS_CONV_CACHE_SIZE=N        plan cache capacity (default 256), read once
//   TRT_FASTOPS_CONV_AUTOTUNE=0          take cuDNN's first supported plan untimed (and never
//                                        time the fallback against it, nor its variants:
//                                        tile widths, split-K factors)
//   TRT_FASTOPS_CONV_TIME_FALLBACK=0     autotuning never picks the fallback over cuDNN's plan
//   TRT_FASTOPS_CONV_AUTOTUNE_CANDIDATES=N  plans built and timed per graph variant
//                                        (fused, plain; default 16; 0 or 1: heuristics' first)
//   TRT_FASTOPS_CONV_GRAPH_REPLAY=0      hits always execute directly (no CUDA graphs)
//   TRT_FASTOPS_CONV_MAX_WORKSPACE_MB=N  skip cuDNN engines needing more (default 256)
//   TRT_FASTOPS_CONV_ALLOW_TF32=1        float32 may use TF32 engines (default: exact)
//   TRT_FASTOPS_CONV_RUNTIME_COMPILE=0   skip engines that compile kernels at run time
//   TRT_FASTOPS_CONV_DISABLE_CUDNN=1, TRT_FASTOPS_CUDNN_LIBRARY=path: see conv_cudnn.h
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "plugins/common/lru_cache.h"
#include "plugins/common/status.h"
#include "plugins/conv/conv.h"

namespace trt_fastops::conv {

enum class ConvBackend : int32_t {
  automatic = 0,        // cuDNN where it can, else the fallback (FORCE_FALLBACK=1: fallback)
  cudnn = 1,            // cuDNN or an error (tests: prove cuDNN ran)
  fallback = 2,         // trt_fastops' kernels, their own choice
  fallback_gemm = 3,    // an implicit-GEMM kernel: channels-last where it applies (direct only beyond 65535 groups)
  fallback_direct = 4,  // the direct kernel
  fallback_gather = 5,  // the implicit GEMM gathering from NCHW (the smallest workspace)
  fallback_depthwise = 6,  // the depthwise kernel (the fallback's own choice where it does not apply)
};

// "auto", "cudnn", "fallback", "gemm", "direct", "gather", "depthwise".
const char* conv_backend_name(ConvBackend backend);
bool parse_conv_backend(const std::string& name, ConvBackend* backend);

struct ConvPlan;  // immutable once built; shared by the cache and its users
using ConvPlanHandle = std::shared_ptr<const ConvPlan>;

// See above. p holds the real device pointers (their alignment is part of the
// signature; autotuning may write y). On success *plan is set and
// *workspace_bytes is what conv_run needs (a cuDNN plan: cuDNN's and the
// fallback's maximum, so a failing cuDNN plan can fall back within the same
// workspace; a fallback plan: the fallback's).
Status conv_prepare(const ConvParams& p, cudaStream_t stream, ConvPlanHandle* plan, size_t* workspace_bytes,
                    ConvBackend backend = ConvBackend::automatic);

// Enqueues the convolution planned for p (same signature as in conv_prepare).
// workspace: >= the prepared bytes, 16-byte aligned, device memory valid until
// the work on `stream` completes (null when 0 bytes).
Status conv_run(const ConvParams& p, const ConvPlanHandle& plan, void* workspace, size_t workspace_bytes,
                cudaStream_t stream);

// An upper bound on the workspace conv_prepare can ask for p's sizes when
// cuDNN engines are limited to cudnn_budget bytes: max(cudnn_budget, the
// fallback's workspace, i.e. its packed weights). For frameworks that fix the
// workspace before any data exists (TensorRT's getWorkspaceSize): depends on
// sizes only, p's data pointers are not read and may be null (see
// make_conv_size_params in conv_op.h). A plan needing more than the bound can
// be replaced by ConvBackend::fallback, whose workspace is within it. Refuses
// sizes the fallback refuses (with its message). Plans and allocates nothing.
Status conv_workspace_bound(const ConvParams& p, size_t cudnn_budget, size_t* bytes);

struct ConvPlanInfo {
  bool empty = false;              // nothing to compute (an empty output)
  bool cudnn = false;              // runs cuDNN (else the fallback kernel)
  bool separate_epilogue = false;  // cuDNN without fused bias/activation (our kernel after it)
  bool graph_replay = false;       // cuDNN hits with known pointers replay a cached CUDA graph
  size_t workspace = 0;
  double cudnn_us = 0;             // median GPU us of cuDNN's chosen plan at planning (0: not timed)
  double fallback_us = 0;          // the same for the fallback, timed against it (0: not timed)
  std::string description;         // "cudnn fprop+bias+relu engine=... (fastest of 9 fused + 7 plain; fused
                                   // 14.2 us, plain 15.0 us); fallback gemm_mma<float16,bn64> 41.0 us" /
                                   // "cudnn fprop engine=... +bias by trt_fastops kernel" /
                                   // "fallback gemm_mma<float16,bn64>" / "fallback gemm_mma<float16,bn64>
                                   // (faster than cuDNN's best: 206.2 us vs 340.9 us, cudnn fprop ...)"
  std::string fallback_kernel;     // the kernel the fallback would use
  std::string cudnn_refusal;       // why cuDNN was not used (empty when it is; "slower than ..." when
                                   // the fallback was timed faster)
};
ConvPlanInfo conv_plan_info(const ConvPlanHandle& plan);

struct ConvCacheStats {
  LruCacheStats cache;
  uint64_t cudnn_plans = 0;      // signatures planned on cuDNN
  uint64_t fallback_plans = 0;   // signatures planned on the fallback (incl. empty outputs)
  uint64_t exec_failures = 0;    // cuDNN plans that failed at execution (then evicted)
  uint64_t capture_misses = 0;   // cache misses refused during capture
  uint64_t graph_launches = 0;   // cuDNN executions replayed from a cached CUDA graph
  uint64_t graph_captures = 0;   // such graphs captured (one per plan and pointer set)
  uint64_t graph_failures = 0;   // captures / launches that failed (that pointer set executes directly)
  uint64_t capturing_executions = 0;  // replay-eligible executions on a stream being captured (direct)
  uint64_t fallback_graph_launches = 0;   // fallback calls replayed from a cached CUDA graph (conv_replay.h)
  uint64_t fallback_graph_captures = 0;   // such graphs captured (one per plan and pointer set)
  uint64_t fallback_graph_failures = 0;   // their captures / launches that failed (then run directly)
  bool cudnn_compiled = false;   // this build has the cuDNN path
  bool cudnn_available = false;  // libcudnn loaded
  size_t cudnn_version = 0;
  std::string cudnn_status;      // "ok" or why cuDNN is unavailable
};
ConvCacheStats conv_cache_stats();
void conv_cache_clear();                   // drops every plan
void conv_cache_reset_stats();             // zeroes the counters
void conv_cache_set_capacity(size_t capacity);

// Test hook: the next `count` cuDNN executions report a failure without
// running (exercises the evict-and-fall-back path). 0 disarms it.
void conv_debug_fail_cudnn_executions(int count);

}  // namespace trt_fastops::conv
