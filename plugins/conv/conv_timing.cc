// Planning's GPU timing harness (contract: conv_timing.h).
#include "plugins/conv/conv_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "plugins/common/cuda_status.h"
#include "plugins/conv/conv_fallback.h"

namespace trt_fastops::conv {

CallTimer::~CallTimer() {
  for (cudaEvent_t ev : events_)
    if (ev != nullptr && cudaEventDestroy(ev) != cudaSuccess) cudaGetLastError();  // nothing to report to
}

Status CallTimer::time(cudaStream_t stream, const std::function<bool()>& call, float* us) {
  *us = -1.f;
  if (!ready_) {
    for (cudaEvent_t& ev : events_)
      if (ev == nullptr) TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&ev), "cudaEventCreate (timing)"));
    // Earlier work (and any error it left) is not the timed call's.
    TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize (before timing)"));
    ready_ = true;
  }
  const auto t0 = std::chrono::steady_clock::now();
  bool ran = call();  // warm-up; also sizes the GPU wait
  const double enqueue_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  ran = ran && cudaStreamSynchronize(stream) == cudaSuccess;
  if (ran) {
    // Generous: the first call may be slower than the rest, and a wait longer
    // than needed costs nothing but planning time.
    const double wait_us = std::min(std::max(2.0 * (kRuns + 1) * (enqueue_us + 20.0), 200.0), 20000.0);
    // Without the wait the runs are still timed, only possibly host-bound.
    if (launch_gpu_wait(static_cast<uint64_t>(wait_us * 1000.0), stream) != cudaSuccess) cudaGetLastError();
    ran = cudaEventRecord(events_[0], stream) == cudaSuccess;
    for (int r = 0; ran && r < kRuns; ++r) ran = call() && cudaEventRecord(events_[r + 1], stream) == cudaSuccess;
    ran = ran && cudaEventSynchronize(events_[kRuns]) == cudaSuccess;
  }
  std::array<float, kRuns> runs{};
  for (int r = 0; ran && r < kRuns; ++r)
    ran = cudaEventElapsedTime(&runs[r], events_[r], events_[r + 1]) == cudaSuccess;
  if (!ran) {  // the call failed: it does not count (a sticky error fails the synchronisation)
    cudaGetLastError();
    return cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize (after a failed timed call)");
  }
  std::sort(runs.begin(), runs.end());
  *us = runs[kRuns / 2] * 1000.f;
  return Status::ok();
}

std::string format_us(double us) {
  const long long tenths = std::llround(us * 10.0);
  return str_cat(tenths / 10, ".", tenths % 10, " us");
}

}  // namespace trt_fastops::conv
