// platform/sha256.h on Linux: OpenSSL's EVP digest interface (libcrypto).
#include "platform/sha256.h"

#include <openssl/evp.h>

#include <fmt/format.h>

namespace moetier::platform {

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  ~State() {
    if (ctx != nullptr) EVP_MD_CTX_free(ctx);
  }
};

Sha256::Sha256(std::unique_ptr<State> state) : state_(std::move(state)) {}
Sha256::Sha256(Sha256&& other) noexcept = default;
Sha256& Sha256::operator=(Sha256&& other) noexcept = default;
Sha256::~Sha256() = default;

Result<Sha256> Sha256::start() {
  auto state = std::make_unique<State>();
  state->ctx = EVP_MD_CTX_new();
  if (state->ctx == nullptr || EVP_DigestInit_ex(state->ctx, EVP_sha256(), nullptr) != 1) {
    return Status::runtime("SHA-256: OpenSSL digest initialisation failed");
  }
  return Sha256(std::move(state));
}

Status Sha256::update(const void* data, size_t bytes) {
  if (state_ == nullptr || state_->ctx == nullptr) return Status::runtime("SHA-256: digest already finished");
  if (bytes == 0) return Status::ok();
  if (EVP_DigestUpdate(state_->ctx, data, bytes) != 1) return Status::runtime("SHA-256: digest update failed");
  return Status::ok();
}

Result<std::string> Sha256::finish_hex() {
  if (state_ == nullptr || state_->ctx == nullptr) return Status::runtime("SHA-256: digest already finished");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const int rc = EVP_DigestFinal_ex(state_->ctx, digest, &len);
  state_.reset();
  if (rc != 1) return Status::runtime("SHA-256: digest finalisation failed");
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

Result<std::string> sha256_hex(std::string_view data) {
  ASSIGN_OR_RETURN(Sha256 digest, Sha256::start());
  RETURN_IF_ERROR(digest.update(data.data(), data.size()));
  return digest.finish_hex();
}

}  // namespace moetier::platform
