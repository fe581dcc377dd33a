// Dense's sm_90a GEMM for activation "gelu" (design: dense_gelu_sm90.h):
// CUTLASS 3.x CollectiveBuilder kernels computing Y = GELU(X · W + bias) with
// the bias and the exact erf GELU in the epilogue (an epilogue visitor tree:
// fusion::LinCombPerColBiasEltAct<GeluErf>), float32 accumulation and
// epilogue math, one rounding to Y's dtype. GeluErf is our gelu_erf
// (dense_gelu.cuh: v Phi(v) with erf to 1.5e-7 in 13 instructions), the same
// float expression as our fallback kernel; CUTLASS's thread::GELU calls erff,
// and the cooperative schedule's epilogue is not hidden by the main loop, so
// every instruction per element shows in the GEMM's time.
//
// Layouts, in CUTLASS's (M, N, K) view of our row-major tensors:
//   A = X [M, K] row-major: layout tag RowMajor, K-major.
//   B = W [K, N] row-major: CUTLASS's B is (N, K); tag RowMajor means N-major,
//       which 16-bit wgmma reads from shared memory as it is (no transpose pass).
//   C: void (no source load; can_implement requires beta == 0, and with beta
//       == 0 the beta * C node zeroes its C registers and adds nothing:
//       Sm90TreeVisitor<Sm90Compute<homogeneous_multiply_add>, ..., Sm90SrcFetch>).
//   D = Y [M, N] row-major.
//   bias [N]: "PerColBias" is a per-column bias: Sm90RowBroadcast with stride
//       (_0, _1), i.e. indexed by N and broadcast down M (sm90_callbacks_tma_
//       warpspecialized.hpp); a null pointer reads as zeros (no bias). It is
//       read element by element, so it needs no more than element alignment.
//
// Tiles (dense_gelu_sm90.h DENSE_SM90_TILES): this file is compiled once per
// tile, TRT_FASTOPS_DENSE_SM90_TILE naming the DenseSm90Tile enumerator, and
// defines launch_dense_gelu_sm90<that tile> for float16 and bfloat16. Tile
// shape, schedule (cooperative / ping-pong / one consumer warpgroup), scheduler
// (persistent / stream-K; the one-consumer kernels are not persistent)
// and cluster come from the table, so the kernels cannot drift from the
// launcher's idea of them.
//
// Clusters: the _c2 tiles launch with a static 2x1x1 cluster (cudaLaunchKernelEx
// with a cluster dimension); our CUDA-graph cache (plugins/common/graph_cache.h)
// then re-instantiates instead of updating in place. The others launch with
// plain <<<>>> and stay updatable.
//
// Schedulers: persistent (the default; grid at most one CTA per SM walking
// the tiles, no workspace) or stream-K (sk_ tiles: K split across CTAs when
// tiles are few; partial sums and flags in the caller's workspace, whose flags
// initialize_workspace zeroes on the stream before the GEMM). Host cost per
// call: can_implement and three TMA descriptors (cuTensorMapEncodeTiled); the
// shared-memory opt-in happens once per kernel and device.
//
// This file is compiled for sm_90a only (CMake: object library
// trt_fastops_dense_sm90); the #error keeps other device passes out, since
// CUTLASS would compile its sm_90 kernels there to a trap.
#include "plugins/dense/dense_gelu_sm90.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "dense_gelu_sm90.cu must be compiled for sm_90a only (CMake targets trt_fastops_dense_sm90_<tile>)"
#endif
#ifndef TRT_FASTOPS_DENSE_SM90_TILE
#error "compile dense_gelu_sm90.cu with -DTRT_FASTOPS_DENSE_SM90_TILE=<DenseSm90Tile enumerator>"
#endif

#include <atomic>
#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/bfloat16.h>
#include <cutlass/half.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/kernel_hardware_info.h>

#include "plugins/common/cuda_status.h"
#include "plugins/common/smem_optin.h"
#include "plugins/dense/dense_gelu.cuh"

namespace trt_fastops::dense {
namespace {

constexpr DenseSm90Tile TILE = DenseSm90Tile::TRT_FASTOPS_DENSE_SM90_TILE;
constexpr DenseSm90TileInfo INFO = dense_sm90_tile_info(TILE);
static_assert(!INFO.stream_k || INFO.schedule == DenseSm90Schedule::coop, "CUTLASS's stream-K kernel is cooperative");

// The epilogue's activation (CUTLASS applies it to a fragment at a time).
template <class T>
struct GeluErf {
  CUTLASS_HOST_DEVICE T operator()(T const& v) const { return T(gelu_erf(float(v))); }
};
template <class T, int N>
struct GeluErf<cutlass::Array<T, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& v) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(gelu_erf(float(v[i])));
    return y;
  }
};

// One GEMM + bias + GELU kernel for this file's tile. ELEMENT:
// cutlass::half_t / bfloat16_t (X, W, bias and Y).
template <class ELEMENT>
struct GeluGemm {
  using Element = ELEMENT;
  using ElementAccumulator = float;
  using ElementCompute = float;  // bias add and GELU in float32
  static constexpr int ALIGN = 128 / cutlass::sizeof_bits<Element>::value;  // 8 elements: 16-byte TMA rows
  static_assert(ALIGN == DENSE_SM90_ALIGN_ELEMS, "dense_gelu_sm90.h's alignment rule must match the kernels'");
  using TileShape = cute::Shape<cute::Int<INFO.tile_m>, cute::Int<INFO.tile_n>, cute::_64>;
  using ClusterShape = cute::Shape<cute::Int<INFO.cluster_m>, cute::_1, cute::_1>;
  static constexpr bool COOPERATIVE = INFO.schedule == DenseSm90Schedule::coop;
  using KernelSchedule = std::conditional_t<
      COOPERATIVE, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
      std::conditional_t<INFO.schedule == DenseSm90Schedule::pp, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                         cutlass::gemm::KernelTmaWarpSpecialized>>;
  using EpilogueSchedule = std::conditional_t<COOPERATIVE, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                              cutlass::epilogue::TmaWarpSpecialized>;
  using TileScheduler = std::conditional_t<INFO.stream_k, cutlass::gemm::StreamKScheduler, void>;
  using EpilogueTile =
      std::conditional_t<INFO.epi_n == 0, cutlass::epilogue::collective::EpilogueTileAuto,
                         cute::Shape<cute::Int<(INFO.tile_m < 128 ? INFO.tile_m : 128)>, cute::Int<INFO.epi_n>>>;
  using Layout = cutlass::layout::RowMajor;

  using FusionOp = cutlass::epilogue::fusion::LinCombPerColBiasEltAct<
      GeluErf, Element /*D*/, ElementCompute, Element /*bias*/, Element /*C: unused*/,
      ElementCompute /*alpha, beta*/>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      EpilogueTile, ElementAccumulator, ElementCompute,
      void, Layout, ALIGN,     // C: none
      Element, Layout, ALIGN,  // D = Y [M, N] row-major
      EpilogueSchedule, FusionOp>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, Layout, ALIGN,  // A = X [M, K]: K-major
      Element, Layout, ALIGN,  // B = W [K, N]: N-major
      ElementAccumulator, TileShape, ClusterShape,
      // Pipeline stages: whatever shared memory the epilogue leaves.
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, TileScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class G>
Status run_gemm(const DenseParams& p, int device, int sm_count, cudaStream_t stream) {
  const char* config = INFO.name;
  using Gemm = typename G::Gemm;
  using Element = typename G::Element;
  using Kernel = typename G::Kernel;
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  auto fail = [&](const char* step, cutlass::Status s) {
    return Status::errorf("Dense: CUTLASS sm_90a GEMM <", dtype_name(p.dtype), ",", config, "> for X [", p.m, ", ",
                          p.k, "] x W [", p.k, ", ", p.n, "]", p.bias != nullptr ? " + bias" : "", ": ", step,
                          " failed: ", cutlass::cutlassGetStatusString(s));
  };

  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {m, n, k, 1};
  args.mainloop.ptr_A = static_cast<const Element*>(p.x);
  args.mainloop.dA = typename Kernel::StrideA{int64_t(k), cute::Int<1>{}, int64_t(m) * k};  // (M, K, L)
  args.mainloop.ptr_B = static_cast<const Element*>(p.w);
  args.mainloop.dB = typename Kernel::StrideB{cute::Int<1>{}, int64_t(n), int64_t(n) * k};  // (N, K, L)
  auto& epi = args.epilogue;
  epi.thread.alpha = 1.f;
  epi.thread.beta = 0.f;  // void C: must be 0 (can_implement checks)
  epi.thread.bias_ptr = static_cast<const Element*>(p.bias);
  epi.ptr_C = nullptr;
  epi.dC = typename Kernel::StrideC{int64_t(n), cute::Int<1>{}, int64_t(m) * n};
  epi.ptr_D = static_cast<Element*>(p.y);
  epi.dD = typename Kernel::StrideD{int64_t(n), cute::Int<1>{}, int64_t(m) * n};  // (M, N, L)
  args.hw_info.device_id = device;
  args.hw_info.sm_count = sm_count;  // 0 would make CUTLASS query it on every call

  cutlass::Status s = Gemm::can_implement(args);
  if (s != cutlass::Status::kSuccess) return fail("can_implement", s);
  const size_t workspace = Gemm::get_workspace_size(args);
  if (workspace > 0 && (p.workspace == nullptr || workspace > p.workspace_bytes)) {
    return Status::errorf("Dense: CUTLASS sm_90a GEMM <", dtype_name(p.dtype), ",", config, "> needs ", workspace,
                          " workspace bytes, the caller gave ", p.workspace == nullptr ? 0 : p.workspace_bytes);
  }
  // GemmUniversalAdapter::initialize, less its cudaFuncSetAttribute on every
  // call (the shared-memory opt-in is per kernel and device: once, through
  // allow_dynamic_smem): the workspace hook (stream-K: cudaMemsetAsync of its
  // flags on `stream`; nothing for the others), the params with their TMA
  // descriptors. Nothing allocated or synchronised, so CUDA-graph capture is
  // fine.
  void* ws = workspace > 0 ? p.workspace : nullptr;
  s = Kernel::initialize_workspace(args, ws, stream);
  if (s != cutlass::Status::kSuccess) return fail("initialize", s);
  static std::atomic<uint64_t> smem_ready{0};
  const cudaError_t err =
      allow_dynamic_smem(cutlass::device_kernel<Kernel>, int(Kernel::SharedStorageSize), smem_ready, device);
  if (err != cudaSuccess) {
    return Status::errorf("Dense: CUTLASS sm_90a GEMM <", dtype_name(p.dtype), ",", config, ">: opting into ",
                          int(Kernel::SharedStorageSize), " bytes of shared memory failed: ", cuda_error_string(err));
  }
  typename Kernel::Params params = Kernel::to_underlying_arguments(args, ws);
  s = Gemm::run(params, stream);  // the launch; reports a launch error as kErrorInternal
  if (s != cutlass::Status::kSuccess) return fail("run", s);
  return Status::ok();
}

}  // namespace

template <>
Status launch_dense_gelu_sm90<TILE>(const DenseParams& p, int device, int sm_count, cudaStream_t stream) {
  switch (p.dtype) {
    case DType::f16: return run_gemm<GeluGemm<cutlass::half_t>>(p, device, sm_count, stream);
    case DType::bf16: return run_gemm<GeluGemm<cutlass::bfloat16_t>>(p, device, sm_count, stream);
    default: break;
  }
  return Status::errorf("Dense: internal error: the sm_90a GEMM takes float16 or bfloat16, got ",
                        dtype_name(p.dtype));
}

}  // namespace trt_fastops::dense
