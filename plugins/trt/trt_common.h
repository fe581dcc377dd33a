// TensorRT-side helpers shared by every trt_fastops plugin: names, DataType
// <-> DType, where errors go (error recorder -> TensorRT logger -> stderr) and
// how the library finds libnvinfer's entry points without linking it.
//
// Built against the TensorRT headers only (10.x or 11.x); the library has no
// link-time dependency on libnvinfer. TensorRT 11 changed the ABI of ILogger,
// ILoggerFinder and IPluginRegistry (vtable layouts), so one build serves one
// TensorRT major version; the entry points check the running version and
// refuse a mismatch instead of calling through a wrong vtable.
#pragma once

#include <NvInferRuntime.h>
#include <NvInferVersion.h>

#include <cstdint>
#include <string>

#include "plugins/common/dtype.h"
#include "plugins/common/status.h"

namespace trt_fastops::trt {

namespace nv = nvinfer1;

// Every creator registers under this namespace with version "1"; the plugin
// name is the op type, so the ONNX parser finds the plugin for a node of
// domain "trt_fastops" (it reads the namespace from the node's domain since
// TensorRT 10.10, or from a 'plugin_namespace' attribute).
constexpr const char* PLUGIN_NAMESPACE = "trt_fastops";
constexpr const char* PLUGIN_VERSION = "1";
constexpr int32_t BUILT_TRT_MAJOR = NV_TENSORRT_MAJOR;

// DataType -> DType; false for types the ops do not support.
bool dtype_from_trt(nv::DataType t, DType* out);
nv::DataType trt_dtype_of(DType t);
// "float32", "int8", ... for messages (never null).
const char* trt_dtype_name(nv::DataType t);

// ---------------------------------------------------------------------------
// Errors and logging. All of these are noexcept and never fail loudly.

// Remembers the finder TensorRT hands to setLoggerFinder (loadLibrary path).
void set_logger_finder(nv::ILoggerFinder* finder) noexcept;
// The logger to use now: the finder's, else libnvinfer's getLogger(), else null.
nv::ILogger* current_logger() noexcept;
// Error to `recorder` when given, else to the logger, else to stderr.
void report_error(nv::IErrorRecorder* recorder, nv::ErrorCode code, const char* message) noexcept;
void log_message(nv::ILogger::Severity severity, const char* message) noexcept;

// ---------------------------------------------------------------------------
// The running TensorRT, found without linking it: first the global symbol
// scope (trtexec, C++ programs linked to libnvinfer), then an already loaded
// libnvinfer.so.N opened with RTLD_NOLOAD (Python, Triton: libnvinfer loaded
// RTLD_LOCAL as a dependency of another module).
struct TrtRuntime {
  void* get_plugin_registry = nullptr;  // extern "C" IPluginRegistry* getPluginRegistry()
  void* get_logger = nullptr;           // extern "C" ILogger* getLogger()
  int32_t version = -1;                 // getInferLibVersion(): (major*100+minor)*100+patch; -1 unknown
};
TrtRuntime find_trt_runtime() noexcept;

// Ok when no TensorRT is visible or its major version equals BUILT_TRT_MAJOR;
// otherwise an error saying which versions differ.
Status check_trt_runtime_version(const TrtRuntime& rt);

}  // namespace trt_fastops::trt
