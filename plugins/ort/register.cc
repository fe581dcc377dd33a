// Entry point of libtrt_fastops_ort.so: RegisterCustomOps, the only exported
// symbol (the library is built with hidden visibility).
//
// Lifetime: ORT keeps a raw pointer to the OrtCustomOpDomain (and through it
// to our OrtCustomOp structs) in every session options and session it was
// added to, and never frees it. So the domain is built once per process,
// under a mutex (RegisterCustomOps may run for many sessions, concurrently),
// added to every session options that asks, and deliberately never released:
// no point in the library's life is known to be after the last session.
#include <onnxruntime_c_api.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugins/ort/attention_ort_op.h"
#include "plugins/ort/conv_ort_op.h"
#include "plugins/ort/dense_ort_op.h"
#include "plugins/ort/embed_ort_op.h"
#include "plugins/ort/norm_ort_op.h"
#include "plugins/ort/ort_helpers.h"
#include "plugins/ort/ort_op.h"

namespace trt_fastops::ort {
namespace {

constexpr const char* DOMAIN = "trt_fastops";

struct Registry {
  OrtCustomOpDomain* domain = nullptr;
  std::vector<std::unique_ptr<NormCustomOp>> ops;  // the domain points into these
  std::vector<std::unique_ptr<ConvCustomOp>> conv_ops;
  std::vector<std::unique_ptr<AttentionCustomOp>> attention_ops;
  std::vector<std::unique_ptr<DenseCustomOp>> dense_ops;
  std::vector<std::unique_ptr<EmbedCustomOp>> embed_ops;
};

std::mutex g_mutex;
Registry* g_registry = nullptr;  // intentionally leaked, see above

OrtStatus* build_registry(const OrtApi* a, Registry* reg) {
  if (OrtStatus* st = a->CreateCustomOpDomain(DOMAIN, &reg->domain)) return st;
  for (bool cuda : {false, true}) {
    for (norm::NormOp op : {norm::NormOp::layer_norm, norm::NormOp::skip_layer_norm, norm::NormOp::rms_norm}) {
      if (OrtStatus* st = add_op_registrations(a, reg->domain, op, cuda, &reg->ops)) return st;
    }
    for (conv::ConvOp op : {conv::ConvOp::conv, conv::ConvOp::conv_transpose}) {
      if (OrtStatus* st = add_op_registrations(a, reg->domain, op, cuda, &reg->conv_ops)) return st;
    }
    if (OrtStatus* st =
            add_op_registrations(a, reg->domain, attention::AttentionOp::attention, cuda, &reg->attention_ops,
                                 attention_x_types(cuda)))
      return st;
    if (OrtStatus* st = add_op_registrations(a, reg->domain, dense::DenseOp::dense, cuda, &reg->dense_ops)) return st;
    if (OrtStatus* st =
            add_op_registrations(a, reg->domain, norm::EmbedOp::embed_layer_norm, cuda, &reg->embed_ops))
      return st;
  }
  return nullptr;
}

OrtStatus* get_domain(const OrtApi* a, OrtCustomOpDomain** domain) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_registry == nullptr) {
    auto reg = std::make_unique<Registry>();
    if (OrtStatus* st = build_registry(a, reg.get())) {
      // Not handed to any session yet, so it can go.
      if (reg->domain) a->ReleaseCustomOpDomain(reg->domain);
      return st;
    }
    g_registry = reg.release();
  }
  *domain = g_registry->domain;
  return nullptr;
}

}  // namespace
}  // namespace trt_fastops::ort

extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  using namespace trt_fastops::ort;
  if (api_base == nullptr) return nullptr;  // nothing to report an error through
  const OrtApi* a = api_base->GetApi(ORT_API_VERSION);
  if (a == nullptr) {
    // An ONNX Runtime older than our headers; version 1 of the API can still
    // carry the message.
    const OrtApi* v1 = api_base->GetApi(1);
    if (v1 == nullptr) return nullptr;
    std::string msg = std::string("trt_fastops: ONNX Runtime ") + api_base->GetVersionString() +
                      " does not provide API version " + std::to_string(ORT_API_VERSION) +
                      "; trt_fastops needs onnxruntime >= 1.21";
    return v1->CreateStatus(ORT_FAIL, msg.c_str());
  }
  set_api(a);
  try {
    OrtCustomOpDomain* domain = nullptr;
    if (OrtStatus* st = get_domain(a, &domain)) return st;
    return a->AddCustomOpDomain(options, domain);
  } catch (const std::exception& e) {
    std::string msg = std::string("trt_fastops: RegisterCustomOps failed: ") + e.what();
    return a->CreateStatus(ORT_FAIL, msg.c_str());
  } catch (...) {
    return a->CreateStatus(ORT_FAIL, "trt_fastops: RegisterCustomOps failed: unknown exception");
  }
}
