#include "plugins/attention/attention_cpu.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/host_elements.h"

namespace trt_fastops::attention {
namespace {

bool valid_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

Status check_params(const AttentionParams& p) {
  if (!valid_dtype(p.dtype))
    return Status::errorf("cpu_attention: dtype ", int(p.dtype), " is not float32, float16 or bfloat16");
  if (p.batch < 0 || p.q_heads < 0 || p.kv_heads < 0 || p.q_len < 0 || p.kv_len < 0)
    return Status::errorf("cpu_attention: negative size (batch ", p.batch, ", heads ", p.q_heads, "/", p.kv_heads,
                          ", q_len ", p.q_len, ", kv_len ", p.kv_len, ")");
  if (p.head_dim < 1 || p.v_head_dim < 1)
    return Status::errorf("cpu_attention: head dims ", p.head_dim, "/", p.v_head_dim, ", expected >= 1");
  if (p.kv_heads == 0 ? p.q_heads != 0 : p.q_heads % p.kv_heads != 0)
    return Status::errorf("cpu_attention: q_heads ", p.q_heads, " is not a multiple of kv_heads ", p.kv_heads);
  if (p.mask_kind != MaskKind::none && p.mask_kind != MaskKind::boolean && p.mask_kind != MaskKind::additive)
    return Status::errorf("cpu_attention: mask_kind ", int(p.mask_kind), " is not none, boolean or additive");
  if (p.mask_kind == MaskKind::additive && !valid_dtype(p.mask_dtype))
    return Status::errorf("cpu_attention: additive mask dtype ", int(p.mask_dtype), " is not supported");
  if (p.mask_kind != MaskKind::none && p.mask_kv_len < 0)
    return Status::errorf("cpu_attention: mask_kv_len is ", p.mask_kv_len, ", expected >= 0");
  const bool any_q = p.batch > 0 && p.q_heads > 0 && p.q_len > 0;
  if (!any_q) return Status::ok();
  if (p.q == nullptr) return Status::error("cpu_attention: q is null");
  if (p.out == nullptr) return Status::error("cpu_attention: out is null");
  if (p.kv_len > 0 && (p.k == nullptr || p.v == nullptr)) return Status::error("cpu_attention: k or v is null");
  if (p.mask_kind != MaskKind::none && p.mask_kv_len > 0 && p.kv_len > 0 && p.mask == nullptr)
    return Status::error("cpu_attention: mask is null");
  return Status::ok();
}

}  // namespace

int64_t cpu_attention_row_count(const AttentionParams& p) { return p.batch * p.q_heads * p.q_len; }

Status cpu_attention_rows(const AttentionParams& p, int64_t row_begin, int64_t row_end) {
  TRT_FASTOPS_RETURN_IF_ERROR(check_params(p));
  const int64_t rows = cpu_attention_row_count(p);
  if (row_begin < 0 || row_end > rows || row_begin > row_end)
    return Status::errorf("cpu_attention: row range [", row_begin, ", ", row_end, ") outside [0, ", rows, ")");
  if (row_begin == row_end) return Status::ok();
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const int64_t group = p.q_heads / p.kv_heads;
  std::vector<double> q(size_t(p.head_dim)), s(size_t(p.kv_len)), acc(size_t(p.v_head_dim));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t i = r % p.q_len;
    const int64_t h = (r / p.q_len) % p.q_heads;
    const int64_t b = r / (p.q_len * p.q_heads);
    const int64_t kvh = h / group;
    const int64_t q_base = b * p.q_view.stride_b + h * p.q_view.stride_h + i * p.q_view.stride_s;
    for (int64_t d = 0; d < p.head_dim; ++d) q[size_t(d)] = load_element(p.q, p.dtype, q_base + d);
    const int64_t mask_base = b * p.mask_stride_b + h * p.mask_stride_h + i * p.mask_stride_q;
    double max_s = neg_inf;
    for (int64_t j = 0; j < p.kv_len; ++j) {
      const bool hidden = (p.causal && j > i + p.causal_offset) ||
                          (p.mask_kind != MaskKind::none && j >= p.mask_kv_len) ||
                          (p.mask_kind == MaskKind::boolean &&
                           static_cast<const uint8_t*>(p.mask)[mask_base + j * p.mask_stride_k] == 0);
      if (hidden) {
        s[size_t(j)] = neg_inf;
        continue;
      }
      const int64_t k_base = b * p.k_view.stride_b + kvh * p.k_view.stride_h + j * p.k_view.stride_s;
      double dot = 0.0;
      for (int64_t d = 0; d < p.head_dim; ++d) dot += q[size_t(d)] * double(load_element(p.k, p.dtype, k_base + d));
      double v = double(p.scale) * dot;
      if (p.softcap > 0.f) v = double(p.softcap) * std::tanh(v / double(p.softcap));
      if (p.mask_kind == MaskKind::additive) v += double(load_element(p.mask, p.mask_dtype, mask_base + j * p.mask_stride_k));
      s[size_t(j)] = v;
      if (v > max_s) max_s = v;
    }
    const int64_t out_base = b * p.out_view.stride_b + h * p.out_view.stride_h + i * p.out_view.stride_s;
    if (max_s == neg_inf) {  // fully masked (or no keys): zeros, never NaN
      for (int64_t d = 0; d < p.v_head_dim; ++d) store_element(p.out, p.dtype, out_base + d, 0.f);
      if (p.lse) p.lse[r] = -std::numeric_limits<float>::infinity();
      continue;
    }
    double sum = 0.0;
    for (double& a : acc) a = 0.0;
    for (int64_t j = 0; j < p.kv_len; ++j) {
      if (s[size_t(j)] == neg_inf) continue;
      const double e = std::exp(s[size_t(j)] - max_s);
      sum += e;
      const int64_t v_base = b * p.v_view.stride_b + kvh * p.v_view.stride_h + j * p.v_view.stride_s;
      for (int64_t d = 0; d < p.v_head_dim; ++d) acc[size_t(d)] += e * double(load_element(p.v, p.dtype, v_base + d));
    }
    for (int64_t d = 0; d < p.v_head_dim; ++d) store_element(p.out, p.dtype, out_base + d, float(acc[size_t(d)] / sum));
    if (p.lse) p.lse[r] = float(max_s + std::log(sum));
  }
  return Status::ok();
}

Status cpu_attention(const AttentionParams& p) {
  TRT_FASTOPS_RETURN_IF_ERROR(check_params(p));
  return cpu_attention_rows(p, 0, cpu_attention_row_count(p));
}

Status cpu_attention_copy(const AttentionCopy& c) {
  if (c.batch < 0 || c.heads < 0 || c.seq < 0 || c.dim < 0)
    return Status::errorf("cpu_attention_copy: negative size (", c.batch, ", ", c.heads, ", ", c.seq, ", ", c.dim, ")");
  if (c.batch == 0 || c.heads == 0 || c.seq == 0 || c.dim == 0) return Status::ok();
  if (c.src == nullptr || c.dst == nullptr) return Status::error("cpu_attention_copy: src or dst is null");
  if (!valid_dtype(c.dtype)) return Status::errorf("cpu_attention_copy: dtype ", int(c.dtype), " is not supported");
  const int64_t es = dtype_size(c.dtype);
  const auto* src = static_cast<const char*>(c.src);
  auto* dst = static_cast<char*>(c.dst);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t s = 0; s < c.seq; ++s) {
        const int64_t from = b * c.src_view.stride_b + h * c.src_view.stride_h + s * c.src_view.stride_s;
        const int64_t to = b * c.dst_view.stride_b + h * c.dst_view.stride_h + s * c.dst_view.stride_s;
        std::memcpy(dst + to * es, src + from * es, size_t(c.dim * es));
      }
  return Status::ok();
}

}  // namespace trt_fastops::attention
