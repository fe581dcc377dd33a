// Shared harness of the TensorRT plugin contract test (contract_test.cc and
// its per-family sections): checks and counters, plugin fields, plugin access
// as TensorRT does it, shapes and tensor descriptions, library loading, and
// the GPU helpers (host tensors rounded to the dtype, NaN poison, device
// buffers). Included once, by contract_test.cc, ahead of the sections.
#pragma once

#include <NvInferRuntime.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "plugins/common/dtype.h"
#include "tests/trt/trt_doubles.h"

namespace nv = nvinfer1;
using namespace trt_doubles;
using trt_fastops::DType;

// ---------------------------------------------------------------------------
// Checks

static int g_passed = 0;
static int g_failed = 0;
static bool g_verbose = false;

static void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
    if (g_verbose) std::printf("  ok   %s\n", what.c_str());
  } else {
    ++g_failed;
    std::printf("  FAIL %s\n", what.c_str());
  }
}

static std::string str(const char* s) { return s ? s : "(null)"; }

// ---------------------------------------------------------------------------
// Fields

struct Fields {
  std::deque<int32_t> i32;
  std::deque<int64_t> i64;
  std::deque<float> f32;
  std::deque<double> f64;
  std::deque<std::string> text;
  std::deque<std::vector<int32_t>> lists32;
  std::deque<std::vector<int64_t>> lists64;
  std::deque<std::vector<float>> listsf;
  std::vector<nv::PluginField> list;
  nv::PluginFieldCollection fc{};

  Fields& int32(const char* n, int32_t v) {
    i32.push_back(v);
    list.emplace_back(n, &i32.back(), nv::PluginFieldType::kINT32, 1);
    return *this;
  }
  Fields& int64(const char* n, int64_t v) {
    i64.push_back(v);
    list.emplace_back(n, &i64.back(), nv::PluginFieldType::kINT64, 1);
    return *this;
  }
  Fields& float32(const char* n, float v) {
    f32.push_back(v);
    list.emplace_back(n, &f32.back(), nv::PluginFieldType::kFLOAT32, 1);
    return *this;
  }
  Fields& float64(const char* n, double v) {
    f64.push_back(v);
    list.emplace_back(n, &f64.back(), nv::PluginFieldType::kFLOAT64, 1);
    return *this;
  }
  Fields& string(const char* n, const char* v) {
    text.emplace_back(v);
    list.emplace_back(n, text.back().c_str(), nv::PluginFieldType::kCHAR, int32_t(text.back().size() + 1));
    return *this;
  }
  Fields& int32_list(const char* n, std::vector<int32_t> v) {
    // Own storage per list: a deque's elements are not contiguous across blocks.
    lists32.push_back(v);
    list.emplace_back(n, lists32.back().data(), nv::PluginFieldType::kINT32, int32_t(v.size()));
    return *this;
  }
  Fields& int64_list(const char* n, std::vector<int64_t> v) {
    lists64.push_back(v);
    list.emplace_back(n, lists64.back().data(), nv::PluginFieldType::kINT64, int32_t(v.size()));
    return *this;
  }
  Fields& float32_list(const char* n, std::vector<float> v) {
    listsf.push_back(v);
    list.emplace_back(n, listsf.back().data(), nv::PluginFieldType::kFLOAT32, int32_t(v.size()));
    return *this;
  }
  // A string as the ONNX parser passes it: the characters only, no NUL.
  Fields& string_raw(const char* n, const char* v) {
    text.emplace_back(v);
    list.emplace_back(n, text.back().data(), nv::PluginFieldType::kCHAR, int32_t(text.back().size()));
    return *this;
  }
  const nv::PluginFieldCollection* get() {
    fc.nbFields = int32_t(list.size());
    fc.fields = list.data();
    return &fc;
  }
};

// One serialized field value, widened.
struct FieldDump {
  nv::PluginFieldType type;
  double value;
};

static std::map<std::string, FieldDump> dump_fields(const nv::PluginFieldCollection* fc) {
  std::map<std::string, FieldDump> out;
  if (fc == nullptr) return out;
  for (int32_t i = 0; i < fc->nbFields; ++i) {
    const nv::PluginField& f = fc->fields[i];
    double v = NAN;
    if (f.length == 1 && f.data) {
      switch (f.type) {
        case nv::PluginFieldType::kINT32: v = *static_cast<const int32_t*>(f.data); break;
        case nv::PluginFieldType::kINT64: v = double(*static_cast<const int64_t*>(f.data)); break;
        case nv::PluginFieldType::kFLOAT32: v = *static_cast<const float*>(f.data); break;
        case nv::PluginFieldType::kFLOAT64: v = *static_cast<const double*>(f.data); break;
        default: break;
      }
    }
    out[str(f.name)] = {f.type, v};
  }
  return out;
}

// Every field in full: type, values (ints / floats widened; lists too) and
// strings (trailing NULs dropped), for comparing serialized plugins.
struct FieldFull {
  nv::PluginFieldType type = nv::PluginFieldType::kUNKNOWN;
  int32_t length = 0;
  std::vector<double> values;
  std::string text;
  bool operator==(const FieldFull& o) const {
    return type == o.type && length == o.length && values == o.values && text == o.text;
  }
  bool operator!=(const FieldFull& o) const { return !(*this == o); }
};

static std::map<std::string, FieldFull> dump_fields_full(const nv::PluginFieldCollection* fc) {
  std::map<std::string, FieldFull> out;
  if (fc == nullptr) return out;
  for (int32_t i = 0; i < fc->nbFields; ++i) {
    const nv::PluginField& f = fc->fields[i];
    FieldFull d;
    d.type = f.type;
    d.length = f.length;
    for (int32_t k = 0; f.data && k < f.length; ++k) {
      switch (f.type) {
        case nv::PluginFieldType::kINT32: d.values.push_back(static_cast<const int32_t*>(f.data)[k]); break;
        case nv::PluginFieldType::kINT64: d.values.push_back(double(static_cast<const int64_t*>(f.data)[k])); break;
        case nv::PluginFieldType::kFLOAT32: d.values.push_back(static_cast<const float*>(f.data)[k]); break;
        case nv::PluginFieldType::kFLOAT64: d.values.push_back(static_cast<const double*>(f.data)[k]); break;
        case nv::PluginFieldType::kCHAR: d.text.push_back(static_cast<const char*>(f.data)[k]); break;
        default: break;
      }
    }
    while (!d.text.empty() && d.text.back() == '\0') d.text.pop_back();
    out[str(f.name)] = d;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Plugin access as TensorRT does it

static nv::IPluginV3OneCore* core_of(nv::IPluginV3* p) {
  return static_cast<nv::IPluginV3OneCore*>(p->getCapabilityInterface(nv::PluginCapabilityType::kCORE));
}
static nv::IPluginV3OneBuild* build_of(nv::IPluginV3* p) {
  return static_cast<nv::IPluginV3OneBuild*>(p->getCapabilityInterface(nv::PluginCapabilityType::kBUILD));
}
static nv::IPluginV3OneRuntime* runtime_of(nv::IPluginV3* p) {
  return static_cast<nv::IPluginV3OneRuntime*>(p->getCapabilityInterface(nv::PluginCapabilityType::kRUNTIME));
}

struct PluginPtr {
  nv::IPluginV3* p = nullptr;
  PluginPtr() = default;
  explicit PluginPtr(nv::IPluginV3* q) : p(q) {}
  PluginPtr(const PluginPtr&) = delete;
  PluginPtr& operator=(const PluginPtr&) = delete;
  PluginPtr(PluginPtr&& o) noexcept : p(o.p) { o.p = nullptr; }
  ~PluginPtr() { delete p; }  // TensorRT deletes plugins through IPluginV3's virtual destructor
  nv::IPluginV3* get() const { return p; }
  explicit operator bool() const { return p != nullptr; }
};

struct Env {
  std::vector<nv::IPluginCreatorInterface*> creators;
  TestLogger* logger;
};

static nv::IPluginCreatorV3One* find_creator(const Env& env, const char* name, const char* version, const char* ns) {
  for (auto* c : env.creators) {
    if (std::strcmp(c->getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") != 0) continue;
    auto* v3 = static_cast<nv::IPluginCreatorV3One*>(c);
    if (str(v3->getPluginName()) == name && str(v3->getPluginVersion()) == version &&
        str(v3->getPluginNamespace()) == ns)
      return v3;
  }
  return nullptr;
}

// The IPluginV3 contract every plugin keeps: the PLUGIN 1 interface, its three
// V3One capability interfaces, name / version / namespace, and an unknown
// capability type answered with nullptr and a logged error, not a crash.
static void check_v3_interfaces(const Env& env, nv::IPluginV3* p, const std::string& n) {
  check(str(p->getInterfaceInfo().kind) == "PLUGIN" && p->getInterfaceInfo().major == 1,
        n + ": IPluginV3 interface PLUGIN 1");
  nv::IPluginCapability* core = p->getCapabilityInterface(nv::PluginCapabilityType::kCORE);
  nv::IPluginCapability* build = p->getCapabilityInterface(nv::PluginCapabilityType::kBUILD);
  nv::IPluginCapability* run = p->getCapabilityInterface(nv::PluginCapabilityType::kRUNTIME);
  check(core && str(core->getInterfaceInfo().kind) == "PLUGIN_V3ONE_CORE", n + ": kCORE -> PLUGIN_V3ONE_CORE");
  check(build && str(build->getInterfaceInfo().kind) == "PLUGIN_V3ONE_BUILD", n + ": kBUILD -> PLUGIN_V3ONE_BUILD");
  check(run && str(run->getInterfaceInfo().kind) == "PLUGIN_V3ONE_RUNTIME", n + ": kRUNTIME -> PLUGIN_V3ONE_RUNTIME");
  auto* c = core_of(p);
  check(c && str(c->getPluginName()) == n && str(c->getPluginVersion()) == "1" &&
            str(c->getPluginNamespace()) == "trt_fastops",
        n + ": core name/version/namespace = " + n + "/1/trt_fastops");
  auto* b = build_of(p);
  check(b && b->getNbTactics() == 0 && b->getTimingCacheID() == nullptr, n + ": no tactics");
  env.logger->clear();
  check(p->getCapabilityInterface(static_cast<nv::PluginCapabilityType>(7)) == nullptr &&
            env.logger->saw_error(n + ": getCapabilityInterface: unknown capability type 7"),
        n + ": unknown capability type -> nullptr + error");
}

// ---------------------------------------------------------------------------
// Shapes

struct ExprShape {
  std::vector<const nv::IDimensionExpr*> d;
};

static nv::DimsExprs to_exprs(const ExprShape& s) {
  nv::DimsExprs e{};
  e.nbDims = int32_t(s.d.size());
  for (size_t i = 0; i < s.d.size(); ++i) e.d[i] = s.d[i];
  return e;
}

static nv::Dims to_dims(const std::vector<int64_t>& v) {
  nv::Dims d{};
  d.nbDims = int32_t(v.size());
  for (size_t i = 0; i < v.size(); ++i) d.d[i] = v[i];
  return d;
}

static nv::PluginTensorDesc tensor_desc(const std::vector<int64_t>& dims, nv::DataType t) {
  nv::PluginTensorDesc d{};
  d.dims = to_dims(dims);
  d.type = t;
  d.format = nv::TensorFormat::kLINEAR;
  d.scale = 1.f;
  return d;
}

static nv::DynamicPluginTensorDesc dyn_desc(const std::vector<int64_t>& dims, nv::DataType t) {
  nv::DynamicPluginTensorDesc d{};
  d.desc = tensor_desc(dims, t);
  d.min = d.max = d.opt = to_dims(dims);
  return d;
}

// Evaluates output dim expressions for the symbol values; false if any fails.
static bool eval_dims(const TestExprBuilder& eb, const nv::DimsExprs& e, const std::map<std::string, int64_t>& sym,
                      std::vector<int64_t>* out) {
  out->clear();
  for (int32_t j = 0; j < e.nbDims; ++j) {
    const TestExpr* t = eb.own(e.d[j]);
    int64_t v = 0;
    if (t == nullptr || !t->eval(sym, &v)) return false;
    out->push_back(v);
  }
  return true;
}

// ---------------------------------------------------------------------------
// Loading the libraries

using GetCreatorsFn = nv::IPluginCreatorInterface* const* (*)(int32_t&);
using SetLoggerFinderFn = void (*)(nv::ILoggerFinder*);
using RegisterFn = int32_t (*)(void*);

static std::vector<nv::IPluginCreatorInterface*> call_get_creators(GetCreatorsFn fn) {
  int32_t n = -1;
  nv::IPluginCreatorInterface* const* list = fn(n);
  std::vector<nv::IPluginCreatorInterface*> out;
  if (list != nullptr)
    for (int32_t i = 0; i < n; ++i) out.push_back(list[i]);
  return out;
}

static const nv::DataType FLOAT_TYPES[] = {nv::DataType::kFLOAT, nv::DataType::kHALF, nv::DataType::kBF16};
static const nv::DataType PROBE_TYPES[] = {nv::DataType::kFLOAT, nv::DataType::kHALF, nv::DataType::kBF16,
                                           nv::DataType::kINT8, nv::DataType::kINT32, nv::DataType::kINT64};

// ---------------------------------------------------------------------------
// Enqueue on the GPU against float64 references

#define CUDA_OK(call)                                                                     \
  do {                                                                                    \
    cudaError_t _e = (call);                                                              \
    if (_e != cudaSuccess) {                                                              \
      check(false, std::string(#call) + " failed: " + cudaGetErrorString(_e));             \
      return;                                                                             \
    }                                                                                     \
  } while (0)

static nv::DataType trt_type(DType t) {
  return t == DType::f32 ? nv::DataType::kFLOAT : t == DType::f16 ? nv::DataType::kHALF : nv::DataType::kBF16;
}

// Host tensor: values as the device sees them (rounded to dtype), and bytes.
struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> dims;
  std::vector<double> values;
  std::vector<uint8_t> bytes;
};

static int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

static double round_to(DType t, double v, uint16_t* bits16, float* bits32) {
  if (t == DType::f32) {
    *bits32 = float(v);
    return *bits32;
  }
  if (t == DType::f16) {
    *bits16 = trt_fastops::float_to_half_bits(float(v));
    return trt_fastops::half_bits_to_float(*bits16);
  }
  *bits16 = trt_fastops::float_to_bf16_bits(float(v));
  return trt_fastops::bf16_bits_to_float(*bits16);
}

static HostTensor random_tensor(DType t, const std::vector<int64_t>& dims, double lo, double hi, std::mt19937& rng) {
  HostTensor h;
  h.dtype = t;
  h.dims = dims;
  const int64_t n = numel(dims);
  std::uniform_real_distribution<double> u(lo, hi);
  h.values.resize(size_t(n));
  h.bytes.resize(size_t(n * trt_fastops::dtype_size(t)));
  for (int64_t i = 0; i < n; ++i) {
    uint16_t b16 = 0;
    float b32 = 0;
    h.values[size_t(i)] = round_to(t, u(rng), &b16, &b32);
    if (t == DType::f32)
      std::memcpy(&h.bytes[size_t(i) * 4], &b32, 4);
    else
      std::memcpy(&h.bytes[size_t(i) * 2], &b16, 2);
  }
  return h;
}

static double decode(DType t, const uint8_t* p, int64_t i) {
  if (t == DType::f32) {
    float f;
    std::memcpy(&f, p + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + i * 2, 2);
  return t == DType::f16 ? trt_fastops::half_bits_to_float(h) : trt_fastops::bf16_bits_to_float(h);
}

static std::vector<uint8_t> nan_bytes(DType t, int64_t n) {
  std::vector<uint8_t> b(size_t(n * trt_fastops::dtype_size(t)));
  for (int64_t i = 0; i < n; ++i) {
    if (t == DType::f32) {
      const uint32_t q = 0x7fc00000u;
      std::memcpy(&b[size_t(i) * 4], &q, 4);
    } else {
      const uint16_t q = t == DType::f16 ? 0x7e00 : 0x7fc0;
      std::memcpy(&b[size_t(i) * 2], &q, 2);
    }
  }
  return b;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() {
    if (ptr) cudaFree(ptr);
  }
};
