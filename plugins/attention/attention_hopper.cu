// Host side of the sm_90a attention path (attention_hopper.cuh). Its kernels
// carry code only where the build targets sm_90a; elsewhere they are empty and
// hopper_path_available() is false, so the sm80 path runs.
#include <atomic>
#include <cstring>

#include "plugins/attention/attention_hopper.cuh"
#include "plugins/attention/attention_hopper.h"
#include "plugins/attention/attention_launch_common.cuh"
#include "plugins/common/dispatch.cuh"

namespace trt_fastops::attention {
namespace {

// Keys per step: 128 while S (64 x BN) and O (64 x D) accumulators fit the
// registers of one thread, 64 for d256.
template <int D>
using HopperTiles = HopperConfig<D, D <= 128 ? 128 : 64>;

bool built_for_sm90a() {
#ifdef TRT_FASTOPS_CUDA_ARCHS
  return std::strstr(TRT_FASTOPS_CUDA_ARCHS, "90a") != nullptr;
#else
  return false;
#endif
}

}  // namespace

bool hopper_path_available() {
  static std::atomic<int> cached[MAX_DEVICES];  // 0 unknown, 1 yes, 2 no
  if (!built_for_sm90a()) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= MAX_DEVICES) return false;
  int state = cached[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0, minor = 0;
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess;
    state = ok && major == 9 && minor == 0 ? 1 : 2;
    cached[device].store(state, std::memory_order_relaxed);
  }
  return state == 1;
}

bool hopper_path_supports(const AttentionParams& p) {
  return (p.dtype == DType::f16 || p.dtype == DType::bf16) && rows_aligned(p);
}

const char* hopper_kernel_name(const AttentionParams& p) {
  const bool masked = p.mask_kind != MaskKind::none;
  return dispatch_dtype(p.dtype, [&](auto tag) -> const char* {
    using T = typename decltype(tag)::type;
    return dispatch_int<64, 128, 256>(head_dim_bucket(p), [&](auto D) {
      return kernel_name<T, HopperTiles<D.value>>(true, masked);
    });
  });
}

cudaError_t launch_attention_hopper(const AttentionParams& p, cudaStream_t stream) {
  return dispatch_dtype(p.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      return cudaErrorInvalidValue;
    } else {
      return dispatch_int<64, 128, 256>(head_dim_bucket(p), [&](auto D) {
        using CFG = HopperTiles<D.value>;
        return dispatch_bool(p.mask_kind != MaskKind::none, [&](auto MASKED) {
          return launch_kernel<CFG, flash_fwd_hopper_kernel<T, CFG, MASKED.value>>(p, stream);
        });
      });
    }
  });
}

}  // namespace trt_fastops::attention
