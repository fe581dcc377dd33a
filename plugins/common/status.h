// Status values returned by host code that must not throw across a C ABI
// (ORT kernels, TensorRT plugin methods). Framework-free.
#pragma once

#include <sstream>
#include <string>
#include <utility>

namespace trt_fastops {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message)); }

  // Status::errorf("LayerNorm: input 'Scale' has ", n, " elements, expected ", m)
  template <typename... Args>
  static Status errorf(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return Status(os.str());
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
