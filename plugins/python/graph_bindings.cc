// pybind11 bindings for the CUDA-graph cache (plugins/common/graph_cache.h) and
// the stream / buffer / copy helpers runners need without a framework
// (plugins/common/device_memory.h). Raw pointers are Python ints; nothing here
// calls cudart itself (the kernel library does).
//
//   cache = _C.GraphCache(8)
//   how = cache.run(device, [x.shape, y.shape], [x_ptr, y_ptr],
//                   lambda stream: _C.norm_forward(..., stream=stream), stream.handle)
//   # how: "captured" | "replayed" | "updated" | "reinstantiated"
//   buf = _C.DeviceBuffer(device, nbytes); s = _C.CudaStream(device)
//   cap = _C.dlpack_capsule(owner, ptr, shape, code, bits, device_type, device_id)
#include <Python.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "plugins/common/cuda_status.h"
#include "plugins/common/device_memory.h"
#include "plugins/common/graph_cache.h"

namespace py = pybind11;

namespace trt_fastops::python {
namespace {

void throw_if_error(const Status& st) {
  if (!st.is_ok()) throw std::runtime_error(st.message());
}

GraphKey make_key(int device, const std::vector<std::vector<int64_t>>& shapes) {
  GraphKey key;
  key.device = device;
  for (const auto& s : shapes) append_shape(&key.shapes, s.data(), static_cast<int>(s.size()));
  return key;
}

std::string cache_run(GraphCache& cache, int device, const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<uintptr_t>& addresses, const py::function& enqueue, uintptr_t stream) {
  const GraphKey key = make_key(device, shapes);
  // A Python exception raised by the callback travels back as is (type and traceback kept).
  std::optional<py::error_already_set> raised;
  GraphEnqueueFn fn = [&enqueue, &raised](cudaStream_t s) -> Status {
    py::gil_scoped_acquire gil;
    try {
      enqueue(reinterpret_cast<uintptr_t>(s));
    } catch (py::error_already_set& e) {
      const std::string what = e.what();
      raised.emplace(std::move(e));
      return Status::errorf("Python exception: ", what);
    }
    return Status::ok();
  };
  GraphRun how = GraphRun::replayed;
  Status st;
  {
    py::gil_scoped_release release;
    st = cache.run(key, addresses, fn, reinterpret_cast<cudaStream_t>(stream), &how);
  }
  if (raised) throw std::move(*raised);
  throw_if_error(st);
  return graph_run_name(how);
}

py::dict cache_stats(const GraphCache& cache) {
  const GraphCacheStats s = cache.stats();
  py::dict d;
  d["size"] = s.lru.size;
  d["capacity"] = s.lru.capacity;
  d["hits"] = s.lru.hits;
  d["misses"] = s.lru.misses;
  d["evictions"] = s.lru.evictions;
  d["captures"] = s.captures;
  d["replays"] = s.replays;
  d["updates"] = s.updates;
  d["update_refusals"] = s.update_refusals;
  d["cluster_reinstantiations"] = s.cluster_reinstantiations;
  d["launches"] = s.launches;
  return d;
}

// Device memory owned by a Python object (freed when it is collected).
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t nbytes) : device_(device), nbytes_(nbytes) {
    void* p = nullptr;
    throw_if_error(device_malloc(device, nbytes, &p));
    ptr_ = p;
  }
  ~DeviceBuffer() { (void)device_free(device_, ptr_); }  // at interpreter exit cudart may be gone: ignore
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uintptr_t ptr() const { return reinterpret_cast<uintptr_t>(ptr_); }
  size_t nbytes() const { return nbytes_; }
  int device() const { return device_; }

 private:
  int device_;
  size_t nbytes_;
  void* ptr_ = nullptr;
};

class CudaStream {
 public:
  explicit CudaStream(int device) : device_(device) {
    cudaStream_t s = nullptr;
    throw_if_error(stream_create(device, &s));
    stream_ = s;
  }
  ~CudaStream() { (void)stream_destroy(device_, stream_); }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  uintptr_t handle() const { return reinterpret_cast<uintptr_t>(stream_); }
  int device() const { return device_; }
  void synchronize() const {
    Status st;
    {
      py::gil_scoped_release release;
      st = stream_synchronize(device_, stream_);
    }
    throw_if_error(st);
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

// ---------------------------------------------------------------------------
// DLPack export (the legacy "dltensor" capsule every consumer accepts). The
// structs follow the DLPack ABI; the capsule keeps `owner` alive until the
// consumer calls the deleter.
struct DLDeviceAbi {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataTypeAbi {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensorAbi {
  void* data;
  DLDeviceAbi device;
  int32_t ndim;
  DLDataTypeAbi dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensorAbi {
  DLTensorAbi dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorAbi*);
};

struct DlpackContext {
  std::vector<int64_t> shape;
  PyObject* owner = nullptr;
};

void dlpack_deleter(DLManagedTensorAbi* managed) {
  if (managed == nullptr) return;
  auto* ctx = static_cast<DlpackContext*>(managed->manager_ctx);
  if (ctx != nullptr) {
    if (ctx->owner != nullptr && Py_IsInitialized()) {
      // Consumers (torch) may call this without holding the GIL.
      PyGILState_STATE state = PyGILState_Ensure();
      Py_DECREF(ctx->owner);
      PyGILState_Release(state);
    }
    delete ctx;
  }
  delete managed;
}

void dlpack_capsule_destructor(PyObject* capsule) {
  // Renamed to "used_dltensor" once a consumer took ownership; otherwise we still own it.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensorAbi*>(PyCapsule_GetPointer(capsule, "dltensor"));
    dlpack_deleter(managed);
  }
}

py::object dlpack_capsule(py::object owner, uintptr_t ptr, const std::vector<int64_t>& shape, int code, int bits,
                          int device_type, int device_id) {
  if (code < 0 || code > 255 || bits <= 0 || bits > 255)
    throw py::value_error("dlpack_capsule: dtype code must be in [0, 255] and bits in [1, 255]");
  for (int64_t d : shape)
    if (d < 0) throw py::value_error("dlpack_capsule: negative dimension in shape");
  auto* ctx = new DlpackContext;
  ctx->shape = shape;
  ctx->owner = owner.ptr();
  Py_XINCREF(ctx->owner);
  auto* managed = new DLManagedTensorAbi{};
  managed->dl_tensor.data = reinterpret_cast<void*>(ptr);
  managed->dl_tensor.device = DLDeviceAbi{device_type, device_id};
  managed->dl_tensor.ndim = static_cast<int32_t>(shape.size());
  managed->dl_tensor.dtype = DLDataTypeAbi{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
  managed->dl_tensor.shape = ctx->shape.empty() ? nullptr : ctx->shape.data();
  managed->dl_tensor.strides = nullptr;  // compact row-major
  managed->dl_tensor.byte_offset = 0;
  managed->manager_ctx = ctx;
  managed->deleter = &dlpack_deleter;
  PyObject* capsule = PyCapsule_New(managed, "dltensor", &dlpack_capsule_destructor);
  if (capsule == nullptr) {
    dlpack_deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace

void register_graph_bindings(py::module_& m) {
  py::class_<GraphCache>(m, "GraphCache",
                         "Bounded LRU of executable CUDA graphs keyed by (device, tensor shapes).\n"
                         "run() captures the work an enqueue callback puts on a stream once per key,\n"
                         "replays it, updates it in place (cudaGraphExecUpdate) when only the addresses\n"
                         "change, and re-instantiates when the update is refused or the graph launches\n"
                         "thread-block clusters. Calls are serialised per cache.")
      .def(py::init<size_t>(), py::arg("capacity") = 8)
      .def("run", &cache_run, py::arg("device"), py::arg("shapes"), py::arg("addresses"), py::arg("enqueue"),
           py::arg("stream"),
           "Run the work for (device, shapes) on `stream` (an int cudaStream_t, not 0). `enqueue(stream)` is\n"
           "called during a capture: it must enqueue the work on that stream and must not allocate or\n"
           "synchronise. `addresses` (ints) identify the buffers the work uses. Returns 'captured',\n"
           "'replayed', 'updated' or 'reinstantiated'. Raises RuntimeError naming the failed CUDA call, or\n"
           "the callback's own exception. Never synchronises.")
      .def(
          "contains",
          [](const GraphCache& c, int device, const std::vector<std::vector<int64_t>>& shapes) {
            return c.contains(make_key(device, shapes));
          },
          py::arg("device"), py::arg("shapes"))
      .def(
          "would_replay",
          [](const GraphCache& c, int device, const std::vector<std::vector<int64_t>>& shapes,
             const std::vector<uintptr_t>& addresses) { return c.would_replay(make_key(device, shapes), addresses); },
          py::arg("device"), py::arg("shapes"), py::arg("addresses"),
          "True when run() with these arguments would replay (no capture)")
      .def(
          "uses_clusters",
          [](const GraphCache& c, int device, const std::vector<std::vector<int64_t>>& shapes) {
            return c.uses_clusters(make_key(device, shapes));
          },
          py::arg("device"), py::arg("shapes"), "True when the cached graph for the key launches clusters")
      .def("__len__", &GraphCache::size)
      .def_property("capacity", &GraphCache::capacity, &GraphCache::set_capacity)
      .def("clear", &GraphCache::clear, "Drop every entry (their executable graphs are destroyed)")
      .def("stats", &cache_stats,
           "dict: size, capacity, hits, misses, evictions, captures, replays, updates, update_refusals,\n"
           "cluster_reinstantiations, launches");

  m.def(
      "graph_probe",
      [](uintptr_t x, uintptr_t y, int64_t n, float a, float b, int cluster, uintptr_t stream) {
        const cudaError_t err = launch_affine_probe(reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y),
                                                    n, a, b, cluster, reinterpret_cast<cudaStream_t>(stream));
        if (err != cudaSuccess) {
          const std::string what = "launch_affine_probe(n=" + std::to_string(n) + ", cluster=" +
                                   std::to_string(cluster) + ")";
          throw std::runtime_error(cuda_status(err, what.c_str()).message());
        }
      },
      py::arg("x"), py::arg("y"), py::arg("n"), py::kw_only(), py::arg("a") = 1.0f, py::arg("b") = 0.0f,
      py::arg("cluster") = 1, py::arg("stream") = 0,
      "Test kernel (float32 device pointers): y = a * x + b, launched in clusters of `cluster` blocks\n"
      "(1 = plain launch; clusters need compute capability 9.0). Never synchronises.");

  m.def(
      "late_copy_probe",
      [](uintptr_t src, uintptr_t dst, int64_t nbytes, int64_t delay_us, uintptr_t stream) {
        const cudaError_t err = launch_late_copy_probe(reinterpret_cast<const void*>(src), reinterpret_cast<void*>(dst),
                                                       nbytes, delay_us, reinterpret_cast<cudaStream_t>(stream));
        if (err != cudaSuccess) {
          const std::string what = "launch_late_copy_probe(nbytes=" + std::to_string(nbytes) + ", delay_us=" +
                                   std::to_string(delay_us) + ")";
          throw std::runtime_error(cuda_status(err, what.c_str()).message());
        }
      },
      py::arg("src"), py::arg("dst"), py::arg("nbytes"), py::kw_only(), py::arg("delay_us") = 100,
      py::arg("stream") = 0,
      "Test kernel (device pointers): copies nbytes (a multiple of 4) from src to dst after letting the next\n"
      "kernel in the stream launch and waiting delay_us: a kernel launched with programmatic stream\n"
      "serialization that did not wait for the grid ahead would read dst's old bytes. Never synchronises.");

  py::class_<DeviceBuffer>(m, "DeviceBuffer", "Device memory (cudaMalloc), freed when the object is collected")
      .def(py::init<int, size_t>(), py::arg("device"), py::arg("nbytes"))
      .def_property_readonly("ptr", &DeviceBuffer::ptr)
      .def_property_readonly("nbytes", &DeviceBuffer::nbytes)
      .def_property_readonly("device", &DeviceBuffer::device);

  py::class_<CudaStream>(m, "CudaStream", "A non-blocking CUDA stream on a device, destroyed when collected")
      .def(py::init<int>(), py::arg("device"))
      .def_property_readonly("handle", &CudaStream::handle)
      .def_property_readonly("device", &CudaStream::device)
      .def("synchronize", &CudaStream::synchronize);

  m.def(
      "device_synchronize",
      [](int device) {
        Status st;
        {
          py::gil_scoped_release release;
          st = device_synchronize(device);
        }
        throw_if_error(st);
      },
      py::arg("device"), "cudaDeviceSynchronize on `device`");
  m.def(
      "copy_bytes",
      [](uintptr_t dst, uintptr_t src, size_t nbytes, int device, uintptr_t stream, bool wait) {
        Status st;
        {
          py::gil_scoped_release release;
          st = copy_bytes(device, reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), nbytes,
                          reinterpret_cast<cudaStream_t>(stream), wait);
        }
        throw_if_error(st);
      },
      py::arg("dst"), py::arg("src"), py::arg("nbytes"), py::kw_only(), py::arg("device") = 0,
      py::arg("stream") = 0, py::arg("wait") = true,
      "cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream) on `device` (host or device pointers);\n"
      "with wait, the copy is complete on return");
  m.def(
      "stage_copies",
      [](int device, const std::vector<std::tuple<uintptr_t, uintptr_t, size_t, int>>& copies) {
        std::vector<CopySpan> spans;
        spans.reserve(copies.size());
        for (const auto& [dst, src, bytes, src_device] : copies)
          spans.push_back({reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, src_device});
        Status st;
        {
          py::gil_scoped_release release;
          st = stage_copies(device, spans.data(), spans.size());
        }
        throw_if_error(st);
      },
      py::arg("device"), py::arg("copies"),
      "cudaDeviceSynchronize on `device`, then every (dst, src, nbytes, src_device) copied, complete on\n"
      "return: one call to stage a graph's inputs. dst: device memory of `device`; src_device: the device of\n"
      "src, -1 for host memory (sources on `device` go as one kernel, the others by cudaMemcpyAsync)");
  m.def(
      "pointer_device",
      [](uintptr_t ptr) {
        int device = -1;
        throw_if_error(pointer_device(reinterpret_cast<const void*>(ptr), &device));
        return device;
      },
      py::arg("ptr"), "The CUDA device `ptr` points into, or -1 for host memory");
  m.def("dlpack_capsule", &dlpack_capsule, py::arg("owner"), py::arg("ptr"), py::arg("shape"), py::arg("code"),
        py::arg("bits"), py::arg("device_type"), py::arg("device_id"),
        "A DLPack 'dltensor' capsule for compact row-major memory at `ptr` (kDLCPU = 1, kDLCUDA = 2; dtype\n"
        "codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool). `owner` stays alive until the consumer is done.");
}

}  // namespace trt_fastops::python
