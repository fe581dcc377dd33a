// Test doubles for the TensorRT objects a plugin talks to: logger and logger
// finder, error recorder, plugin resource context, plugin registry, and the
// expression builder / dimension expressions of getOutputShapes. They stand
// in for libnvinfer, which the contract test does not have.
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace trt_doubles {

namespace nv = nvinfer1;

class TestLogger : public nv::ILogger {
 public:
  explicit TestLogger(const char* tag) : tag_(tag) {}
  void log(Severity severity, const char* msg) noexcept override {
    entries.push_back({severity, msg ? msg : ""});
    if (echo && severity <= Severity::kWARNING) std::printf("  [%s logger] %s\n", tag_, msg ? msg : "");
  }
  // Errors (kERROR / kINTERNAL_ERROR) seen since the last clear().
  std::vector<std::string> errors() const {
    std::vector<std::string> out;
    for (const auto& e : entries)
      if (e.first <= Severity::kERROR) out.push_back(e.second);
    return out;
  }
  bool saw_error(const std::string& part) const {
    for (const auto& e : errors())
      if (e.find(part) != std::string::npos) return true;
    return false;
  }
  std::string last_error() const {
    auto e = errors();
    return e.empty() ? std::string() : e.back();
  }
  void clear() { entries.clear(); }

  std::vector<std::pair<Severity, std::string>> entries;
  bool echo = false;

 private:
  const char* tag_;
};

class TestLoggerFinder : public nv::ILoggerFinder {
 public:
  explicit TestLoggerFinder(nv::ILogger* logger) : logger_(logger) {}
  nv::ILogger* findLogger() override { return logger_; }
  ~TestLoggerFinder() override = default;

 private:
  nv::ILogger* logger_;
};

class TestRecorder : public nv::IErrorRecorder {
 public:
  int32_t getNbErrors() const noexcept override { return int32_t(errors.size()); }
  nv::ErrorCode getErrorCode(int32_t i) const noexcept override {
    return i >= 0 && size_t(i) < errors.size() ? errors[size_t(i)].first : nv::ErrorCode::kINVALID_ARGUMENT;
  }
  ErrorDesc getErrorDesc(int32_t i) const noexcept override {
    return i >= 0 && size_t(i) < errors.size() ? errors[size_t(i)].second.c_str() : "";
  }
  bool hasOverflowed() const noexcept override { return false; }
  void clear() noexcept override { errors.clear(); }
  bool reportError(nv::ErrorCode code, ErrorDesc desc) noexcept override {
    errors.push_back({code, desc ? desc : ""});
    return false;  // not fatal: let the caller continue with its error value
  }
  RefCount incRefCount() noexcept override { return ++refs; }
  RefCount decRefCount() noexcept override { return --refs; }

  bool saw(const std::string& part) const {
    for (const auto& e : errors)
      if (e.second.find(part) != std::string::npos) return true;
    return false;
  }
  std::string last() const { return errors.empty() ? std::string() : errors.back().second; }

  std::vector<std::pair<nv::ErrorCode, std::string>> errors;
  RefCount refs = 0;
};

class TestResourceContext : public nv::IPluginResourceContext {
 public:
  explicit TestResourceContext(nv::IErrorRecorder* recorder) : recorder_(recorder) {}
  nv::IGpuAllocator* getGpuAllocator() const noexcept override { return nullptr; }
  nv::IErrorRecorder* getErrorRecorder() const noexcept override { return recorder_; }
  ~TestResourceContext() noexcept override = default;

 private:
  nv::IErrorRecorder* recorder_;
};

// Registry: creators keyed by (name, version, namespace), duplicates refused,
// as TensorRT's registry does. Only the IPluginCreatorV3One kind is stored.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
class TestRegistry : public nv::IPluginRegistry {
 public:
  struct Entry {
    std::string name, version, ns;
    nv::IPluginCreatorInterface* creator;
  };
  std::vector<Entry> entries;
  std::vector<nv::IPluginCreatorInterface*> list;

  ~TestRegistry() noexcept override = default;
  void setErrorRecorder(nv::IErrorRecorder* const) noexcept override {}
  nv::IErrorRecorder* getErrorRecorder() const noexcept override { return nullptr; }
  bool isParentSearchEnabled() const override { return false; }
  void setParentSearchEnabled(bool const) override {}
  PluginLibraryHandle loadLibrary(nv::AsciiChar const*) noexcept override { return nullptr; }
  void deregisterLibrary(PluginLibraryHandle) noexcept override {}
  bool registerCreator(nv::IPluginCreatorInterface& creator, nv::AsciiChar const* const ns) noexcept override {
    if (std::strcmp(creator.getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") != 0) return false;
    auto& c = static_cast<nv::IPluginCreatorV3One&>(creator);
    Entry e{c.getPluginName(), c.getPluginVersion(), ns ? ns : "", &creator};
    for (const Entry& x : entries)
      if (x.name == e.name && x.version == e.version && x.ns == e.ns) return false;
    entries.push_back(e);
    list.push_back(&creator);
    return true;
  }
  nv::IPluginCreatorInterface* const* getAllCreators(int32_t* const n) const noexcept override {
    *n = int32_t(list.size());
    return list.data();
  }
  nv::IPluginCreatorInterface* getCreator(nv::AsciiChar const* const name, nv::AsciiChar const* const version,
                                          nv::AsciiChar const* const ns = "") noexcept override {
    for (const Entry& x : entries)
      if (x.name == name && x.version == version && x.ns == (ns ? ns : "")) return x.creator;
    return nullptr;
  }
  bool deregisterCreator(nv::IPluginCreatorInterface const&) noexcept override { return false; }
  nv::IPluginResource* acquirePluginResource(nv::AsciiChar const*, nv::IPluginResource*) noexcept override {
    return nullptr;
  }
  int32_t releasePluginResource(nv::AsciiChar const*) noexcept override { return -1; }
#if NV_TENSORRT_MAJOR > 10 || NV_TENSORRT_MINOR >= 10
  nv::IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const n) noexcept override {
    return getAllCreators(n);
  }
#endif
#if NV_TENSORRT_MAJOR < 11
  // TensorRT 10 still has the IPluginCreator (V2) members, ahead of the V3 ones in the vtable.
  bool registerCreator(nv::IPluginCreator&, nv::AsciiChar const* const) noexcept override { return false; }
  nv::IPluginCreator* const* getPluginCreatorList(int32_t* const n) const noexcept override {
    *n = 0;
    return nullptr;
  }
  nv::IPluginCreator* getPluginCreator(nv::AsciiChar const* const, nv::AsciiChar const* const,
                                       nv::AsciiChar const* const = "") noexcept override {
    return nullptr;
  }
  bool deregisterCreator(nv::IPluginCreator const&) noexcept override { return false; }
#endif
};
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

// Dimension expressions. IDimensionExpr / IExprBuilder are thin fronts over
// nvinfer1::apiv implementations (mImpl), which is what we provide. Like
// TensorRT, operations on constants fold to constants; symbolic expressions
// keep their operation tree so a test can evaluate them for given symbol values.
class TestExpr : public nv::IDimensionExpr {
 public:
  TestExpr(bool constant, int64_t value, std::string symbol) : impl_(constant, value, std::move(symbol)) {
    mImpl = &impl_;
  }
  TestExpr(nv::DimensionOperation op, const TestExpr* a, const TestExpr* b)
      : impl_(false, 0, "(op" + std::to_string(int(op)) + ")") {
    mImpl = &impl_;
    op_ = int(op);
    a_ = a;
    b_ = b;
  }
  ~TestExpr() noexcept override = default;
  const std::string& symbol() const { return impl_.symbol; }

  // Value for the given symbols; false when a symbol is missing or an
  // operation is undefined (division by zero, an operand from elsewhere).
  bool eval(const std::map<std::string, int64_t>& symbols, int64_t* out) const {
    if (impl_.constant) {
      *out = impl_.value;
      return true;
    }
    if (op_ < 0) {
      auto it = symbols.find(impl_.symbol);
      if (it == symbols.end()) return false;
      *out = it->second;
      return true;
    }
    int64_t x = 0, y = 0;
    if (a_ == nullptr || b_ == nullptr || !a_->eval(symbols, &x) || !b_->eval(symbols, &y)) return false;
    return apply(static_cast<nv::DimensionOperation>(op_), x, y, out);
  }

  static bool apply(nv::DimensionOperation op, int64_t x, int64_t y, int64_t* r) {
    switch (op) {
      case nv::DimensionOperation::kSUM: *r = x + y; return true;
      case nv::DimensionOperation::kPROD: *r = x * y; return true;
      case nv::DimensionOperation::kMAX: *r = x > y ? x : y; return true;
      case nv::DimensionOperation::kMIN: *r = x < y ? x : y; return true;
      case nv::DimensionOperation::kSUB: *r = x - y; return true;
      case nv::DimensionOperation::kEQUAL: *r = x == y; return true;
      case nv::DimensionOperation::kLESS: *r = x < y; return true;
      case nv::DimensionOperation::kFLOOR_DIV:
        if (y == 0) return false;
        *r = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
        return true;
      case nv::DimensionOperation::kCEIL_DIV:
        if (y == 0) return false;
        *r = x / y + ((x % y != 0) && ((x < 0) == (y < 0)));
        return true;
    }
    return false;
  }

 private:
  struct Impl : nv::apiv::VDimensionExpr {
    Impl(bool c, int64_t v, std::string s) : constant(c), value(v), symbol(std::move(s)) {}
    bool isConstant() const override { return constant; }
    int64_t getConstantValue() const override { return constant ? value : std::numeric_limits<int64_t>::min(); }
    bool isSizeTensor() const override { return false; }
    bool constant;
    int64_t value;
    std::string symbol;
  } impl_;
  int op_ = -1;  // DimensionOperation of a symbolic operation; -1 for leaves
  const TestExpr* a_ = nullptr;
  const TestExpr* b_ = nullptr;
};

class TestExprBuilder : public nv::IExprBuilder {
 public:
  TestExprBuilder() { mImpl = &impl_; }
  ~TestExprBuilder() noexcept override = default;

  const TestExpr* constant_expr(int64_t v) { return impl_.make(true, v, std::to_string(v)); }
  const TestExpr* symbol(const std::string& name) { return impl_.make(false, 0, name); }
  int constants_made() const { return impl_.constants_made; }
  // Negative values passed to constant() (TensorRT does not document them).
  int negative_constants() const { return impl_.negative_constants; }
  // Whether `e` came from this builder (so eval can follow it).
  const TestExpr* own(const nv::IDimensionExpr* e) const {
    for (const auto& x : impl_.exprs)
      if (x.get() == e) return x.get();
    return nullptr;
  }

 private:
  struct Impl : nv::apiv::VExprBuilder {
    const TestExpr* make(bool c, int64_t v, std::string s) {
      exprs.push_back(std::make_unique<TestExpr>(c, v, std::move(s)));
      return exprs.back().get();
    }
    const TestExpr* find(const nv::IDimensionExpr* e) const {
      for (const auto& x : exprs)
        if (x.get() == e) return x.get();
      return nullptr;
    }
    nv::IDimensionExpr const* constant(int64_t value) override {
      ++constants_made;
      negative_constants += value < 0;
      return make(true, value, std::to_string(value));
    }
    nv::IDimensionExpr const* operation(nv::DimensionOperation op, nv::IDimensionExpr const& a,
                                        nv::IDimensionExpr const& b) override {
      if (a.isConstant() && b.isConstant()) {
        int64_t r = 0;
        if (TestExpr::apply(op, a.getConstantValue(), b.getConstantValue(), &r)) return make(true, r, "");
      }
      exprs.push_back(std::make_unique<TestExpr>(op, find(&a), find(&b)));
      return exprs.back().get();
    }
    nv::IDimensionExpr const* declareSizeTensor(int32_t, nv::IDimensionExpr const&, nv::IDimensionExpr const&) override {
      return nullptr;
    }
    std::deque<std::unique_ptr<TestExpr>> exprs;
    int constants_made = 0;
    int negative_constants = 0;
  } impl_;
};

}  // namespace trt_doubles
