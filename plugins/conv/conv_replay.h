// CUDA-graph replay of trt_fastops' own convolution kernels. A fallback plan
// enqueues 1-4 launches per call (weight packing, channels-last copy of x,
// the GEMM, the split-K finalize), ~3 us of host time each; frameworks hand a
// layer the same buffers run after run (arenas, CUDA-graph pools), so the
// launches for one pointer set are captured into a graph once, the second
// time that set is seen, and later calls with it are one cudaGraphLaunch.
// (cuDNN plans have their own replay inside conv_cudnn.cc, around cuDNN's
// variant packs.)
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>

#include <cuda_runtime_api.h>

namespace trt_fastops::conv {

// The buffers one call uses: x, w, bias, y, workspace.
struct ReplayKey {
  const void* ptr[5] = {};
  bool operator==(const ReplayKey& o) const;
};

struct ReplayStats {
  uint64_t launches = 0;  // calls replayed from a graph
  uint64_t captures = 0;  // graphs captured (one per plan and pointer set)
  uint64_t failures = 0;  // captures / launches that failed (that pointer set then runs directly)
};
ReplayStats replay_stats();
void replay_reset_stats();

// Records record(cs) on stream cs (thread-local capture mode: other threads'
// CUDA calls cannot invalidate it) and instantiates the graph. Null on any
// failure (record false or throwing, an empty graph, capture or instantiation
// errors), with the CUDA errors it left cleared. Nothing runs; the caller
// serialises the use of cs. Shared with cuDNN's replay (conv_cudnn.cc).
cudaGraphExec_t capture_graph_exec(cudaStream_t cs, const std::function<bool(cudaStream_t)>& record);

// One plan's graphs: kSlots pointer sets, least recently used replaced.
// Thread-safe: run() holds the object's mutex for the whole call, so a graph
// is never destroyed while another thread launches it.
class LaunchReplay {
 public:
  static constexpr int kSlots = 8;
  static constexpr int kCaptureAfterUses = 2;  // one-off pointer sets never pay for a capture

  // Enqueues the plan's launches on the stream given; returns the first error.
  using Enqueue = std::function<cudaError_t(cudaStream_t)>;

  LaunchReplay() = default;
  LaunchReplay(const LaunchReplay&) = delete;
  LaunchReplay& operator=(const LaunchReplay&) = delete;
  ~LaunchReplay();

  // Runs `enqueue`'s work for the buffers `key` on `stream`, on the current
  // device: from the slot's graph when it has one, else directly (capturing
  // the graph, on a private stream, at the set's kCaptureAfterUses-th call and
  // launching it). While `stream` is being captured (a framework's CUDA graph)
  // always directly, leaving the slots alone. A failed capture or graph launch
  // clears its error and runs directly from then on for that set; the
  // returned error is the work's own.
  cudaError_t run(const ReplayKey& key, cudaStream_t stream, const Enqueue& enqueue);

 private:
  struct Slot {
    ReplayKey key;
    cudaGraphExec_t exec = nullptr;
    bool no_graph = false;
    int uses = 0;
    uint64_t last_use = 0;  // 0: empty
    void release();
  };
  Slot& slot_for(const ReplayKey& key);

  std::mutex mu_;
  Slot slots_[kSlots];
  uint64_t clock_ = 0;
};

}  // namespace trt_fastops::conv
