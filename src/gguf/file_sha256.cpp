#include "gguf/file_sha256.h"

#include <algorithm>
#include <vector>

#include "console/progress.h"
#include "platform/file.h"
#include "platform/sha256.h"

namespace moetier {

Result<std::string> file_sha256(const std::string& path, const Sha256Options& options) {
  ASSIGN_OR_RETURN(const platform::File file, platform::File::open(path));
  file.advise_sequential(0, 0);
  ASSIGN_OR_RETURN(platform::Sha256 digest, platform::Sha256::start());
  // 8 MiB reads: large enough for full sequential bandwidth, small enough to stay in cache.
  std::vector<unsigned char> buffer(8u << 20);
  ProgressBar bar({.label = "sha256", .total = file.size(), .enabled = options.progress});
  // The file's bytes as of opening it (one that shrinks meanwhile is a read error).
  for (uint64_t done = 0; done < file.size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), file.size() - done));
    RETURN_IF_ERROR(file.read_exact(done, buffer.data(), n));
    RETURN_IF_ERROR(digest.update(buffer.data(), n));
    done += n;
    bar.update(done);
  }
  bar.finish();
  return digest.finish_hex();
}

std::string sha256_hex(std::string_view data) {
  Result<std::string> digest = platform::sha256_hex(data);
  // Fails only when the system library cannot give a context (out of memory): a bug or a
  // broken system, not bad input.
  CHECK_MSG(digest.is_ok(), "SHA-256: {}", digest.status().message());
  return std::move(digest).value();
}

}  // namespace moetier
