// Status values returned by host code that must not throw across a C ABI
// (ORT kernels, TensorRT plugin methods). Framework-free.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace trt_fastops {

// Message building without iostreams: no locale facets, no static stream state
// (an ostringstream in our libraries crashed in a process that also held torch
// and onnxruntime-gpu), and cheap enough for error paths.
inline void str_append(std::string& s, std::string_view v) { s.append(v.data(), v.size()); }
inline void str_append(std::string& s, const char* v) { s += v ? v : "(null)"; }
inline void str_append(std::string& s, char v) { s += v; }
inline void str_append(std::string& s, bool v) { s += v ? "true" : "false"; }
template <typename T>
std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>>
str_append(std::string& s, T v) {
  char buf[40];
  std::to_chars_result r;
  if constexpr (std::is_floating_point_v<T>) {
    r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 9);
  } else {
    r = std::to_chars(buf, buf + sizeof(buf), v);
  }
  s.append(buf, r.ptr);
}

// str_cat("axis ", 3, " is out of range") -> "axis 3 is out of range"
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::string s;
  (str_append(s, args), ...);
  return s;
}

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  // Status::errorf("LayerNorm: input 'Scale' has ", n, " elements, expected ", m)
  template <typename... Args>
  static Status errorf(const Args&... args) {
    return Status(str_cat(args...));
  }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

// Propagate a failed Status from the current function.
#define TRT_FASTOPS_RETURN_IF_ERROR(expr)          \
  do {                                             \
    ::trt_fastops::Status _st = (expr);            \
    if (!_st.is_ok()) return _st;                  \
  } while (0)

}  // namespace trt_fastops
