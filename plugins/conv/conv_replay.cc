// CUDA-graph replay of the fallback's launches (contract: conv_replay.h).
#include "plugins/conv/conv_replay.h"

#include <atomic>
#include <cstring>

namespace trt_fastops::conv {
namespace {

std::atomic<uint64_t> g_launches{0}, g_captures{0}, g_failures{0};

constexpr int kMaxDevices = 64;

// One private non-blocking capture stream per device, never destroyed (like
// cuDNN's handles); captures are rare (one per plan and pointer set), so one
// process-wide mutex serialises them and with them each stream's use.
std::mutex g_capture_mu;
cudaStream_t g_capture_streams[kMaxDevices] = {};

// Captures enqueue's work on the device's private stream and instantiates it
// (null on any failure). Nothing runs.
cudaGraphExec_t capture(const LaunchReplay::Enqueue& enqueue) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_capture_mu);
  cudaStream_t& cs = g_capture_streams[device];
  if (cs == nullptr && cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    cs = nullptr;
    return nullptr;
  }
  return capture_graph_exec(cs, [&](cudaStream_t s) { return enqueue(s) == cudaSuccess; });
}

}  // namespace

cudaGraphExec_t capture_graph_exec(cudaStream_t cs, const std::function<bool(cudaStream_t)>& record) {
  if (cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  bool recorded = false;
  try {  // nothing may leave this thread with a capture still open
    recorded = record(cs);
  } catch (...) {
    recorded = false;
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(cs, &graph);  // always ends the capture
  // A graph with no node would make the call a no-op: only one that recorded work.
  size_t nodes = 0;
  recorded = recorded && ended == cudaSuccess && graph != nullptr &&
             cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess && nodes > 0;
  cudaGraphExec_t exec = nullptr;
  if (recorded && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
  const bool destroyed = graph == nullptr || cudaGraphDestroy(graph) == cudaSuccess;
  // A failure's (non-sticky) error must not reach the caller's next check.
  if (exec == nullptr || !destroyed) cudaGetLastError();
  return exec;
}

bool ReplayKey::operator==(const ReplayKey& o) const { return std::memcmp(ptr, o.ptr, sizeof(ptr)) == 0; }

ReplayStats replay_stats() {
  ReplayStats s;
  s.launches = g_launches.load(std::memory_order_relaxed);
  s.captures = g_captures.load(std::memory_order_relaxed);
  s.failures = g_failures.load(std::memory_order_relaxed);
  return s;
}

void replay_reset_stats() {
  g_launches = 0;
  g_captures = 0;
  g_failures = 0;
}

void LaunchReplay::Slot::release() {
  // An executable still running is freed when it completes (CUDA's contract).
  if (exec != nullptr && cudaGraphExecDestroy(exec) != cudaSuccess) cudaGetLastError();
  *this = Slot{};
}

LaunchReplay::~LaunchReplay() {
  for (Slot& s : slots_) s.release();
}

LaunchReplay::Slot& LaunchReplay::slot_for(const ReplayKey& key) {
  Slot* victim = &slots_[0];
  for (Slot& s : slots_) {
    if (s.last_use != 0 && s.key == key) {
      if (s.uses < (1 << 30)) ++s.uses;
      s.last_use = ++clock_;
      return s;
    }
    if (s.last_use < victim->last_use) victim = &s;  // empty slots have 0
  }
  victim->release();
  victim->key = key;
  victim->uses = 1;
  victim->last_use = ++clock_;
  return *victim;
}

cudaError_t LaunchReplay::run(const ReplayKey& key, cudaStream_t stream, const Enqueue& enqueue) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();  // not sticky; the call just runs directly
    return enqueue(stream);
  }
  if (status != cudaStreamCaptureStatusNone) return enqueue(stream);  // becomes part of the caller's graph

  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slot_for(key);
  if (slot.no_graph || (slot.exec == nullptr && slot.uses < kCaptureAfterUses)) return enqueue(stream);
  if (slot.exec == nullptr) {
    slot.exec = capture(enqueue);
    if (slot.exec == nullptr) {
      slot.no_graph = true;
      g_failures.fetch_add(1, std::memory_order_relaxed);
      return enqueue(stream);
    }
    g_captures.fetch_add(1, std::memory_order_relaxed);
  }
  if (cudaGraphLaunch(slot.exec, stream) == cudaSuccess) {
    g_launches.fetch_add(1, std::memory_order_relaxed);
    return cudaSuccess;
  }
  cudaGetLastError();  // the launch failed without running: this call runs directly instead
  slot.release();
  slot.key = key;
  slot.no_graph = true;
  slot.uses = kCaptureAfterUses;
  slot.last_use = ++clock_;
  g_failures.fetch_add(1, std::memory_order_relaxed);
  return enqueue(stream);
}

}  // namespace trt_fastops::conv
