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
  KernelScratch scratch(ctx, 0, op_name);  // on X's device
  void* ws = nullptr;
  if (ws_bytes > 0) {
    s = scratch.alloc(ws_bytes, std::to_string(ws_bytes) + "-byte workspace", &ws);
    if (!s.is_ok()) return ep_fail(op_name, s.message(), node_name);
  }
  s = conv::conv_run(p, plan, ws, ws_bytes, cuda_stream);
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
