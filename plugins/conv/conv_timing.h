// GPU timing of one convolution call, for planning: cuDNN's autotuning
// (conv_cudnn.cc, candidate against candidate) and the launcher's cuDNN-vs-
// fallback choice (conv_launch.cu) use this one harness, so every time they
// compare was measured the same way.
#pragma once

#include <array>
#include <functional>
#include <string>

#include <cuda_runtime_api.h>

#include "plugins/common/status.h"

namespace trt_fastops::conv {

// Times calls on one stream: one warm-up, then kRuns runs queued behind a GPU
// wait (launch_gpu_wait) long enough for the host to enqueue them all, each
// between two events, so host enqueue cost is never GPU time; the median run
// is the result (one noisy run cannot decide). Outside CUDA-graph capture only
// (synchronises the stream). One timer per planning thread; its events live as
// long as it does.
class CallTimer {
 public:
  static constexpr int kRuns = 7;

  CallTimer() = default;
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;
  ~CallTimer();

  // `call` enqueues one call on `stream` and returns false when that failed.
  // *us: the median GPU microseconds, or -1 when the call failed (its CUDA
  // error is cleared: it just does not count). Errors: creating the events or
  // synchronising the stream (before the first timing, or after a failed call:
  // a sticky error), after which nothing more can be timed.
  Status time(cudaStream_t stream, const std::function<bool()>& call, float* us);

 private:
  std::array<cudaEvent_t, kRuns + 1> events_{};
  bool ready_ = false;
};

// "206.2 us" (tenths), as plan descriptions print times.
std::string format_us(double us);

}  // namespace trt_fastops::conv
