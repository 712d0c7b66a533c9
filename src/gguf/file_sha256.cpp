#include "gguf/file_sha256.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <openssl/evp.h>

#include "console/progress.h"

namespace moetier {

namespace {
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
struct DigestFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
}  // namespace

Result<std::string> file_sha256(const std::string& path, const Sha256Options& options) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return Status::bad_input(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fileno(file.get()), &st) != 0) {
    return Status::runtime(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  std::unique_ptr<EVP_MD_CTX, DigestFree> ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    return Status::runtime("SHA-256: OpenSSL digest initialisation failed");
  }
  // 8 MiB reads: large enough for full sequential bandwidth, small enough to stay in cache.
  std::vector<unsigned char> buffer(8u << 20);
  ProgressBar bar({.label = "sha256", .total = static_cast<uint64_t>(st.st_size), .enabled = options.progress});
  uint64_t done = 0;
  for (;;) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    if (n > 0) {
      if (EVP_DigestUpdate(ctx.get(), buffer.data(), n) != 1) return Status::runtime("SHA-256: digest update failed");
      done += n;
      bar.update(done);
    }
    if (n < buffer.size()) {
      if (std::ferror(file.get())) {
        return Status::runtime(fmt::format("{}: read error at byte {}: {}", path, done, std::strerror(errno)));
      }
      break;
    }
  }
  bar.finish();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1) return Status::runtime("SHA-256: digest finalisation failed");
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace moetier
