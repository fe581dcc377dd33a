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
const char* hopper_kernel_name(const AttentionParams& p, int variant);
// Launches it; the caller checked hopper_path_available and hopper_path_supports.
cudaError_t launch_attention_hopper(const AttentionParams& p, int variant, cudaStream_t stream);

}  // namespace trt_fastops::attention
