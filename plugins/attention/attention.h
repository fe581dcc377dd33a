// Framework-free launcher contract for the Attention op (ONNX Attention,
// opset 23). Adapters (ORT op, TensorRT plugin, pybind11) fill one
// AttentionParams through attention_op.h and call launch_attention; the CPU
// reference (attention_cpu.h) takes the same struct with host pointers.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"

namespace trt_fastops::attention {

constexpr int64_t ATTENTION_MAX_HEAD_DIM = 256;

enum class MaskKind : int32_t {
  none = 0,
  boolean = 1,   // uint8 per element: nonzero = attend, 0 = masked (-inf)
  additive = 2,  // mask_dtype per element, added to the (softcapped) score
};

// Every tensor is a logical [batch, heads, seq, dim] view whose last dim is
// contiguous; the other strides are in elements. So the 4-D layout
// [B, H, S, D] and the 3-D layout [B, S, H * D] are both views, no copies.
struct TensorView {
  int64_t stride_b = 0, stride_h = 0, stride_s = 0;
};

// Per batch b, query head h, query row i and key j (all math in float32):
//   kv_head = h / (q_heads / kv_heads)                  (GQA / MQA by head mapping)
//   s       = scale * dot(q[b, h, i, :], k[b, kv_head, j, :])
//   s       = softcap > 0 ? softcap * tanh(s / softcap) : s
//   s      += additive mask[b, h, i, j]                  (mask_kind == additive)
//   s       = -inf where masked: boolean mask false, causal and j > i + causal_offset,
//             or j >= mask_kv_len (ONNX pads a short mask with -inf / false)
//   p       = softmax_j(s)
//   out[b, h, i, :] = sum_j p[j] * v[b, kv_head, j, :]
// A row whose every s is -inf (fully masked) yields zeros, never NaN.
// lse (optional, float32 [batch, q_heads, q_len] contiguous) receives
// log(sum_j exp(s_j)) per row (-inf for a fully masked row).
struct AttentionParams {
  DType dtype = DType::f16;  // of q, k, v, out (GPU: f16 / bf16; CPU reference: all three)

  const void* q = nullptr;  // [batch, q_heads, q_len, head_dim]
  const void* k = nullptr;  // [batch, kv_heads, kv_len, head_dim]
  const void* v = nullptr;  // [batch, kv_heads, kv_len, v_head_dim]
  void* out = nullptr;      // [batch, q_heads, q_len, v_head_dim]
  TensorView q_view, k_view, v_view, out_view;

  int64_t batch = 0;
  int64_t q_heads = 0;
  int64_t kv_heads = 0;  // divides q_heads
  int64_t q_len = 0;
  int64_t kv_len = 0;
  int64_t head_dim = 0;    // of q and k, 1 ... ATTENTION_MAX_HEAD_DIM
  int64_t v_head_dim = 0;  // of v and out, 1 ... ATTENTION_MAX_HEAD_DIM

  float scale = 0.f;    // already resolved (the op layer applies the 1/sqrt(head_dim) default)
  float softcap = 0.f;  // 0: none
  bool causal = false;
  int64_t causal_offset = 0;  // key j is visible to query i iff j <= i + causal_offset

  MaskKind mask_kind = MaskKind::none;
  DType mask_dtype = DType::f16;  // additive masks only
  const void* mask = nullptr;
  // Element strides of the mask over [batch, q_heads, q_len, kv]; 0 broadcasts
  // that dim. Keys j >= mask_kv_len are masked.
  int64_t mask_stride_b = 0, mask_stride_h = 0, mask_stride_q = 0, mask_stride_k = 1;
  int64_t mask_kv_len = 0;

  float* lse = nullptr;

  // Device scratch of workspace_bytes for the launch's own use, or null.
  // With attention_workspace_bytes(p) bytes, causal inputs on the
  // warp-specialised kernel draw their tiles from a counter kept there (zeroed
  // on the stream before the kernel: a memset node under graph capture), which
  // balances long causal grids; without, they take a computed order. Launches
  // that may run at the same time need workspaces of their own.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// Bytes of workspace launch_attention can put to use for p (0: none). Reads
// only p.dtype and p.causal, so callers may ask before the shapes are known
// (TensorRT's getWorkspaceSize).
constexpr size_t ATTENTION_WORKSPACE_BYTES = 16;
size_t attention_workspace_bytes(const AttentionParams& p);

// Enqueues the forward kernel on `stream`. Never synchronises, never
// allocates, runs without a workspace (safe under CUDA-graph capture). Returns
// cudaErrorInvalidValue for inconsistent params (f32 on the GPU, head dims
// out of range, kv_heads not dividing q_heads, null pointers) and
// cudaGetLastError() after the launch. Rows that are not 16-byte aligned
// (head dims not a multiple of 8, odd strides or pointers) are handled by a
// slower variant, not refused. An empty problem (any count 0) is a no-op, except that
// kv_len == 0 writes zeros to out (every row is fully masked).
cudaError_t launch_attention(const AttentionParams& p, cudaStream_t stream);

// Why launch_attention would refuse `p` (a short sentence), or null when it
// accepts it. Adapters use it to produce the op-level error.
const char* attention_unsupported_reason(const AttentionParams& p);

// Which kernel variant launch_attention would pick (tests and benchmarks).
const char* attention_kernel_name(const AttentionParams& p);

// Benchmark hook: selects the tile variant (0 = default) of the sm80 kernel
// used for aligned rows from now on, process-wide; returns the previous one.
// Out-of-range -> default.
int attention_set_tile_variant(int variant);

// Which kernel family runs: auto = the sm_90a kernels on compute capability
// 9.0 when the build carries sm_90a code and the rows are 16-byte aligned (the
// warp-specialised TMA kernel where the views admit tensor maps and the head
// dims are at most 128, else the plain wgmma kernel), else the sm80 (mma.sync)
// kernel, which runs everywhere. wgmma forces the plain wgmma kernel where auto
// would take the warp-specialised one. Tests and benchmarks force a family
// process-wide; returns the previous setting.
enum class AttentionPath : int { automatic = 0, sm80 = 1, wgmma = 2 };
AttentionPath attention_set_path(AttentionPath path);

// Benchmark hook: how inputs are scheduled on the warp-specialised kernel from
// now on, process-wide: -1 the default, -2 the persistent grid head-major on
// every SM, without dealing the partial tiles apart or leaving SMs out of
// rounds that don't need them, -3 (causal inputs given a workspace) tiles
// drawn from a counter, heaviest first in sections of heads, -5 the default
// without the causal tail table (the snake's order to the last round), 0 a CTA
// per tile (the hardware balances uneven tiles), n > 0 the persistent grid with
// tiles in sections of heads whose K/V take n MiB (causal: heaviest first).
// Returns the previous setting.
int attention_set_schedule(int section_mib);

// Benchmark hook: where the persistent grid runs tiles in sections of heads
// (the default for causal inputs, or attention_set_schedule(n > 0)), sections
// of `heads` heads from now on, process-wide, instead of the launcher's
// choice; 0 restores it. Returns the previous setting.
int attention_set_section_heads(int heads);

// Test and benchmark hook: how the warp-specialised kernel's output leaves
// from now on, process-wide: automatic = TMA stores issued by a producer warp
// (where the output admits a tensor map), consumers = each consumer warp's own
// 16-byte stores. Returns the previous setting.
enum class AttentionStore : int { automatic = 0, consumers = 1 };
AttentionStore attention_set_output_store(AttentionStore store);

// Whether the sm_90a kernels launch with programmatic stream serialization
// (programmatic dependent launch) from now on, process-wide: a kernel's CTAs
// may then start, and set up, while the kernel ahead of it in the stream
// finishes; each waits for that kernel's completion and memory before its
// first global access, so results are the same either way. Default on;
// TRT_FASTOPS_ATTENTION_PDL=0 in the environment makes it off. Returns the
// previous setting.
bool attention_set_dependent_launch(bool on);

}  // namespace trt_fastops::attention
