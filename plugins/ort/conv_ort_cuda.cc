// CUDA path of the Conv / ConvTranspose ORT custom ops (see conv_ort_cuda.h).
// Only validates, allocates and converts: planning, caching and the kernels
// live behind conv_launch.h in the kernel library (the only one linking cudart).
#include "plugins/ort/conv_ort_cuda.h"

#include <cstddef>
#include <exception>
#include <string>

#include "plugins/conv/conv_launch.h"
#include "plugins/ort/ort_helpers.h"

namespace trt_fastops::ort {
namespace {

OrtStatus* ep_fail(const char* op_name, const std::string& what, const std::string& node_name) {
  if (what.rfind(op_name, 0) == 0) return node_error(ORT_EP_FAIL, what, node_name);  // launcher messages name the op already
  return node_error(ORT_EP_FAIL, str_cat(op_name, ": ", what), node_name);
}

// ORT's allocator for the device X lives on, and one workspace block from it.
// Freed when the guard goes: after the enqueue, which is what ORT's own CUDA
// kernels do with their scratch buffers (later users are ordered on the stream).
struct Workspace {
  OrtAllocator* allocator = nullptr;
  void* data = nullptr;
  ~Workspace() {
    if (data != nullptr) allocator->Free(allocator, data);
    if (allocator != nullptr) api()->ReleaseAllocator(allocator);
  }
};

OrtStatus* allocate_workspace(OrtKernelContext* ctx, size_t bytes, Workspace* ws, std::string* error) {
  const OrtApi* a = api();
  const OrtValue* x = nullptr;
  if (OrtStatus* st = a->KernelContext_GetInput(ctx, 0, &x)) return st;
  if (x == nullptr) {
    *error = "input X is missing";
    return nullptr;
  }
  const OrtMemoryInfo* info = nullptr;
  if (OrtStatus* st = a->GetTensorMemoryInfo(x, &info)) return st;
  if (OrtStatus* st = a->KernelContext_GetAllocator(ctx, info, &ws->allocator)) return st;
  ws->data = ws->allocator->Alloc(ws->allocator, bytes);
  if (ws->data == nullptr) *error = "ORT's allocator returned no memory for a " + std::to_string(bytes) + "-byte workspace";
  return nullptr;
}

OrtStatus* compute_impl(OrtKernelContext* ctx, const conv::ConvParams& p, const char* op_name,
                        const std::string& node_name) {
  const OrtApi* a = api();
  void* stream = nullptr;
  if (OrtStatus* st = a->KernelContext_GetGPUComputeStream(ctx, &stream)) {
    const Status s = from_ort_status(st, "KernelContext_GetGPUComputeStream");
    return ep_fail(op_name, s.message(), node_name);
  }
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  conv::ConvPlanHandle plan;
  size_t ws_bytes = 0;
  Status s = conv::conv_prepare(p, cuda_stream, &plan, &ws_bytes);
  if (!s.is_ok()) return ep_fail(op_name, s.message(), node_name);
  Workspace ws;
  if (ws_bytes > 0) {
    std::string error;
    if (OrtStatus* st = allocate_workspace(ctx, ws_bytes, &ws, &error)) {
      const Status fs = from_ort_status(st, "workspace allocation");
      return ep_fail(op_name, fs.message(), node_name);
    }
    if (!error.empty()) return ep_fail(op_name, error, node_name);
  }
  s = conv::conv_run(p, plan, ws.data, ws_bytes, cuda_stream);
  if (!s.is_ok()) return ep_fail(op_name, s.message(), node_name);
  return nullptr;
}

}  // namespace

OrtStatus* conv_compute_cuda(OrtKernelContext* ctx, const conv::ConvParams& p, const char* op_name,
                             const std::string& node_name) {
  try {
    return compute_impl(ctx, p, op_name, node_name);
  } catch (const std::exception& e) {
    return ep_fail(op_name, std::string("internal error: ") + e.what(), node_name);
  } catch (...) {
    return ep_fail(op_name, "internal error: unknown exception", node_name);
  }
}

}  // namespace trt_fastops::ort
