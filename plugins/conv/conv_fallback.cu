// Host side of trt_fastops' own convolution kernels: validation, kernel
// choice and launches (device code and design: conv_fallback.cuh).
//
// Instantiations: direct 3 dtypes x 2 (Conv, ConvTranspose); tensor-core GEMM
// gathering 2 dtypes x 2 x BN {64, 128}; pipelined 2 dtypes x BN {64, 128} x
// {channels-last Conv, channels-last ConvTranspose, pointwise Conv}, plus the
// channels-last copy and the split-K finalize (2); float32 GEMM 2; weight packing 3 x 2; bias +
// activation 3 x 2 (16-byte packs or scalars). Runtime-only choices (activation, bias, dims) stay runtime.
#include "plugins/conv/conv_fallback.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "plugins/common/cuda_utils.cuh"
#include "plugins/common/device.h"
#include "plugins/common/dispatch.cuh"
#include "plugins/common/smem_optin.h"
#include "plugins/conv/conv_fallback.cuh"

namespace trt_fastops::conv {
namespace {

constexpr int64_t kDimLimit = int64_t(1) << 30;    // any single size, pad or kernel extent
constexpr int64_t kPlaneLimit = int64_t(1) << 31;  // elements of one channel plane (exclusive)
constexpr int64_t kDepthLimit = (int64_t(1) << 31) - 256;  // GEMM depth cg * prod(kernel)
constexpr int kMaxGridYZ = 65535;
constexpr int kDirectMinChannels = 16;  // fewer output channels per group: direct kernel
constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // grid-stride beyond this

// a * b, or -1 when it would reach `limit`.
int64_t mul_below(int64_t a, int64_t b, int64_t limit) {
  if (a < 0 || b < 0) return -1;
  if (a != 0 && b > (limit - 1) / a) return -1;
  return a * b;
}

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Elements of x (checked against int64 overflow by check_conv_params).
int64_t x_numel(const ConvGeometry& g) { return g.batch * g.c_in * g.in_sp; }

unsigned blocks_for(int64_t total) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>((total + kThreads - 1) / kThreads, 1), kMaxBlocks));
}

bool is_async_gemm(FallbackKernel k) { return k == FallbackKernel::gemm_nhwc || k == FallbackKernel::gemm_pointwise; }

// 1x1, stride 1, unpadded (pad_begin 0, and in == out rules out a pad_end),
// positions in whole 16-byte chunks of one image, x 16-byte aligned: A comes
// straight from NCHW x.
bool pointwise_applies(const ConvParams& p, const ConvGeometry& g) {
  if (p.transpose || g.ks != 1 || g.out_sp % 8 != 0 || !is_aligned(p.x, 16)) return false;
  for (int d = 0; d < 3; ++d)
    if (g.stride[d] != 1 || g.pad[d] != 0 || g.in[d] != g.out[d]) return false;
  return true;
}

// Split-K for grids that leave most SMs idle (at most one CTA per two SMs):
// up to kMaxSplits splits of at least kMinSplitTiles k tiles each, aiming at
// two CTAs per SM. Measured on the H100 (bench/NOTES-conv.md): with 52 CTAs
// four splits halve the time; with 98-196 CTAs two or three splits lose
// more to the partial sums' traffic than they gain. requested > 0: that many
// splits instead (an autotuning variant; 1 = none), as K's k tiles allow.
constexpr int kMaxSplits = 4;
constexpr int kMinSplitTiles = 8;
int64_t gemm_ctas(const FallbackPlan& plan) {
  const ConvGeometry& g = plan.geom;
  return (g.m_total + GEMM_BM - 1) / GEMM_BM * (g.kg_pad / plan.bn) * g.group;
}
int k_tiles(const ConvGeometry& g) { return (g.kgemm + ASYNC_BK - 1) / ASYNC_BK; }
void choose_split(FallbackPlan* plan, int requested) {
  const ConvGeometry& g = plan->geom;
  const int64_t ctas = gemm_ctas(*plan);
  const int ktiles = k_tiles(g);
  int splits = requested;
  if (requested <= 0) {
    const int64_t sms = current_device_sms();
    if (ctas <= 0 || 2 * ctas > sms) return;
    splits = static_cast<int>(std::min<int64_t>({(2 * sms + ctas - 1) / ctas, kMaxSplits, ktiles / kMinSplitTiles}));
  }
  splits = std::min(splits, ktiles);
  if (splits < 2 || int64_t(g.group) * splits > kMaxGridYZ) return;
  plan->kt_per_split = (ktiles + splits - 1) / splits;
  plan->splits = (ktiles + plan->kt_per_split - 1) / plan->kt_per_split;  // none empty
}

// Tensor-core GEMMs read weights as wp[g][j < kg_pad][k < kgemm_pad]: a 1x1
// Conv's w[g * kg + j][c] is exactly that when no padding is needed, so it
// is read in place (no packing kernel, no workspace for it).
bool weights_as_packed(const ConvParams& p, const ConvGeometry& g, int bn, int bk) {
  return p.dtype != DType::f32 && !p.transpose && g.ks == 1 && g.kg % bn == 0 && g.kgemm % bk == 0 &&
         is_aligned(p.w, 16);
}

// [channels-last copy of x,] conv_gemm_async_kernel [, split-K finalize]; the
// weights are already packed. The pipeline needs more than the default 48 KiB
// of shared memory: opted into once per device and instantiation.
template <typename T, bool TR>
cudaError_t launch_gemm_async(const FallbackPlan& plan, const ConvArgs<T>& a, void* workspace, dim3 grid,
                              cudaStream_t stream) {
  const ConvGeometry& g = a.g;
  unsigned char* ws = static_cast<unsigned char*>(workspace);
  using E = uint16_t;  // moved as raw bits
  const T* xa = a.x;
  if (plan.kernel == FallbackKernel::gemm_nhwc) {
    T* xt = reinterpret_cast<T*>(ws + plan.xt_offset);
    const int64_t s_tiles = (g.in_sp + 31) / 32;
    const dim3 tgrid(static_cast<unsigned>(std::min<int64_t>(s_tiles, kMaxBlocks)),
                     static_cast<unsigned>(std::min<int64_t>((g.c_in + 31) / 32, kMaxGridYZ)),
                     static_cast<unsigned>(std::min<int64_t>(g.batch, kMaxGridYZ)));
    conv_to_nhwc_kernel<E><<<tgrid, kThreads, 0, stream>>>(reinterpret_cast<const E*>(a.x), reinterpret_cast<E*>(xt),
                                                           g.c_in, g.in_sp, g.batch);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    xa = xt;
  }
  SplitArgs split;
  if (plan.splits > 1) {
    split.partial = reinterpret_cast<float*>(ws + plan.partial_offset);
    split.kt_per_split = plan.kt_per_split;
    grid.z *= static_cast<unsigned>(plan.splits);
  }
  const int a_mode = plan.kernel == FallbackKernel::gemm_pointwise ? A_POINTWISE : A_CHANNELS_LAST;
  const cudaError_t err = dispatch_int<64, 128>(plan.bn, [&](auto BN) -> cudaError_t {
    return dispatch_int<A_CHANNELS_LAST, A_POINTWISE>(a_mode, [&](auto MODE) -> cudaError_t {
      if constexpr (TR && MODE.value == A_POINTWISE) {
        return cudaErrorInvalidValue;  // plan_fallback never plans it
      } else {
        auto kernel = conv_gemm_async_kernel<T, TR, BN.value, MODE.value>;
        constexpr int SMEM = AsyncSmem<BN.value, MODE.value>::BYTES;
        static std::atomic<uint64_t> smem_ready{0};
        if (const cudaError_t e = allow_dynamic_smem(kernel, SMEM, smem_ready); e != cudaSuccess) return e;
        kernel<<<grid, GEMM_THREADS, SMEM, stream>>>(a, xa, split);
        return cudaGetLastError();
      }
    });
  });
  if (err != cudaSuccess || plan.splits <= 1) return err;
  const dim3 fgrid(static_cast<unsigned>(std::min<int64_t>((g.m_total + kThreads - 1) / kThreads, 4096)),
                   static_cast<unsigned>(std::min<int64_t>(g.c_out, kMaxGridYZ)));
  conv_splitk_finalize_kernel<T><<<fgrid, kThreads, 0, stream>>>(g, split.partial, plan.splits, a.bias, a.y);
  return cudaGetLastError();
}

}  // namespace

bool conv_output_empty(const ConvParams& p) {
  if (p.n == 0 || p.c_out == 0) return true;
  for (int i = 0; i < p.spatial && i < CONV_MAX_SPATIAL; ++i)
    if (p.out[i] == 0) return true;
  return false;
}

Status check_conv_params(const ConvParams& p, ConvGeometry* geom) {
  const char* op = conv_op_name(p);
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    return Status::errorf(op, ": unsupported dtype ", static_cast<int>(p.dtype));
  if (p.spatial < 1 || p.spatial > CONV_MAX_SPATIAL)
    return Status::errorf(op, ": ", p.spatial, " spatial dims, expected 1, 2 or 3");
  if (p.n < 0 || p.c_in < 0 || p.c_out < 0)
    return Status::errorf(op, ": negative size (n ", p.n, ", c_in ", p.c_in, ", c_out ", p.c_out, ")");
  if (p.c_in >= kPlaneLimit || p.c_out >= kPlaneLimit)
    return Status::errorf(op, ": ", p.c_in, " input / ", p.c_out, " output channels, at most 2^31 - 1 supported");
  if (p.group < 1 || p.group >= kPlaneLimit) return Status::errorf(op, ": group ", p.group, " must be >= 1");
  if (p.c_in % p.group != 0 || p.c_out % p.group != 0)
    return Status::errorf(op, ": group ", p.group, " does not divide the ", p.c_in, " input and ", p.c_out,
                          " output channels");
  const int act = static_cast<int>(p.activation);
  if (act < ACT_NONE || act > ACT_GELU) return Status::errorf(op, ": unknown activation ", act);

  ConvGeometry g{};
  for (int d = 0; d < 3; ++d) {
    g.in[d] = g.out[d] = g.kernel[d] = g.stride[d] = g.dilation[d] = 1;
    g.pad[d] = 0;
  }
  const int front = 3 - p.spatial;  // 1-D / 2-D: leading dims of size 1
  int64_t in_sp = 1, out_sp = 1, ks = 1;
  for (int i = 0; i < p.spatial; ++i) {
    const int64_t in = p.in[i], out = p.out[i], k = p.kernel[i], s = p.stride[i], dl = p.dilation[i],
                  pb = p.pad_begin[i];
    if (k < 1 || s < 1 || dl < 1)
      return Status::errorf(op, ": spatial dim ", i, " has kernel ", k, ", stride ", s, ", dilation ", dl,
                            " (each must be >= 1)");
    if (in < 0 || out < 0) return Status::errorf(op, ": spatial dim ", i, " has a negative size");
    if (in >= kDimLimit || out >= kDimLimit || k >= kDimLimit || s >= kDimLimit || dl >= kDimLimit ||
        pb >= kDimLimit || pb <= -kDimLimit || (k - 1) * dl >= kDimLimit)
      return Status::errorf(op, ": spatial dim ", i, " (in ", in, ", out ", out, ", kernel ", k, ", stride ", s,
                            ", dilation ", dl, ", pad ", pb, ") exceeds 2^30");
    in_sp = mul_below(in_sp, in, kPlaneLimit);
    out_sp = mul_below(out_sp, out, kPlaneLimit);
    ks = mul_below(ks, k, kPlaneLimit);
    if (in_sp < 0 || out_sp < 0 || ks < 0)
      return Status::errorf(op, ": a channel plane (or the kernel) has 2^31 or more elements");
    const int d = front + i;
    g.in[d] = static_cast<int>(in);
    g.out[d] = static_cast<int>(out);
    g.kernel[d] = static_cast<int>(k);
    g.stride[d] = static_cast<int>(s);
    g.dilation[d] = static_cast<int>(dl);
    g.pad[d] = static_cast<int>(pb);
  }
  g.in_sp = in_sp;
  g.out_sp = out_sp;
  g.batch = p.n;
  g.c_in = static_cast<int>(p.c_in);
  g.c_out = static_cast<int>(p.c_out);
  g.group = static_cast<int>(p.group);
  g.cg = static_cast<int>(p.c_in / p.group);
  g.kg = static_cast<int>(p.c_out / p.group);
  g.ks = static_cast<int>(ks);
  const int64_t kgemm = mul_below(g.cg, ks, kDepthLimit);
  if (kgemm < 0)
    return Status::errorf(op, ": ", g.cg, " input channels per group times ", ks,
                          " kernel taps exceeds 2^31 - 256");
  g.kgemm = static_cast<int>(kgemm);
  g.activation = act;
  g.transpose = p.transpose;
  g.div_cg = FastDiv(static_cast<uint32_t>(std::max(g.cg, 1)));
  g.div_kw = FastDiv(static_cast<uint32_t>(g.kernel[2]));
  g.div_kh = FastDiv(static_cast<uint32_t>(g.kernel[1]));
  g.div_sd = FastDiv(static_cast<uint32_t>(g.stride[0]));
  g.div_sh = FastDiv(static_cast<uint32_t>(g.stride[1]));
  g.div_sw = FastDiv(static_cast<uint32_t>(g.stride[2]));
  g.div_osp = FastDiv(static_cast<uint32_t>(std::max<int64_t>(out_sp, 1)));
  g.div_ow = FastDiv(static_cast<uint32_t>(g.out[2]));
  g.div_oh = FastDiv(static_cast<uint32_t>(g.out[1]));

  const int64_t max64 = std::numeric_limits<int64_t>::max();
  g.m_total = mul_below(p.n, out_sp, max64);
  const int64_t y_numel = g.m_total < 0 ? -1 : mul_below(g.m_total, p.c_out, max64);
  const int64_t x_numel = mul_below(mul_below(p.n, p.c_in, max64), in_sp, max64);
  if (g.m_total < 0 || y_numel < 0 || x_numel < 0) return Status::errorf(op, ": tensor sizes overflow int64");
  if (!conv_output_empty(p)) {
    if ((g.m_total + GEMM_BM - 1) / GEMM_BM > std::numeric_limits<int32_t>::max())
      return Status::errorf(op, ": ", g.m_total, " output positions is too many for one launch");
    const int64_t w_numel = int64_t(g.c_out) * g.cg * g.ks;  // both layouts have c_out * cg * ks elements
    if (p.y == nullptr) return Status::errorf(op, ": output y is null");
    if (x_numel > 0 && p.x == nullptr) return Status::errorf(op, ": input x is null");
    if (w_numel > 0 && p.w == nullptr) return Status::errorf(op, ": weight w is null");
  }
  *geom = g;
  return Status::ok();
}

Status plan_fallback(const ConvParams& p, FallbackKernel force, FallbackPlan* plan, FallbackVariant variant) {
  FallbackPlan out;
  TRT_FASTOPS_RETURN_IF_ERROR(check_conv_params(p, &out.geom));
  if (conv_output_empty(p)) {
    out.kernel = FallbackKernel::none;
    *plan = out;
    return Status::ok();
  }
  ConvGeometry& g = out.geom;
  if (force == FallbackKernel::none || force == FallbackKernel::depthwise) {
    if (plan_depthwise(p, g, &out.depthwise, variant.dw_items)) {
      out.kernel = FallbackKernel::depthwise;
      *plan = out;
      return Status::ok();
    }
    force = FallbackKernel::none;  // depthwise forced where it does not apply: the usual choice
  }
  const bool wide16 = p.dtype != DType::f32;
  int bn = wide16 && g.kg > 64 ? 128 : 64;
  const int bk = wide16 ? MMA_BK : SIMT_BK;
  static_assert(MMA_BK == ASYNC_BK, "both tensor-core kernels read the same packed weights");
  const int64_t kg_pad = round_up(g.kg, bn);
  const bool can_gemm = g.group <= kMaxGridYZ && kg_pad / bn <= kMaxGridYZ;
  // 8 channels of one pixel are one 16-byte chunk of the channels-last copy.
  const bool can_nhwc = wide16 && g.cg % 8 == 0 && g.kgemm > 0;
  bool gemm;
  if (force == FallbackKernel::direct) {
    gemm = false;
  } else if (force == FallbackKernel::gemm || is_async_gemm(force)) {
    gemm = can_gemm;
  } else {
    gemm = can_gemm && g.kgemm > 0 && g.kg >= kDirectMinChannels;
  }
  if (!gemm) {
    if (int64_t(g.c_out) * g.out_sp >= kPlaneLimit)
      return Status::errorf(conv_op_name(p), ": ", g.c_out, " x ", g.out_sp,
                            " output elements per image is too many for the direct kernel");
    out.kernel = FallbackKernel::direct;
    *plan = out;
    return Status::ok();
  }
  out.kernel = FallbackKernel::gemm;
  if (force != FallbackKernel::gemm && wide16 && g.kgemm > 0) {
    if (pointwise_applies(p, g)) {
      out.kernel = FallbackKernel::gemm_pointwise;
    } else if (can_nhwc) {
      out.kernel = FallbackKernel::gemm_nhwc;
    }
  }
  if (is_async_gemm(out.kernel) && (variant.bn == 64 || variant.bn == 128)) bn = variant.bn;
  out.bn = wide16 ? bn : SIMT_BN;
  g.kg_pad = static_cast<int>(round_up(g.kg, out.bn));
  g.kgemm_pad = static_cast<int>(round_up(g.kgemm, bk));
  const int64_t elems = mul_below(mul_below(g.group, g.kg_pad, int64_t(1) << 62), g.kgemm_pad, int64_t(1) << 60);
  if (elems < 0) return Status::errorf(conv_op_name(p), ": packed weights too large");
  out.packed = !weights_as_packed(p, g, out.bn, bk);
  // Workspace: [packed weights |] [channels-last x |] [split-K partials], 256-byte aligned parts.
  size_t bytes = out.packed ? static_cast<size_t>(elems * dtype_size(p.dtype)) : 0;
  if (out.kernel == FallbackKernel::gemm_nhwc) {
    out.xt_offset = static_cast<size_t>(round_up(static_cast<int64_t>(bytes), 256));
    bytes = out.xt_offset + static_cast<size_t>(x_numel(g) * dtype_size(p.dtype));
  }
  if (is_async_gemm(out.kernel)) {
    choose_split(&out, variant.splits);
    if (out.splits > 1) {
      out.partial_offset = static_cast<size_t>(round_up(static_cast<int64_t>(bytes), 256));
      bytes = out.partial_offset + size_t(out.splits) * g.c_out * size_t(g.m_total) * sizeof(float);
    }
  }
  out.workspace = bytes;
  *plan = out;
  return Status::ok();
}

std::vector<FallbackVariant> fallback_variants(const FallbackPlan& plan) {
  std::vector<FallbackVariant> out;
  if (plan.kernel == FallbackKernel::depthwise && plan.depthwise.staged) {
    // Fewer planes per tile: more CTAs per SM and more tiles per CTA for the
    // copies to overlap (the default suits large planes); or no staging.
    for (int items : {DW_STAGED_ITEMS / 2, DW_STAGED_ITEMS / 4, -1}) out.push_back({0, 0, items});
    return out;
  }
  if (!is_async_gemm(plan.kernel)) return out;
  const ConvGeometry& g = plan.geom;
  // 64-wide tiles double the CTAs (more of them per SM, or a fuller last
  // wave); 128 is the default only above 64 output channels per group.
  const int bns[2] = {plan.bn, g.kg > 64 ? (plan.bn == 128 ? 64 : 128) : plan.bn};
  const int ktiles = k_tiles(g);
  const int64_t sms = current_device_sms();
  for (int b = 0; b < (bns[1] != bns[0] ? 2 : 1); ++b) {
    FallbackPlan shape = plan;
    shape.bn = bns[b];
    shape.geom.kg_pad = static_cast<int>(round_up(g.kg, shape.bn));
    const int64_t ctas = gemm_ctas(shape);
    for (int splits : {1, 2, 3, 4}) {
      if (b == 0 && splits == plan.splits) continue;  // the plan itself
      // Splits only where CTAs fill less than two waves, each split keeping
      // enough k tiles to amortise its prologue and partial-sum traffic.
      if (splits > 1 && (ctas * splits > 4 * sms || ktiles / splits < kMinSplitTiles ||
                         int64_t(g.group) * splits > kMaxGridYZ))
        continue;
      out.push_back({bns[b], splits});
    }
  }
  return out;
}

cudaError_t run_fallback(const FallbackPlan& plan, const ConvParams& p, void* workspace, cudaStream_t stream) {
  if (plan.kernel == FallbackKernel::none) return cudaSuccess;
  if (plan.kernel == FallbackKernel::depthwise) return run_depthwise(plan.depthwise, plan.geom, p, stream);
  if ((plan.kernel == FallbackKernel::gemm || is_async_gemm(plan.kernel)) && plan.workspace > 0 &&
      (workspace == nullptr || !is_aligned(workspace, 16)))
    return cudaErrorInvalidValue;
  const ConvGeometry& g = plan.geom;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    ConvArgs<T> a;
    a.g = g;
    a.x = static_cast<const T*>(p.x);
    a.w = static_cast<const T*>(p.w);
    a.wp = plan.packed ? static_cast<const T*>(workspace) : static_cast<const T*>(p.w);
    a.bias = static_cast<const T*>(p.bias);
    a.y = static_cast<T*>(p.y);
    return dispatch_bool(p.transpose, [&](auto TRANSPOSE) -> cudaError_t {
      constexpr bool TR = TRANSPOSE.value;
      if (plan.kernel == FallbackKernel::direct) {
        const dim3 grid(blocks_for(int64_t(g.c_out) * g.out_sp),
                        static_cast<unsigned>(std::min<int64_t>(g.batch, kMaxGridYZ)));
        conv_direct_kernel<T, TR><<<grid, kThreads, 0, stream>>>(a);
        return cudaGetLastError();
      }
      if (plan.kernel != FallbackKernel::gemm && !is_async_gemm(plan.kernel)) return cudaErrorInvalidValue;
      constexpr bool WIDE16 = sizeof(T) == 2;
      const int64_t packed = plan.packed ? int64_t(g.group) * g.kg_pad * g.kgemm_pad : 0;
      if (packed > 0) {
        const dim3 pgrid = WIDE16 ? dim3(static_cast<unsigned>(std::min<int64_t>((g.kgemm_pad + kThreads - 1) / kThreads, 64)),
                                         static_cast<unsigned>(std::min<int64_t>(int64_t(g.group) * g.kg_pad, kMaxGridYZ)))
                                  : dim3(blocks_for(packed));
        conv_pack_weights_kernel<T, TR, WIDE16><<<pgrid, kThreads, 0, stream>>>(g, a.w, static_cast<T*>(workspace));
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
      }
      const dim3 grid(static_cast<unsigned>((g.m_total + GEMM_BM - 1) / GEMM_BM),
                      static_cast<unsigned>(g.kg_pad / plan.bn), static_cast<unsigned>(g.group));
      if constexpr (WIDE16) {
        if (is_async_gemm(plan.kernel)) return launch_gemm_async<T, TR>(plan, a, workspace, grid, stream);
        return dispatch_int<64, 128>(plan.bn, [&](auto BN) {
          conv_gemm_mma_kernel<T, TR, BN.value><<<grid, GEMM_THREADS, 0, stream>>>(a);
          return cudaGetLastError();
        });
      } else {
        if (plan.bn != SIMT_BN) return cudaErrorInvalidValue;
        conv_gemm_simt_kernel<TR><<<grid, GEMM_THREADS, 0, stream>>>(a);
        return cudaGetLastError();
      }
    });
  });
}

cudaError_t run_bias_activation(const ConvParams& p, cudaStream_t stream) {
  if (p.bias == nullptr && p.activation == Activation::none) return cudaSuccess;
  if (conv_output_empty(p)) return cudaSuccess;
  int64_t out_sp = 1;
  for (int i = 0; i < p.spatial; ++i) out_sp *= p.out[i];
  const int64_t planes = p.n * p.c_out;
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    constexpr int VEC = Pack<T>::N;
    const bool vec = out_sp % VEC == 0 && is_aligned(p.y, 16);
    return dispatch_bool(vec, [&](auto V) {
      const int64_t units = V.value ? out_sp / VEC : out_sp;
      const dim3 grid(static_cast<unsigned>(std::min<int64_t>((units + kThreads - 1) / kThreads, 1024)),
                      static_cast<unsigned>(std::min<int64_t>(planes, kMaxGridYZ)));
      conv_bias_act_kernel<T, V.value><<<grid, kThreads, 0, stream>>>(
          static_cast<T*>(p.y), static_cast<const T*>(p.bias), planes, out_sp, static_cast<int>(p.c_out),
          static_cast<int>(p.activation));
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_gpu_wait(uint64_t nanoseconds, cudaStream_t stream) {
  conv_gpu_wait_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

std::string fallback_kernel_name(const FallbackPlan& plan, const ConvParams& p) {
  const std::string t = dtype_name(p.dtype);
  const std::string tr = p.transpose ? ",transpose" : "";
  switch (plan.kernel) {
    case FallbackKernel::none: return "none";
    case FallbackKernel::direct: return "direct<" + t + tr + ">";
    case FallbackKernel::depthwise: return depthwise_kernel_name(plan.depthwise, p);
    case FallbackKernel::gemm:
      if (p.dtype == DType::f32) return "gemm_simt<" + t + tr + ">";
      return "gemm_mma<" + t + ",bn" + std::to_string(plan.bn) + tr + ">";
    case FallbackKernel::gemm_nhwc:
    case FallbackKernel::gemm_pointwise: {
      const std::string split = plan.splits > 1 ? ",split" + std::to_string(plan.splits) : "";
      const char* name = plan.kernel == FallbackKernel::gemm_nhwc ? "gemm_nhwc<" : "gemm_pointwise<";
      return name + t + ",bn" + std::to_string(plan.bn) + split + tr + ">";
    }
  }
  return "invalid";
}

}  // namespace trt_fastops::conv
