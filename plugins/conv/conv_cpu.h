// CPU reference for Conv / ConvTranspose: the same ConvParams as the CUDA
// launcher, with host pointers. Direct loops, float64 accumulation, the bias
// and the activation applied in float64, one rounding to the output dtype.
// The ORT CPU kernels and the tests use it. Framework-free.
//
// Work is split into output planes: plane = (batch index, output channel), in
// that order (plane = b * c_out + oc); every plane is independent, so callers
// may compute disjoint plane ranges on different threads.
#pragma once

#include <cstdint>

#include "plugins/common/status.h"
#include "plugins/conv/conv.h"

namespace trt_fastops::conv {

// Checks the params (spatial rank, group divisibility, sizes and pads the
// way conv_op resolves them, pointers for tensors that hold data) and returns
// an error naming the bad field instead of touching memory.
Status check_conv_cpu_params(const ConvParams& p);

// n * c_out.
int64_t conv_cpu_planes(const ConvParams& p);

// Multiply-adds of one output plane (for sizing parallel chunks).
int64_t conv_cpu_plane_cost(const ConvParams& p);

// Computes the whole output.
Status run_conv_cpu(const ConvParams& p);

// Computes output planes [plane_begin, plane_end) only.
Status run_conv_cpu_planes(const ConvParams& p, int64_t plane_begin, int64_t plane_end);

}  // namespace trt_fastops::conv
