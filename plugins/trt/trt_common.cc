#include "plugins/trt/trt_common.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace trt_fastops::trt {

bool dtype_from_trt(nv::DataType t, DType* out) {
  switch (t) {
    case nv::DataType::kFLOAT: *out = DType::f32; return true;
    case nv::DataType::kHALF: *out = DType::f16; return true;
    case nv::DataType::kBF16: *out = DType::bf16; return true;
    default: return false;
  }
}

nv::DataType trt_dtype_of(DType t) {
  switch (t) {
    case DType::f32: return nv::DataType::kFLOAT;
    case DType::f16: return nv::DataType::kHALF;
    case DType::bf16: return nv::DataType::kBF16;
  }
  return nv::DataType::kFLOAT;
}

const char* trt_dtype_name(nv::DataType t) {
  // Types newer than 10.0 (kFP4, kE8M0, ...) are left to the default so the
  // code compiles against every 10.x header.
  switch (t) {
    case nv::DataType::kFLOAT: return "float32";
    case nv::DataType::kHALF: return "float16";
    case nv::DataType::kBF16: return "bfloat16";
    case nv::DataType::kINT8: return "int8";
    case nv::DataType::kINT32: return "int32";
    case nv::DataType::kINT64: return "int64";
    case nv::DataType::kBOOL: return "bool";
    case nv::DataType::kUINT8: return "uint8";
    case nv::DataType::kFP8: return "float8";
    default: return "an unsupported TensorRT type";
  }
}

// ---------------------------------------------------------------------------
// Logging

namespace {

std::atomic<nv::ILoggerFinder*> g_logger_finder{nullptr};

}  // namespace

void set_logger_finder(nv::ILoggerFinder* finder) noexcept {
  // The first non-null finder wins: TensorRT hands the same one to every
  // library it loads, and a later null must not drop it.
  nv::ILoggerFinder* expected = nullptr;
  if (finder != nullptr) g_logger_finder.compare_exchange_strong(expected, finder);
}

nv::ILogger* current_logger() noexcept {
  try {
    if (nv::ILoggerFinder* finder = g_logger_finder.load()) {
      if (nv::ILogger* logger = finder->findLogger()) return logger;
    }
    TrtRuntime rt = find_trt_runtime();
    if (rt.get_logger == nullptr || !check_trt_runtime_version(rt).is_ok()) return nullptr;
    using GetLogger = nv::ILogger* (*)();
    return reinterpret_cast<GetLogger>(rt.get_logger)();
  } catch (...) {
    return nullptr;
  }
}

void log_message(nv::ILogger::Severity severity, const char* message) noexcept {
  if (nv::ILogger* logger = current_logger()) {
    logger->log(severity, message);
    return;
  }
  if (severity <= nv::ILogger::Severity::kWARNING) std::fprintf(stderr, "[trt_fastops] %s\n", message);
}

void report_error(nv::IErrorRecorder* recorder, nv::ErrorCode code, const char* message) noexcept {
  if (recorder != nullptr) {
    recorder->reportError(code, message);
    return;
  }
  log_message(nv::ILogger::Severity::kERROR, message);
}

// ---------------------------------------------------------------------------
// The running TensorRT

TrtRuntime find_trt_runtime() noexcept {
  TrtRuntime rt;
  auto fill = [&rt](void* handle) {
    void* version = dlsym(handle, "getInferLibVersion");
    if (version == nullptr) return false;
    rt.version = reinterpret_cast<int32_t (*)()>(version)();
    rt.get_plugin_registry = dlsym(handle, "getPluginRegistry");
    rt.get_logger = dlsym(handle, "getLogger");
    return true;
  };
  if (fill(RTLD_DEFAULT)) return rt;
  // Our own major first, then the others, so a mismatch is detected (and
  // refused) rather than mistaken for "no TensorRT loaded".
  const std::string own = "libnvinfer.so." + std::to_string(BUILT_TRT_MAJOR);
  const char* names[] = {own.c_str(), "libnvinfer.so", "libnvinfer.so.10", "libnvinfer.so.11",
                         "libnvinfer.so.12"};
  for (const char* name : names) {
    void* handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    const bool found = fill(handle);
    // NOLOAD took a reference on a library someone else loaded: give it back.
    // The symbols stay valid while that owner keeps it loaded.
    dlclose(handle);
    if (found) return rt;
  }
  return rt;
}

Status check_trt_runtime_version(const TrtRuntime& rt) {
  if (rt.version < 0) return Status::ok();
  const int32_t major = rt.version / 10000;
  if (major == BUILT_TRT_MAJOR) return Status::ok();
  return Status::errorf("trt_fastops: this TensorRT plugin library was built against TensorRT ",
                        NV_TENSORRT_MAJOR, ".", NV_TENSORRT_MINOR, " headers, but TensorRT ", major, ".",
                        rt.version / 100 % 100, " is running. TensorRT major versions differ in ABI "
                        "(ILogger, ILoggerFinder, IPluginRegistry), so the plugins are not registered; "
                        "rebuild trt_fastops against the running TensorRT's headers "
                        "(-DTRT_FASTOPS_TRT_INCLUDE=... or TensorRT_ROOT)");
}

}  // namespace trt_fastops::trt
