// CPU reference for the norm ops: the same NormParams as launch_norm, with
// host pointers. Straightforward and exact (float64 statistics); the ORT CPU
// kernels and the tests use it. Framework-free.
#pragma once

#include "plugins/common/status.h"
#include "plugins/norm/norm.h"

namespace trt_fastops::norm {

// Computes rows [0, p.rows) as launch_norm would. Checks the params (cols > 0,
// pointers for every tensor that holds data, skip_rows dividing rows) and
// returns an error naming the bad field instead of touching memory.
Status run_norm_cpu(const NormParams& p);

// Same, for rows [row_begin, row_end) only (for callers that split the work
// across threads). The params are checked as a whole.
Status run_norm_cpu_rows(const NormParams& p, int64_t row_begin, int64_t row_end);

}  // namespace trt_fastops::norm
