// CUDA-graph cache: capture the work a callback enqueues on a stream once per
// (device, shape signature), replay it, and patch the executable graph in place
// when only buffer addresses change. Framework-free and exported by the kernel
// library (the only one linking cudart), so adapters -- the pybind11 module, a
// TensorRT runner -- drive it without calling the CUDA runtime themselves.
//
//   GraphCache cache(8);
//   GraphKey key{device, {}};
//   append_shape(&key.shapes, x_dims, x_rank);               // one call per tensor
//   GraphRun how;
//   Status st = cache.run(key, {x_ptr, y_ptr},
//                         [&](cudaStream_t s) { return cuda_status(launch(..., s), "launch"); },
//                         stream, &how);
//
// run() on a key:
//   not cached                     -> capture, instantiate, insert (captured)
//   cached, same addresses         -> launch the executable graph (replayed)
//   cached, other addresses        -> capture again and cudaGraphExecUpdate the executable in place
//                                     (updated); when the update is refused (topology changed) or
//                                     the graph launches thread-block clusters, instantiate anew
//                                     (reinstantiated): updating cluster kernels in place is not
//                                     reliable, so such graphs are never updated.
// The addresses are whatever identifies the buffers the callback uses (the
// caller decides); a replay trusts that equal addresses mean the captured
// kernels still read and write the right memory.
//
// Threads: run() calls are serialised per cache (one mutex held for the whole
// call), so one cache serves one execution context. Capture uses
// cudaStreamCaptureModeThreadLocal: other threads' CUDA calls don't invalidate it,
// but the callback itself must not allocate, synchronise or copy synchronously.
// Entries are bounded by an LRU; evicting one destroys its executable graph (an
// in-flight launch still completes).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "plugins/common/lru_cache.h"
#include "plugins/common/status.h"

namespace trt_fastops {

// What a graph is cached under: the device and the shapes of the tensors the
// work sees. Plain data, compared member-wise.
struct GraphKey {
  int device = 0;
  // For each tensor: its rank, then its dims (so [2, 3] + [4] != [2] + [3, 4]).
  std::vector<int64_t> shapes;

  bool operator==(const GraphKey& other) const { return device == other.device && shapes == other.shapes; }
};

struct GraphKeyHash {
  size_t operator()(const GraphKey& key) const;
};

// Appends one tensor's rank and dims to a key's signature.
void append_shape(std::vector<int64_t>* signature, const int64_t* dims, int rank);

enum class GraphRun { captured, replayed, updated, reinstantiated };

// "captured", "replayed", "updated", "reinstantiated".
const char* graph_run_name(GraphRun run);

struct GraphCacheStats {
  LruCacheStats lru;  // hits / misses / insertions / evictions of the entries
  uint64_t captures = 0;  // stream captures (new entries and address changes)
  uint64_t replays = 0;  // launches with the captured addresses
  uint64_t updates = 0;  // cudaGraphExecUpdate accepted
  uint64_t update_refusals = 0;  // cudaGraphExecUpdate refused -> instantiated anew
  uint64_t cluster_reinstantiations = 0;  // graph launches clusters -> instantiated anew, no update tried
  uint64_t launches = 0;  // cudaGraphLaunch calls
};

// Enqueues the work on the stream it is given (which is being captured).
using GraphEnqueueFn = std::function<Status(cudaStream_t)>;

class GraphCache {
 public:
  // capacity 0 is taken as 1.
  explicit GraphCache(size_t capacity);
  ~GraphCache();

  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs the work for `key` on `stream` through the cached executable graph
  // (see the table above). `stream` must not be the legacy default stream (0),
  // which cannot be captured. On error nothing was launched and the entry (if
  // any) keeps its previous executable graph. `how` (optional) says which path ran.
  Status run(const GraphKey& key, const std::vector<uintptr_t>& addresses, const GraphEnqueueFn& enqueue,
             cudaStream_t stream, GraphRun* how = nullptr);

  bool contains(const GraphKey& key) const;
  // True when run(key, addresses, ...) would replay without capturing (cached with these addresses).
  bool would_replay(const GraphKey& key, const std::vector<uintptr_t>& addresses) const;
  // True when the entry for key was captured from a graph with cluster launches.
  bool uses_clusters(const GraphKey& key) const;
  size_t size() const;
  size_t capacity() const;
  void set_capacity(size_t capacity);
  void clear();
  GraphCacheStats stats() const;

 private:
  struct Entry;
  using EntryPtr = std::shared_ptr<Entry>;

  mutable std::mutex run_mu_;  // serialises run(): capture, update and launch of one entry
  LruCache<GraphKey, EntryPtr, GraphKeyHash> entries_;
  GraphCacheStats counters_;  // under run_mu_ (lru stats come from entries_)
};

// Sets *uses to whether a kernel node of `graph` (or of a child graph) launches
// thread-block clusters (cluster dimension attribute with more than one block).
Status graph_uses_clusters(cudaGraph_t graph, bool* uses);

// Test kernel for the cache (float32): y[i] = a * x[i] + b for i < n, launched
// with `cluster_x` blocks per cluster (1 = no cluster attribute; clusters need
// compute capability 9.0). Returns the launch status; never synchronises.
cudaError_t launch_affine_probe(const float* x, float* y, int64_t n, float a, float b, int cluster_x,
                                cudaStream_t stream);

// Test kernel for programmatic dependent launch: copies `bytes` (a multiple of
// 4) from src to dst, but first lets the next grid in the stream launch
// (griddepcontrol.launch_dependents, compute capability 9.0 and up) and waits
// `delay_us` microseconds, so a next grid launched with programmatic stream
// serialization that read dst without waiting for this one would see the old
// bytes. Returns the launch status; never synchronises.
cudaError_t launch_late_copy_probe(const void* src, void* dst, int64_t bytes, int64_t delay_us, cudaStream_t stream);

}  // namespace trt_fastops
