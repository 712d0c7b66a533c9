#include "gguf/file_sha256.h"

#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "console/progress.h"
#include "platform/file.h"

namespace moetier {

namespace {
struct DigestFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

std::string to_hex(const unsigned char* digest, unsigned int len) {
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}
}  // namespace

Result<std::string> file_sha256(const std::string& path, const Sha256Options& options) {
  ASSIGN_OR_RETURN(const platform::File file, platform::File::open(path));
  file.advise_sequential(0, 0);
  std::unique_ptr<EVP_MD_CTX, DigestFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Status::runtime("SHA-256: OpenSSL digest initialisation failed");
  }
  // 8 MiB reads: large enough for full sequential bandwidth, small enough to stay in cache.
  std::vector<unsigned char> buffer(8u << 20);
  ProgressBar bar({.label = "sha256", .total = file.size(), .enabled = options.progress});
  // The file's bytes as of opening it (one that shrinks meanwhile is a read error).
  for (uint64_t done = 0; done < file.size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), file.size() - done));
    RETURN_IF_ERROR(file.read_exact(done, buffer.data(), n));
    if (EVP_DigestUpdate(ctx.get(), buffer.data(), n) != 1) return Status::runtime("SHA-256: digest update failed");
    done += n;
    bar.update(done);
  }
  bar.finish();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) return Status::runtime("SHA-256: digest finalisation failed");
  return to_hex(digest, len);
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  // One-shot digest of memory: fails only if OpenSSL cannot allocate, an internal error.
  CHECK(EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr) == 1);
  return to_hex(digest, len);
}

}  // namespace moetier
