// Internal: the sm_90a (wgmma) attention path, called by attention_launch.cu.
#pragma once

#include <cuda_runtime_api.h>

#include "plugins/attention/attention.h"

namespace trt_fastops::attention {

// True when this build carries sm_90a code and the current device is
// compute capability 9.0.
bool hopper_path_available();
// Whether the Hopper kernel handles `p` (16-byte aligned rows, head dims up to 256).
bool hopper_path_supports(const AttentionParams& p);
// variant: tile variant (attention_set_tile_variant); masked inputs always use 0.
// allow_ws: whether the warp-specialised (TMA) kernel may run; without it, or
// when p's strides admit no tensor maps, the plain wgmma kernel runs.
const char* hopper_kernel_name(const AttentionParams& p, int variant, bool allow_ws);
// Launches it; the caller checked hopper_path_available and hopper_path_supports.
cudaError_t launch_attention_hopper(const AttentionParams& p, int variant, bool allow_ws, cudaStream_t stream);

}  // namespace trt_fastops::attention
