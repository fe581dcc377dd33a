#include "plugins/norm/embed_cpu.h"

#include <cmath>
#include <vector>

#include "plugins/common/dtype.h"
#include "plugins/common/host_elements.h"

namespace trt_fastops::norm {
namespace {

Status check_params(const EmbedParams& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f16 && p.dtype != DType::bf16)
    return Status::errorf("run_embed_cpu: dtype ", int(p.dtype), " is not float32, float16 or bfloat16");
  if (p.batch < 0 || p.seq < 0 || p.hidden <= 0)
    return Status::errorf("run_embed_cpu: batch ", p.batch, ", seq ", p.seq, ", hidden ", p.hidden,
                          ": expected batch, seq >= 0 and hidden > 0");
  if (p.batch == 0 || p.seq == 0) return Status::ok();
  if (!p.ids || !p.word || !p.position || !p.gamma || !p.y)
    return Status::error("run_embed_cpu: ids, word, position, gamma and y must not be null");
  if (p.word_rows <= 0 || p.position_rows <= 0)
    return Status::error("run_embed_cpu: word_rows and position_rows must be > 0");
  if (p.segment_ids && (!p.segment || p.segment_rows <= 0))
    return Status::error("run_embed_cpu: segment_ids needs a segment table with rows");
  if (p.position_ids && p.position_id_rows != 1 && p.position_id_rows != p.batch)
    return Status::errorf("run_embed_cpu: position_id_rows is ", p.position_id_rows, ", expected 1 or ", p.batch);
  if (!p.position_ids && p.seq > p.position_rows)
    return Status::errorf("run_embed_cpu: seq ", p.seq, " exceeds position_rows ", p.position_rows,
                          " (positions 0..seq-1 without position_ids)");
  return Status::ok();
}

int64_t index_at(const void* base, IndexType t, int64_t i) {
  return t == IndexType::i64 ? static_cast<const int64_t*>(base)[i] : static_cast<const int32_t*>(base)[i];
}

// The table row an index names (ONNX Gather: negative counts from the end), or an error.
Status table_row(int64_t index, int64_t rows, const char* input, const EmbedParams& p, int64_t token, int64_t* row) {
  const int64_t r = index < 0 ? index + rows : index;
  if (r < 0 || r >= rows) {
    return Status::errorf("EmbedLayerNorm: ", input, "[", token / p.seq, ", ", token % p.seq, "] = ", index,
                          " is out of range [", -rows, ", ", rows, ")");
  }
  *row = r;
  return Status::ok();
}

}  // namespace

Status run_embed_cpu_tokens(const EmbedParams& p, int64_t begin, int64_t end) {
  TRT_FASTOPS_RETURN_IF_ERROR(check_params(p));
  const int64_t tokens = p.batch * p.seq;
  if (begin < 0 || end > tokens || begin > end)
    return Status::errorf("run_embed_cpu: token range [", begin, ", ", end, ") outside [0, ", tokens, ")");
  const int64_t h = p.hidden;
  std::vector<float> e(static_cast<size_t>(end > begin ? h : 0));
  for (int64_t t = begin; t < end; ++t) {
    const int64_t s = t % p.seq;
    int64_t w = 0, pos = 0, g = 0;
    TRT_FASTOPS_RETURN_IF_ERROR(table_row(index_at(p.ids, p.ids_type, t), p.word_rows, "input_ids", p, t, &w));
    pos = s;  // without position_ids: in range (check_params)
    if (p.position_ids) {
      const int64_t index = index_at(p.position_ids, p.position_type, p.position_id_rows == 1 ? s : t);
      TRT_FASTOPS_RETURN_IF_ERROR(table_row(index, p.position_rows, "position_ids", p, t, &pos));
    }
    if (p.segment_ids) {
      TRT_FASTOPS_RETURN_IF_ERROR(
          table_row(index_at(p.segment_ids, p.segment_type, t), p.segment_rows, "segment_ids", p, t, &g));
    }
    double sum = 0.0;
    for (int64_t c = 0; c < h; ++c) {
      float v = load_element(p.word, p.dtype, w * h + c) + load_element(p.position, p.dtype, pos * h + c);
      if (p.segment_ids) v += load_element(p.segment, p.dtype, g * h + c);
      e[size_t(c)] = v;
      sum += v;
    }
    const double mean = sum / double(h);
    double m2 = 0.0;
    for (int64_t c = 0; c < h; ++c) {
      const double d = double(e[size_t(c)]) - mean;
      m2 += d * d;
    }
    const double rstd = 1.0 / std::sqrt(m2 / double(h) + double(p.epsilon));
    for (int64_t c = 0; c < h; ++c) {
      const double beta = p.beta ? double(load_element(p.beta, p.dtype, c)) : 0.0;
      const double y = (double(e[size_t(c)]) - mean) * rstd * double(load_element(p.gamma, p.dtype, c)) + beta;
      store_element(p.y, p.dtype, t * h + c, float(y));
    }
  }
  return Status::ok();
}

Status run_embed_cpu(const EmbedParams& p) { return run_embed_cpu_tokens(p, 0, p.batch * p.seq); }

}  // namespace trt_fastops::norm
