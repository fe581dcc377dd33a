#include "plugins/common/graph_cache.h"

#include <exception>
#include <utility>

#include "plugins/common/cuda_status.h"
#include "plugins/common/device_memory.h"

namespace trt_fastops {

size_t GraphKeyHash::operator()(const GraphKey& key) const {
  // FNV-1a over the device and the signature.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(static_cast<uint32_t>(key.device)));
  for (int64_t d : key.shapes) mix(static_cast<uint64_t>(d));
  return static_cast<size_t>(h);
}

void append_shape(std::vector<int64_t>* signature, const int64_t* dims, int rank) {
  signature->push_back(rank);
  for (int i = 0; i < rank; ++i) signature->push_back(dims[i]);
}

const char* graph_run_name(GraphRun run) {
  switch (run) {
    case GraphRun::captured: return "captured";
    case GraphRun::replayed: return "replayed";
    case GraphRun::updated: return "updated";
    case GraphRun::reinstantiated: return "reinstantiated";
  }
  return "unknown";
}

namespace {

// Owns a cudaGraph_t / cudaGraphExec_t.
struct GraphHandle {
  cudaGraph_t graph = nullptr;
  ~GraphHandle() {
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

struct ExecHandle {
  cudaGraphExec_t exec = nullptr;
  ExecHandle() = default;
  ExecHandle(const ExecHandle&) = delete;
  ExecHandle& operator=(const ExecHandle&) = delete;
  ~ExecHandle() { reset(); }
  void reset(cudaGraphExec_t next = nullptr) {
    if (exec != nullptr) cudaGraphExecDestroy(exec);  // an in-flight launch still completes
    exec = next;
  }
};

Status capture(const GraphEnqueueFn& enqueue, cudaStream_t stream, GraphHandle* out) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaStreamIsCapturing(stream, &capturing), "cudaStreamIsCapturing"));
  if (capturing != cudaStreamCaptureStatusNone)
    return Status::error("graph cache: the stream is already being captured (nested capture is not supported)");
  TRT_FASTOPS_RETURN_IF_ERROR(
      cuda_status(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  Status user;
  try {
    user = enqueue(stream);
  } catch (const std::exception& e) {
    user = Status::errorf("exception: ", e.what());
  } catch (...) {
    user = Status::error("unknown exception");
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  out->graph = graph;  // destroyed by the handle on every error path
  if (!user.is_ok()) {
    cudaGetLastError();  // the failed capture's error belongs to this report, not a later launch
    return Status::errorf("graph capture: the enqueue callback failed: ", user.message());
  }
  if (end != cudaSuccess) {
    cudaGetLastError();
    return Status::errorf("graph capture failed (the callback used an operation that cannot be captured, e.g. a "
                          "synchronous copy, cudaMalloc or a synchronisation): cudaStreamEndCapture: ",
                          cuda_error_string(end));
  }
  if (graph == nullptr) return Status::error("graph capture: cudaStreamEndCapture returned no graph");
  return Status::ok();
}

Status instantiate(cudaGraph_t graph, cudaGraphExec_t* exec) {
  *exec = nullptr;
  const cudaError_t err = cudaGraphInstantiateWithFlags(exec, graph, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    *exec = nullptr;
    return cuda_status(err, "cudaGraphInstantiateWithFlags");
  }
  return Status::ok();
}

// True when exec accepted graph's parameters in place.
bool try_update(cudaGraphExec_t exec, cudaGraph_t graph) {
#if CUDART_VERSION >= 12000
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t err = cudaGraphExecUpdate(exec, graph, &info);
  const bool ok = err == cudaSuccess && info.result == cudaGraphExecUpdateSuccess;
#else
  cudaGraphNode_t error_node = nullptr;
  cudaGraphExecUpdateResult result = cudaGraphExecUpdateError;
  const cudaError_t err = cudaGraphExecUpdate(exec, graph, &error_node, &result);
  const bool ok = err == cudaSuccess && result == cudaGraphExecUpdateSuccess;
#endif
  if (!ok) cudaGetLastError();  // a refusal is an answer, not an error to carry forward
  return ok;
}

}  // namespace

Status graph_uses_clusters(cudaGraph_t graph, bool* uses) {
  *uses = false;
  size_t count = 0;
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGraphGetNodes(graph, nullptr, &count), "cudaGraphGetNodes"));
  if (count == 0) return Status::ok();
  std::vector<cudaGraphNode_t> nodes(count);
  TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGraphGetNodes(graph, nodes.data(), &count), "cudaGraphGetNodes"));
  for (size_t i = 0; i < count && !*uses; ++i) {
    cudaGraphNodeType type;
    TRT_FASTOPS_RETURN_IF_ERROR(cuda_status(cudaGraphNodeGetType(nodes[i], &type), "cudaGraphNodeGetType"));
    if (type == cudaGraphNodeTypeKernel) {
      cudaLaunchAttributeValue value{};
      if (cudaGraphKernelNodeGetAttribute(nodes[i], cudaLaunchAttributeClusterDimension, &value) == cudaSuccess) {
        const uint64_t blocks = static_cast<uint64_t>(value.clusterDim.x) * value.clusterDim.y * value.clusterDim.z;
        *uses = blocks > 1;
      } else {
        cudaGetLastError();  // devices without clusters may refuse the query: no clusters there
      }
    } else if (type == cudaGraphNodeTypeGraph) {
      cudaGraph_t child = nullptr;
      TRT_FASTOPS_RETURN_IF_ERROR(
          cuda_status(cudaGraphChildGraphNodeGetGraph(nodes[i], &child), "cudaGraphChildGraphNodeGetGraph"));
      TRT_FASTOPS_RETURN_IF_ERROR(graph_uses_clusters(child, uses));
    }
  }
  return Status::ok();
}

struct GraphCache::Entry {
  ExecHandle exec;
  std::vector<uintptr_t> addresses;
  bool clusters = false;
};

GraphCache::GraphCache(size_t capacity) : entries_(capacity) {}

GraphCache::~GraphCache() = default;

Status GraphCache::run(const GraphKey& key, const std::vector<uintptr_t>& addresses, const GraphEnqueueFn& enqueue,
                       cudaStream_t stream, GraphRun* how) {
  if (stream == nullptr)
    return Status::error("graph cache: stream 0 (the legacy default stream) cannot be captured; pass a stream "
                         "created for the work (cudaStreamCreate, torch.cuda.Stream(), _C.CudaStream)");
  if (!enqueue) return Status::error("graph cache: no enqueue callback");
  std::lock_guard<std::mutex> lock(run_mu_);
  DeviceGuard guard;
  TRT_FASTOPS_RETURN_IF_ERROR(guard.set(key.device));

  EntryPtr entry = entries_.get(key).value_or(nullptr);
  GraphRun path = GraphRun::replayed;
  if (entry == nullptr || entry->addresses != addresses) {
    GraphHandle graph;
    TRT_FASTOPS_RETURN_IF_ERROR(capture(enqueue, stream, &graph));
    ++counters_.captures;
    bool clusters = false;
    TRT_FASTOPS_RETURN_IF_ERROR(graph_uses_clusters(graph.graph, &clusters));
    if (entry == nullptr) {
      auto fresh = std::make_shared<Entry>();
      TRT_FASTOPS_RETURN_IF_ERROR(instantiate(graph.graph, &fresh->exec.exec));
      fresh->addresses = addresses;
      fresh->clusters = clusters;
      entries_.put(key, fresh);
      entry = std::move(fresh);
      path = GraphRun::captured;
    } else if (clusters || entry->clusters) {
      cudaGraphExec_t next = nullptr;
      TRT_FASTOPS_RETURN_IF_ERROR(instantiate(graph.graph, &next));
      entry->exec.reset(next);
      ++counters_.cluster_reinstantiations;
      path = GraphRun::reinstantiated;
    } else if (try_update(entry->exec.exec, graph.graph)) {
      ++counters_.updates;
      path = GraphRun::updated;
    } else {
      cudaGraphExec_t next = nullptr;
      TRT_FASTOPS_RETURN_IF_ERROR(instantiate(graph.graph, &next));
      entry->exec.reset(next);
      ++counters_.update_refusals;
      path = GraphRun::reinstantiated;
    }
    entry->addresses = addresses;
    entry->clusters = clusters;
  } else {
    ++counters_.replays;
  }
  const cudaError_t err = cudaGraphLaunch(entry->exec.exec, stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::errorf("cudaGraphLaunch (", graph_run_name(path), " graph on device ", key.device,
                          ") failed: ", cuda_error_string(err));
  }
  ++counters_.launches;
  if (how != nullptr) *how = path;
  return Status::ok();
}

bool GraphCache::contains(const GraphKey& key) const { return entries_.peek(key).has_value(); }

bool GraphCache::would_replay(const GraphKey& key, const std::vector<uintptr_t>& addresses) const {
  std::lock_guard<std::mutex> lock(run_mu_);
  auto entry = entries_.peek(key);
  return entry.has_value() && (*entry)->addresses == addresses;
}

bool GraphCache::uses_clusters(const GraphKey& key) const {
  std::lock_guard<std::mutex> lock(run_mu_);
  auto entry = entries_.peek(key);
  return entry.has_value() && (*entry)->clusters;
}

size_t GraphCache::size() const { return entries_.size(); }
size_t GraphCache::capacity() const { return entries_.capacity(); }
void GraphCache::set_capacity(size_t capacity) { entries_.set_capacity(capacity); }

void GraphCache::clear() {
  std::lock_guard<std::mutex> lock(run_mu_);
  entries_.clear();
}

GraphCacheStats GraphCache::stats() const {
  std::lock_guard<std::mutex> lock(run_mu_);
  GraphCacheStats s = counters_;
  s.lru = entries_.stats();
  return s;
}

}  // namespace trt_fastops
