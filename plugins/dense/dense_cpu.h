// CPU reference for Dense: the same DenseParams as launch_dense, with host
// pointers. Accumulates in float64 (bias added last, as cuBLASLt's epilogue
// does), applies the activation in float64 (GELU through std::erf), then
// rounds once to float32 and from there to Y's dtype. The ORT CPU
// kernel and the tests use it. Framework-free.
#pragma once

#include <cstdint>

#include "plugins/common/status.h"
#include "plugins/dense/dense.h"

namespace trt_fastops::dense {

// Computes rows [0, p.m) of Y. Checks the params first (validate_dense_params)
// and returns its error instead of touching memory. The workspace is unused.
Status run_dense_cpu(const DenseParams& p);

// Same, for rows [row_begin, row_end) only (for callers that split the work
// across threads). The params are checked as a whole.
Status run_dense_cpu_rows(const DenseParams& p, int64_t row_begin, int64_t row_end);

}  // namespace trt_fastops::dense
