#include "plugins/norm/norm_cpu.h"

#include <cmath>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/host_elements.h"

namespace trt_fastops::norm {
namespace {

Status check_params(const NormParams& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    return Status::errorf("run_norm_cpu: dtype ", int(p.dtype), " is not float32, float16 or bfloat16");
  if (p.kind != NormKind::layer && p.kind != NormKind::rms)
    return Status::errorf("run_norm_cpu: kind ", int(p.kind), " is not layer or rms");
  if (p.cols <= 0) return Status::errorf("run_norm_cpu: cols is ", p.cols, ", expected > 0");
  if (p.rows < 0) return Status::errorf("run_norm_cpu: rows is ", p.rows, ", expected >= 0");
  if (p.rows == 0) return Status::ok();
  if (!p.x) return Status::error("run_norm_cpu: x is null");
  if (!p.gamma) return Status::error("run_norm_cpu: gamma is null");
  if (!p.y) return Status::error("run_norm_cpu: y is null");
  if (p.skip && (p.skip_rows <= 0 || p.rows % p.skip_rows != 0))
    return Status::errorf("run_norm_cpu: skip_rows is ", p.skip_rows, ", expected a divisor of rows (",
                          p.rows, ")");
  if (p.mean_out && p.kind != NormKind::layer)
    return Status::error("run_norm_cpu: mean_out is only defined for the layer kind");
  return Status::ok();
}

}  // namespace

Status run_norm_cpu_rows(const NormParams& p, int64_t row_begin, int64_t row_end) {
  TRT_FASTOPS_RETURN_IF_ERROR(check_params(p));
  if (row_begin < 0 || row_end > p.rows || row_begin > row_end)
    return Status::errorf("run_norm_cpu: row range [", row_begin, ", ", row_end, ") outside [0, ", p.rows, ")");
  const int64_t cols = p.cols;
  std::vector<float> s(static_cast<size_t>(row_end > row_begin ? cols : 0));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t base = r * cols;
    const int64_t skip_base = p.skip ? (r % p.skip_rows) * cols : 0;
    // Stage 1: s = x + skip + bias in float32 (as the kernels do), sum in float64.
    double total = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      float v = load_element(p.x, p.dtype, base + c);
      if (p.skip) v += load_element(p.skip, p.dtype, skip_base + c);
      if (p.bias) v += load_element(p.bias, p.dtype, c);
      s[c] = v;
      total += v;
    }
    const double mean = p.kind == NormKind::layer ? total / double(cols) : 0.0;
    // Stage 2: variance around the mean (two passes: exact for large offsets).
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = double(s[c]) - mean;
      sq += d * d;
    }
    const double rstd = 1.0 / std::sqrt(sq / double(cols) + double(p.epsilon));
    // Stage 3: outputs.
    for (int64_t c = 0; c < cols; ++c) {
      const double g = load_element(p.gamma, p.dtype, p.gamma_scalar ? 0 : c);
      double y = (double(s[c]) - mean) * rstd * g;
      if (p.beta) y += load_element(p.beta, p.dtype, p.beta_scalar ? 0 : c);
      store_element(p.y, p.dtype, base + c, float(y));
      if (p.sum_out) store_element(p.sum_out, p.dtype, base + c, s[c]);
    }
    if (p.mean_out) p.mean_out[r] = float(mean);
    if (p.rstd_out) p.rstd_out[r] = float(rstd);
  }
  return Status::ok();
}

Status run_norm_cpu(const NormParams& p) { return run_norm_cpu_rows(p, 0, p.rows); }

}  // namespace trt_fastops::norm
