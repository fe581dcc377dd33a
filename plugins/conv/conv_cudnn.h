// cuDNN convolution through cudnn-frontend's graph API, with libcudnn loaded
// at run time (dlopen): the kernel library has no link-time cuDNN dependency
// and loads where cuDNN is missing (every convolution then takes trt_fastops'
// own kernels). Internal to the conv launcher (conv_launch.cu).
//
//   Conv:          conv_fprop(x, w)
//   ConvTranspose: conv_dgrad(dy = x, w) -> dx = y. ONNX's ConvTranspose weight
//                  [c_in, c_out / group, k...] is exactly the forward weight
//                  [K = c_in, C / group, k...] of the convolution whose data
//                  gradient ConvTranspose is, so it goes in unchanged.
//
// Planning (outside CUDA-graph capture only). With bias / activation, two graph
// variants compete: the FUSED graph (ADD, RELU_FWD, SWISH_FWD, GELU_FWD = erf
// form as pointwise nodes) and the PLAIN convolution followed by our
// bias/activation kernel (run_bias_activation). Heuristics (modes A, B, then
// FALLBACK; an engine configuration listed twice is built once) list engine
// configurations per variant; up to max_candidates of each are built, and
// autotuning times every built plan on the caller's buffers (plain ones together
// with our epilogue kernel, so the comparison is what a call costs) behind a GPU
// wait, so the runs are queued back to back and host cost is not GPU time; the
// median of several runs decides (conv_timing.h, the harness the launcher also
// times its own kernel with against the chosen plan). Without autotuning: heuristics' first plan of
// the fused graph, else of the plain one. The chosen CudnnPlan records whether
// its epilogue is separate, and cudnn_execute runs that epilogue itself: one
// source of truth, and a graph replay (below) covers both kernels.
//
// Execution (cudnn_execute, under the device's execution mutex). A plan whose
// graph needs only the user pointers and the workspace per call (the "direct
// path") keeps up to kPackSlots finalized variant packs keyed by the call's
// (x, w, bias, y, workspace). cuDNN's execute still costs ~20 us of host time
// per call for these engines, a CUDA graph launch ~2-3 us, so each pointer set
// seen a second time outside capture is captured once (cuDNN's execute + the
// separate epilogue, on a private per-device stream, thread-local capture mode)
// into a CUDA graph executable kept in its slot, and later calls with those
// pointers launch that graph on the caller's stream. A caller stream that is
// itself being captured (ORT / TensorRT CUDA graphs) always gets the direct
// execute, so the work lands in the caller's graph. Any failure to capture,
// instantiate or launch marks the slot "no graph": it executes directly from
// then on, never an error for the caller. Graph executables are destroyed with
// their slot or plan (a slot replaced while the caller captures only retires
// its executable, destroyed at the next call outside capture, so nothing is
// torn down inside somebody else's capture). TRT_FASTOPS_CONV_GRAPH_REPLAY=0 (read when planning)
// turns replay off; cudnn_exec_stats() counts launches / captures / failures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"
#include "plugins/conv/conv.h"

namespace trt_fastops::conv {

// Loads libcudnn once per process (TRT_FASTOPS_CUDNN_LIBRARY, else
// libcudnn.so.9, else libcudnn.so; TRT_FASTOPS_CONV_DISABLE_CUDNN=1 skips it).
// ok and *version = cudnnGetVersion() when usable, else the reason.
Status cudnn_library_status(size_t* version);

// Whether this build has the cuDNN path (the headers were found when compiling).
bool cudnn_compiled();

struct CudnnPlan;  // graph + chosen execution plan; immutable once built

struct CudnnPlanOptions {
  bool autotune = true;             // time the built plans, keep the fastest
  int max_candidates = 16;          // plans built per graph variant (fused, plain); <= 1: heuristics' first
  int64_t max_workspace = int64_t(256) << 20;  // engines needing more are skipped
  bool allow_tf32 = false;          // float32: allow TF32 / down-converting engines
  bool allow_runtime_compilation = true;
  bool graph_replay = true;         // direct-path plans replay cached CUDA graphs (see above)
  bool time_chosen = false;         // time a sole candidate too (CudnnPlanResult::time_us; it must run)
};

struct CudnnPlanResult {
  std::shared_ptr<const CudnnPlan> plan;  // null: cuDNN cannot run it (see reason)
  bool separate_epilogue = false;         // bias / activation by our kernel (cudnn_execute runs it)
  bool graph_replay = false;              // hits may replay a cached CUDA graph
  size_t workspace = 0;                   // bytes the plan needs
  double time_us = 0;                     // the plan's median GPU time when timed (conv_timing.h), else 0
  std::string description;                // "fprop+bias+relu engine=<name> (fastest of 9 fused + 7 plain;
                                          //  fused 14.2 us, plain 15.0 us)"; without timing no parentheses
  std::string reason;                     // why not, when plan is null
};

// Plans p on the current device. Outside CUDA-graph capture only: may create
// handles, synchronise `stream`, allocate and free temporary memory and (when
// autotuning) run the convolution on p's buffers, writing y. A configuration
// cuDNN does not support is not an error: ok with out->plan == nullptr.
// Errors are CUDA failures while planning.
Status cudnn_build_plan(const ConvParams& p, cudaStream_t stream, const CudnnPlanOptions& options,
                        CudnnPlanResult* out);

// Enqueues the planned convolution for p's pointers on `stream`, the separate
// bias/activation kernel included when the plan has one (no device allocation,
// no synchronisation of `stream`). workspace: the plan's bytes (may be null
// when 0). Errors carry cuDNN's message.
Status cudnn_execute(const CudnnPlan& plan, const ConvParams& p, void* workspace, cudaStream_t stream);

// Process-wide counters of the graph replay (see above).
struct CudnnExecStats {
  uint64_t graph_launches = 0;        // executions served by launching a cached CUDA graph
  uint64_t graph_captures = 0;        // graphs captured and instantiated (one per pointer set)
  uint64_t graph_failures = 0;        // captures / instantiations / launches that failed (slot -> direct)
  uint64_t capturing_executions = 0;  // direct-path executions on a caller stream under capture
};
CudnnExecStats cudnn_exec_stats();
void cudnn_reset_exec_stats();

}  // namespace trt_fastops::conv
