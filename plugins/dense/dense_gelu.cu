// Host side of Dense's GELU pass (dense_gelu.h; device code dense_gelu.cuh).
#include "plugins/dense/dense_gelu.h"

#include <algorithm>

#include "plugins/common/dispatch.cuh"
#include "plugins/dense/dense_gelu.cuh"

namespace trt_fastops::dense {
namespace {

constexpr int BLOCK = 256;
constexpr int64_t BLOCKS_PER_SM = 8;     // enough resident warps to cover DRAM latency
constexpr int64_t BLOCKS_NO_SMS = 1024;  // when the SM count is unknown

}  // namespace

cudaError_t launch_dense_gelu(DType dtype, void* y, int64_t count, int sm_count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && y == nullptr)) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    const bool vec = is_aligned(y, 16);
    const int64_t work = vec ? count / Pack<T>::N : count;  // grid-stride items (the short tail rides along)
    const int64_t cap = sm_count > 0 ? BLOCKS_PER_SM * sm_count : BLOCKS_NO_SMS;
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((work + BLOCK - 1) / BLOCK, cap));
    dispatch_bool(vec, [&](auto VEC) {
      dense_gelu_kernel<T, VEC.value><<<static_cast<unsigned>(blocks), BLOCK, 0, stream>>>(static_cast<T*>(y), count);
    });
    return cudaGetLastError();
  });
}

}  // namespace trt_fastops::dense
