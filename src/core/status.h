// Errors as values. Every boundary that sees user input (files, flags, HTTP) returns
// Status or Result<T>; CHECK is only for internal invariants (a failed CHECK is a bug).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace moetier {

// What kind of failure; maps to the process exit status (see exit_code()).
enum class ErrorKind {
  kBadInput,  // corrupt file, bad flag, bad request: exit status 2
  kRuntime,   // I/O failure, out of memory, device failure: exit status 1
};

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status bad_input(std::string msg) { return Status(ErrorKind::kBadInput, std::move(msg)); }
  static Status runtime(std::string msg) { return Status(ErrorKind::kRuntime, std::move(msg)); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return failed_ ? (kind_ == ErrorKind::kBadInput ? 2 : 1) : 0; }

  // Prefix the message with context, e.g. the file name: "model.gguf: " + message.
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    return Status(kind_, context + ": " + message_);
  }

 private:
  Status(ErrorKind kind, std::string msg) : failed_(true), kind_(kind), message_(std::move(msg)) {}
  bool failed_ = false;
  ErrorKind kind_ = ErrorKind::kRuntime;
  std::string message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}       // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

inline const Status& to_status(const Status& s) { return s; }
template <typename T>
const Status& to_status(const Result<T>& r) { return r.status(); }

[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& msg);
// CHECK without a message: takes no std::string, so a CHECK in a kernel unit compiled with
// ISA flags (src/**/*_avx2.cpp, ...) emits no inline std::string code there. Such code is a
// weak symbol the linker may pick for every caller in the binary, SIGILL on an older CPU;
// tests/isa_units_weak_symbols.sh fails the build's tests on any.
[[noreturn]] void check_failed(const char* file, int line, const char* expr);

}  // namespace moetier

// Internal invariants only; never for conditions a user's input can cause.
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) ::moetier::check_failed(__FILE__, __LINE__, #cond);             \
  } while (0)
#define CHECK_MSG(cond, ...)                                                     \
  do {                                                                           \
    if (!(cond)) ::moetier::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)

// Propagate a failed Status / Result from an expression.
#define RETURN_IF_ERROR(expr)                                        \
  do {                                                               \
    auto _st = (expr);                                               \
    if (!_st.is_ok()) return ::moetier::to_status(_st);              \
  } while (0)

#define MOETIER_CONCAT_INNER(a, b) a##b
#define MOETIER_CONCAT(a, b) MOETIER_CONCAT_INNER(a, b)
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(MOETIER_CONCAT(_res_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.is_ok()) return tmp.status();      \
  lhs = std::move(tmp).value()
