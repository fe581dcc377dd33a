// Entry points of libtrt_fastops_trt.so for IPluginRegistry::loadLibrary
// (trtexec --dynamicPlugins, builder/runtime plugin-library lists): TensorRT
// calls setLoggerFinder, then getCreators, and registers the creators itself.
// Nothing registers on load (the autoload library does that, see README.md).
// These two are the only exported symbols.
#include <cstdio>
#include <vector>

#include "plugins/trt/attention_plugin.h"
#include "plugins/trt/conv_plugin.h"
#include "plugins/trt/norm_plugin.h"
#include "plugins/trt/trt_common.h"

namespace trt_fastops::trt {
namespace {

// Every plugin family appends its creators here.
const std::vector<nv::IPluginCreatorInterface*>& creator_list() {
  static const std::vector<nv::IPluginCreatorInterface*> list = [] {
    std::vector<nv::IPluginCreatorInterface*> v;
    append_norm_creators(&v);
    append_conv_creators(&v);
    append_attention_creators(&v);
    return v;
  }();
  return list;
}

// The ABI of ILoggerFinder / registry differs across TensorRT majors: refuse
// a mismatch before touching any TensorRT object (stderr: the logger itself
// is what cannot be trusted then).
bool runtime_matches() noexcept {
  try {
    Status st = check_trt_runtime_version(find_trt_runtime());
    if (st.is_ok()) return true;
    std::fprintf(stderr, "[trt_fastops] %s\n", st.message().c_str());
  } catch (...) {
  }
  return false;
}

}  // namespace
}  // namespace trt_fastops::trt

extern "C" __attribute__((visibility("default"))) void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept {
  if (trt_fastops::trt::runtime_matches()) trt_fastops::trt::set_logger_finder(finder);
}

extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginCreatorInterface* const* getCreators(
    int32_t& nbCreators) noexcept {
  nbCreators = 0;
  if (!trt_fastops::trt::runtime_matches()) return nullptr;
  try {
    const auto& list = trt_fastops::trt::creator_list();
    nbCreators = static_cast<int32_t>(list.size());
    return list.data();
  } catch (...) {
    std::fprintf(stderr, "[trt_fastops] getCreators: could not build the creator list\n");
    return nullptr;
  }
}
