// libtrt_fastops_trt_autoload.so: registers trt_fastops' plugin creators in
// TensorRT's plugin registry when the library is loaded, for loaders that only
// dlopen a plugin library (trtexec --staticPlugins, polygraphy --plugins,
// Triton's TensorRT backend, LD_PRELOAD, ctypes.CDLL after `import tensorrt`).
//
// It has no link-time dependency on libnvinfer: the registry comes from
// getPluginRegistry(), looked up in the process (global scope, else an already
// loaded libnvinfer.so.N via RTLD_NOLOAD). The creators come from
// libtrt_fastops_trt.so's getCreators. Both libraries are linked -z nodelete,
// so registered creators never dangle.
//
// When no TensorRT is loaded yet the constructor does nothing (LD_PRELOAD
// reaches every child process); call trt_fastops_trt_register(NULL) later.
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "plugins/trt/trt_common.h"

extern "C" nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) noexcept;

namespace trt_fastops::trt {
namespace {

std::mutex g_mutex;
std::vector<nv::IPluginRegistry*>* g_done = nullptr;  // registries already filled; never freed

int32_t register_plugins(nv::IPluginRegistry* registry, bool at_load) noexcept {
  try {
    std::lock_guard<std::mutex> lock(g_mutex);
    const TrtRuntime rt = find_trt_runtime();
    const Status version = check_trt_runtime_version(rt);
    if (!version.is_ok()) {
      std::fprintf(stderr, "[trt_fastops] %s\n", version.message().c_str());
      return -1;
    }
    if (registry == nullptr) {
      if (rt.get_plugin_registry == nullptr) {
        if (!at_load) {
          log_message(nv::ILogger::Severity::kERROR,
                      "trt_fastops: no TensorRT (libnvinfer) is loaded in this process; load TensorRT first "
                      "(e.g. `import tensorrt`) or pass the registry to trt_fastops_trt_register");
        }
        return -1;
      }
      registry = reinterpret_cast<nv::IPluginRegistry* (*)()>(rt.get_plugin_registry)();
      if (registry == nullptr) {
        log_message(nv::ILogger::Severity::kERROR, "trt_fastops: getPluginRegistry() returned null");
        return -1;
      }
    }
    if (g_done == nullptr) g_done = new std::vector<nv::IPluginRegistry*>();
    int32_t count = 0;
    nv::IPluginCreatorInterface* const* creators = getCreators(count);
    if (creators == nullptr) return -1;  // getCreators said why
    for (nv::IPluginRegistry* r : *g_done)
      if (r == registry) return 0;  // idempotent: already registered here
    int32_t registered = 0;
    for (int32_t i = 0; i < count; ++i) {
      if (registry->registerCreator(*creators[i], PLUGIN_NAMESPACE)) {
        ++registered;
        continue;
      }
      // Typically: already registered, e.g. libtrt_fastops_trt.so was also
      // given to loadLibrary. The plugin is usable either way.
      auto* c = static_cast<nv::IPluginCreatorV3One*>(creators[i]);
      log_message(nv::ILogger::Severity::kWARNING,
                  (std::string("trt_fastops: registerCreator refused ") + c->getPluginName() + " version " +
                   c->getPluginVersion() + " in namespace '" + PLUGIN_NAMESPACE +
                   "' (already registered? load the plugins either through loadLibrary or through the "
                   "autoload library, not both)")
                      .c_str());
    }
    g_done->push_back(registry);
    if (registered > 0 || at_load) {
      log_message(nv::ILogger::Severity::kVERBOSE,
                  ("trt_fastops: registered " + std::to_string(registered) + " plugin creators in namespace '" +
                   PLUGIN_NAMESPACE + "'")
                      .c_str());
    }
    return registered;
  } catch (...) {
    std::fprintf(stderr, "[trt_fastops] plugin registration failed (out of memory)\n");
    return -1;
  }
}

__attribute__((constructor)) void register_at_load() { register_plugins(nullptr, true); }

}  // namespace
}  // namespace trt_fastops::trt

// Registers the creators into `registry` (an nvinfer1::IPluginRegistry*), or
// into getPluginRegistry() when null. Returns how many were newly registered
// (0 when this registry already has them from us), -1 on failure (reported
// through the TensorRT logger or stderr). Safe to call repeatedly.
extern "C" __attribute__((visibility("default"))) int32_t trt_fastops_trt_register(void* registry) noexcept {
  return trt_fastops::trt::register_plugins(static_cast<nvinfer1::IPluginRegistry*>(registry), false);
}
