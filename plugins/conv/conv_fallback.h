// Host side of trt_fastops' own convolution kernels (conv_fallback.cuh):
// validation of ConvParams, kernel choice, launch. Used by the conv launcher
// (conv_launch.cu); adapters go through conv_launch.h instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"
#include "plugins/conv/conv.h"
#include "plugins/conv/conv_depthwise.h"
#include "plugins/conv/conv_geometry.h"

namespace trt_fastops::conv {

enum class FallbackKernel : int32_t {
  none = 0,       // empty output: nothing to do
  direct = 1,     // one thread per output element
  gemm = 2,       // implicit GEMM gathering from NCHW x: tensor cores for 16-bit types, FFMA for float32
  gemm_nhwc = 3,  // pipelined implicit GEMM on a channels-last copy of x (16-bit types, c_in / group % 8 == 0)
  gemm_pointwise = 5,  // the same reading NCHW x directly: 1x1, stride 1, unpadded, out_sp % 8 == 0, x aligned
  depthwise = 4,  // c_in == group, 1-D / 2-D Conv: shared-memory tiles (conv_depthwise.h)
};

struct FallbackPlan {
  FallbackKernel kernel = FallbackKernel::none;
  int bn = 0;             // GEMM tile width (64 or 128)
  size_t workspace = 0;   // packed weights (GEMM) [+ the channels-last x (gemm_nhwc)], 0 otherwise
  size_t xt_offset = 0;   // gemm_nhwc: where the channels-last x starts in the workspace
  int splits = 1;         // pipelined GEMMs: split-K factor for grids too small for the GPU
  int kt_per_split = 0;   // k tiles (of 32) per split
  size_t partial_offset = 0;  // splits > 1: float32 partial sums [splits][c_out][m] in the workspace
  bool packed = false;    // GEMMs: weights repacked into the workspace per call (else read from w as
                          // they are: a 1x1 Conv whose w already has the packed layout, see weights_as_packed)
  ConvGeometry geom{};
  DepthwiseTiling depthwise{};  // kernel == depthwise
};

// "Conv" or "ConvTranspose".
inline const char* conv_op_name(const ConvParams& p) { return p.transpose ? "ConvTranspose" : "Conv"; }

// Checks what the kernels rely on (sizes, limits, pointers) and fills geom.
// Messages name the op and the offending field. Empty outputs are valid.
Status check_conv_params(const ConvParams& p, ConvGeometry* geom);

// True when the output has no element (n, c_out or an output dim is 0).
bool conv_output_empty(const ConvParams& p);

// Chooses the kernel: force = none picks (depthwise where plan_depthwise
// accepts; else direct for few output channels per group, no input channels or
// > 65535 groups; otherwise GEMM: gemm_pointwise for unpadded stride-1 1x1
// convs, else gemm_nhwc where it applies, else gemm); direct / gemm /
// gemm_nhwc / depthwise force one (gemm_nhwc means "a pipelined GEMM":
// pointwise, channels-last, else gemm; any GEMM falls to direct only for >
// 65535 groups, depthwise to the automatic choice where it does not apply).
// gemm is the choice with the smallest workspace (packed weights only).
// Pipelined GEMMs whose grid would leave most SMs of the current device idle
// split K (workspace for float32 partial sums).
// variant: the tile width and split-K factor of a pipelined GEMM instead of
// the planner's own (0: its own; ignored by the other kernels), for
// autotuning (fallback_variants).
struct FallbackVariant {
  int bn = 0;        // 64 or 128
  int splits = 0;    // 1: no split-K; n > 1: n splits (fewer when K has fewer k tiles)
  int dw_items = 0;  // depthwise: staged items per tile (-1: the register path), see plan_depthwise
};
Status plan_fallback(const ConvParams& p, FallbackKernel force, FallbackPlan* plan, FallbackVariant variant = {});

// The variants worth timing against the plan plan_fallback chose (itself not
// included): the other tile width and other split-K factors of a pipelined
// GEMM; smaller staged tiles and the register path of a staged depthwise
// plan; none for the other kernels. The best depends on how the grid fills
// the SMs, which a model cannot tell well enough (bench/NOTES-conv.md).
std::vector<FallbackVariant> fallback_variants(const FallbackPlan& plan);

// Enqueues the plan for p's pointers. workspace: plan.workspace bytes,
// 16-byte aligned (may be null when plan.workspace == 0). Never synchronises,
// never allocates: safe under CUDA-graph capture.
cudaError_t run_fallback(const FallbackPlan& plan, const ConvParams& p, void* workspace, cudaStream_t stream);

// y = act(y + bias) in place (bias optional), for a cuDNN convolution whose
// bias / activation could not be fused.
cudaError_t run_bias_activation(const ConvParams& p, cudaStream_t stream);

// Keeps `stream` busy for about `nanoseconds` (one thread polling the global
// timer): the cuDNN autotuner queues the runs it times behind it, so they run
// back to back on the GPU whatever the host spends enqueueing them.
cudaError_t launch_gpu_wait(uint64_t nanoseconds, cudaStream_t stream);

// "gemm_mma<float16,bn128>", "gemm_nhwc<float16,bn128>", "gemm_pointwise<bfloat16,bn64,split2>",
// "gemm_simt<float32>", "direct<bfloat16>" (+ ",transpose"), "depthwise<float16,k3s1>"
// (depthwise_kernel_name).
std::string fallback_kernel_name(const FallbackPlan& plan, const ConvParams& p);

}  // namespace trt_fastops::conv
