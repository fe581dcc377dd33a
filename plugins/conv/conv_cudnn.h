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
// Bias and activation are fused as pointwise nodes (ADD, RELU_FWD, SWISH_FWD,
// GELU_FWD = erf form) when some engine supports the fused graph; otherwise
// the plain convolution is planned and the launcher runs bias + activation as
// a separate kernel. Heuristics (modes A, then FALLBACK) list engine configs;
// they are built in order until one (or, autotuning, up to max_candidates)
// succeeds; autotuning times the built plans on the caller's buffers.
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
  bool autotune = true;             // time up to max_candidates plans, keep the fastest
  int max_candidates = 8;
  int64_t max_workspace = int64_t(256) << 20;  // engines needing more are skipped
  bool allow_tf32 = false;          // float32: allow TF32 / down-converting engines
  bool allow_runtime_compilation = true;
};

struct CudnnPlanResult {
  std::shared_ptr<const CudnnPlan> plan;  // null: cuDNN cannot run it (see reason)
  bool separate_epilogue = false;         // bias / activation not fused: run them after
  size_t workspace = 0;                   // bytes the plan needs
  std::string description;                // "fprop+bias+relu engine=<name>"
  std::string reason;                     // why not, when plan is null
};

// Plans p on the current device. Outside CUDA-graph capture only: may create
// handles, synchronise `stream`, allocate and free temporary memory and (when
// autotuning) run the convolution on p's buffers, writing y. A configuration
// cuDNN does not support is not an error: ok with out->plan == nullptr.
// Errors are CUDA failures while planning.
Status cudnn_build_plan(const ConvParams& p, cudaStream_t stream, const CudnnPlanOptions& options,
                        CudnnPlanResult* out);

// Enqueues the planned convolution for p's pointers on `stream` (no
// allocation, no synchronisation). workspace: the plan's bytes (may be null
// when 0). Errors carry cuDNN's message.
Status cudnn_execute(const CudnnPlan& plan, const ConvParams& p, void* workspace, cudaStream_t stream);

}  // namespace trt_fastops::conv
