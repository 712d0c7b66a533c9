// platform/sha256.h on Windows: CNG's hash interface (BCrypt, bcrypt.dll).
#include "platform/sha256.h"

#include <windows.h>
#include <bcrypt.h>

#include <algorithm>

#include <fmt/format.h>

namespace moetier::platform {

namespace {
constexpr ULONG kDigestBytes = 32;
bool ok(NTSTATUS st) { return st >= 0; }
}  // namespace

struct Sha256::State {
  BCRYPT_ALG_HANDLE algorithm = nullptr;
  BCRYPT_HASH_HANDLE hash = nullptr;
  ~State() {
    if (hash != nullptr) ::BCryptDestroyHash(hash);
    if (algorithm != nullptr) ::BCryptCloseAlgorithmProvider(algorithm, 0);
  }
};

Sha256::Sha256(std::unique_ptr<State> state) : state_(std::move(state)) {}
Sha256::Sha256(Sha256&& other) noexcept = default;
Sha256& Sha256::operator=(Sha256&& other) noexcept = default;
Sha256::~Sha256() = default;

Result<Sha256> Sha256::start() {
  auto state = std::make_unique<State>();
  NTSTATUS st = ::BCryptOpenAlgorithmProvider(&state->algorithm, BCRYPT_SHA256_ALGORITHM, nullptr, 0);
  // The hash object's memory is allocated by CNG (null buffer, Windows 7 and later).
  if (ok(st)) st = ::BCryptCreateHash(state->algorithm, &state->hash, nullptr, 0, nullptr, 0, 0);
  if (!ok(st)) {
    return Status::runtime(fmt::format("SHA-256: CNG hash initialisation failed (NTSTATUS 0x{:08x})",
                                       static_cast<uint32_t>(st)));
  }
  return Sha256(std::move(state));
}

Status Sha256::update(const void* data, size_t bytes) {
  if (state_ == nullptr) return Status::runtime("SHA-256: digest already finished");
  auto* p = static_cast<UCHAR*>(const_cast<void*>(data));
  // BCryptHashData takes a ULONG count: feed large inputs in 1 GiB pieces.
  while (bytes > 0) {
    const ULONG n = static_cast<ULONG>(std::min<size_t>(bytes, size_t{1} << 30));
    if (!ok(::BCryptHashData(state_->hash, p, n, 0))) return Status::runtime("SHA-256: digest update failed");
    p += n;
    bytes -= n;
  }
  return Status::ok();
}

Result<std::string> Sha256::finish_hex() {
  if (state_ == nullptr) return Status::runtime("SHA-256: digest already finished");
  UCHAR digest[kDigestBytes];
  const NTSTATUS st = ::BCryptFinishHash(state_->hash, digest, kDigestBytes, 0);
  state_.reset();
  if (!ok(st)) return Status::runtime("SHA-256: digest finalisation failed");
  std::string hex;
  hex.reserve(2 * kDigestBytes);
  for (const UCHAR b : digest) hex += fmt::format("{:02x}", b);
  return hex;
}

Result<std::string> sha256_hex(std::string_view data) {
  ASSIGN_OR_RETURN(Sha256 digest, Sha256::start());
  RETURN_IF_ERROR(digest.update(data.data(), data.size()));
  return digest.finish_hex();
}

}  // namespace moetier::platform
