#include "plugins/dense/dense_cpu.h"

#include <cmath>
#include <vector>

#include "plugins/common/host_elements.h"

namespace trt_fastops::dense {
namespace {

// One element as double; the dtype is a template constant so the inner loop
// has no switch.
template <DType T>
inline double load(const void* base, int64_t i) {
  if constexpr (T == DType::f32) {
    return static_cast<const float*>(base)[i];
  } else if constexpr (T == DType::f16) {
    return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  } else {
    return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
  }
}

// The exact GELU in float64: 0.5 v (1 + erf(v / sqrt 2)).
inline double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)); }

// Row-major walk: for each row, acc[:] += x[r, j] * w[j, :] over j, so W is
// read along its rows (contiguous) rather than down its columns.
template <DType T>
void rows_impl(const DenseParams& p, int64_t begin, int64_t end) {
  const bool act_gelu = p.activation == DenseActivation::gelu;
  const int64_t n = p.n, k = p.k;
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t c = 0; c < n; ++c) acc[size_t(c)] = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double xv = load<T>(p.x, r * k + j);
      const int64_t w_row = j * n;
      for (int64_t c = 0; c < n; ++c) acc[size_t(c)] += xv * load<T>(p.w, w_row + c);
    }
    for (int64_t c = 0; c < n; ++c) {
      double v = acc[size_t(c)];
      if (p.bias != nullptr) v += load<T>(p.bias, c);
      if (act_gelu) v = gelu(v);
      store_element(p.y, T, r * n + c, static_cast<float>(v));
    }
  }
}

}  // namespace

Status run_dense_cpu(const DenseParams& p) { return run_dense_cpu_rows(p, 0, p.m); }

Status run_dense_cpu_rows(const DenseParams& p, int64_t row_begin, int64_t row_end) {
  TRT_FASTOPS_RETURN_IF_ERROR(validate_dense_params(p));
  if (row_begin < 0 || row_end > p.m || row_begin > row_end) {
    return Status::errorf("Dense: internal error: rows [", row_begin, ", ", row_end, ") outside [0, ", p.m, ")");
  }
  if (p.n == 0 || row_begin == row_end) return Status::ok();
  switch (p.dtype) {
    case DType::f32: rows_impl<DType::f32>(p, row_begin, row_end); break;
    case DType::f16: rows_impl<DType::f16>(p, row_begin, row_end); break;
    case DType::bf16: rows_impl<DType::bf16>(p, row_begin, row_end); break;
  }
  return Status::ok();
}

}  // namespace trt_fastops::dense
