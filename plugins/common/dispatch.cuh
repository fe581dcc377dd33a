// Turning runtime choices into compile-time constants, for launchers only.
//
//   dispatch_dtype(p.dtype, [&](auto tag) { using T = typename decltype(tag)::type; ... });
//   dispatch_bool(cache, [&](auto CACHE) { kernel<T, CACHE.value><<<...>>>(...); });
//   dispatch_block_dim<128, 512>(block, [&](auto BLOCK) { kernel<T, BLOCK.value><<<...>>>(...); });
//
// Every helper returns what f returns. A value outside the supported set calls
// nothing and returns dispatch_invalid<R>() (cudaErrorInvalidValue for
// cudaError_t), so launchers validate first and never silently run the wrong kernel.
#pragma once

#include <type_traits>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "plugins/common/dtype.h"

namespace trt_fastops {

template <typename T>
struct TypeTag {
  using type = T;
};

// Result of a dispatch whose runtime value matched no case.
template <typename R>
inline R dispatch_invalid() {
  if constexpr (std::is_same_v<R, cudaError_t>) {
    return cudaErrorInvalidValue;
  } else if constexpr (std::is_same_v<R, const char*>) {
    return "invalid";
  } else if constexpr (!std::is_void_v<R>) {
    return R{};
  }
}

// f(TypeTag<float>), f(TypeTag<__half>) or f(TypeTag<__nv_bfloat16>).
template <typename F>
inline auto dispatch_dtype(DType t, F&& f) -> decltype(f(TypeTag<float>{})) {
  using R = decltype(f(TypeTag<float>{}));
  switch (t) {
    case DType::f32: return f(TypeTag<float>{});
    case DType::f16: return f(TypeTag<__half>{});
    case DType::bf16: return f(TypeTag<__nv_bfloat16>{});
  }
  return dispatch_invalid<R>();
}

// f(std::true_type) or f(std::false_type).
template <typename F>
inline auto dispatch_bool(bool b, F&& f) -> decltype(f(std::true_type{})) {
  if (b) return f(std::true_type{});
  return f(std::false_type{});
}

template <int FIRST, int... REST>
constexpr int first_of() {
  return FIRST;
}

// f(std::integral_constant<int, V>) for the V in VALUES equal to n.
template <int... VALUES, typename F>
inline auto dispatch_int(int n, F&& f)
    -> decltype(f(std::integral_constant<int, first_of<VALUES...>()>{})) {
  using R = decltype(f(std::integral_constant<int, first_of<VALUES...>()>{}));
  if constexpr (std::is_void_v<R>) {
    ((n == VALUES ? (f(std::integral_constant<int, VALUES>{}), true) : false) || ...);
  } else {
    R result = dispatch_invalid<R>();
    ((n == VALUES ? (result = f(std::integral_constant<int, VALUES>{}), true) : false) || ...);
    return result;
  }
}

// dispatch_int for thread-block sizes: the caller lists the sizes it instantiates,
// so the instantiation count stays visible at the call site.
template <int... BLOCKS, typename F>
inline auto dispatch_block_dim(int n, F&& f) {
  static_assert(((BLOCKS % 32 == 0 && BLOCKS >= 32 && BLOCKS <= 1024) && ...),
                "block sizes are whole warps, at most 1024 threads");
  return dispatch_int<BLOCKS...>(n, std::forward<F>(f));
}

}  // namespace trt_fastops
