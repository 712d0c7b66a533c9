// SHA-256 from the system's cryptography library (Linux: OpenSSL's libcrypto; Windows: CNG,
// BCrypt), fed in pieces of any size. Digests are given as 64 lower-case hex digits.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace moetier::platform {

// One digest in progress. Move-only; one thread at a time.
class Sha256 {
 public:
  // kRuntime when the library cannot give a SHA-256 context.
  static Result<Sha256> start();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256();

  // Adds `bytes` bytes at data (any size, 0 included). kRuntime when the library fails.
  Status update(const void* data, size_t bytes);
  // The digest of everything added, as hex. The object is spent afterwards (start another).
  Result<std::string> finish_hex();

 private:
  struct State;  // the library's context, defined by the implementation
  explicit Sha256(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The digest of `data` in one call.
Result<std::string> sha256_hex(std::string_view data);

}  // namespace moetier::platform
