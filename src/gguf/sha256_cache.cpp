#include "gguf/sha256_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/utf8_path.h"
#include "gguf/file_sha256.h"
#include "platform/file.h"
#include "platform/process.h"

namespace moetier {

namespace {

// One line of sha256.tsv: "SIZE\tMTIME_NS\tSHA256\tABSOLUTE_PATH" (the path last: it may hold tabs).
struct Entry {
  int64_t size = 0;
  int64_t mtime_ns = 0;
  std::string sha256;
  std::string path;
};

std::vector<Entry> read_entries(const std::string& file) {
  std::vector<Entry> entries;
  std::ifstream in(utf8_path(file));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Entry e;
    if (!(fields >> e.size >> e.mtime_ns >> e.sha256)) continue;  // a damaged line is ignored
    if (fields.get() != '\t' || !std::getline(fields, e.path) || e.sha256.size() != 64) continue;
    entries.push_back(std::move(e));
  }
  return entries;
}

// Rewrites the cache through a temporary file and rename(), so a concurrent reader never
// sees half a file; entries for the same path are replaced.
void write_entries(const std::string& dir, const std::string& file, const std::vector<Entry>& entries) {
  std::error_code ec;
  std::filesystem::create_directories(utf8_path(dir), ec);
  const std::string tmp = fmt::format("{}.{}.tmp", file, platform::process_id());
  {
    std::ofstream out(utf8_path(tmp), std::ios::trunc);
    if (!out) return;
    for (const Entry& e : entries) out << e.size << '\t' << e.mtime_ns << '\t' << e.sha256 << '\t' << e.path << '\n';
    if (!out.flush()) {
      std::filesystem::remove(utf8_path(tmp), ec);
      return;
    }
  }
  // (std::filesystem::rename replaces an existing file on Windows too; std::rename does not.)
  std::filesystem::rename(utf8_path(tmp), utf8_path(file), ec);
  if (ec) std::filesystem::remove(utf8_path(tmp), ec);
}

}  // namespace

std::string default_cache_dir() {
  const std::string user = platform::user_cache_dir();
  return user.empty() ? "" : user + "/moetier";
}

Result<CachedSha256> cached_file_sha256(const std::string& path, const Sha256CacheOptions& options) {
  ASSIGN_OR_RETURN(const platform::FileInfo info, platform::file_info(path));
  std::error_code ec;
  const std::string absolute = path_utf8(std::filesystem::absolute(utf8_path(path), ec).lexically_normal());
  const int64_t size = static_cast<int64_t>(info.size);
  const int64_t mtime_ns = info.modified_ns;
  const std::string cache_file = options.cache_dir.empty() ? "" : options.cache_dir + "/sha256.tsv";
  std::vector<Entry> entries;
  if (!cache_file.empty()) {
    entries = read_entries(cache_file);
    for (const Entry& e : entries) {
      if (e.path == absolute && e.size == size && e.mtime_ns == mtime_ns) return CachedSha256{e.sha256, true};
    }
  }
  if (options.log) {
    std::fprintf(options.log, "moetier bench: computing the SHA-256 of %s (%.1f MiB)%s\n", path.c_str(),
                 static_cast<double>(size) / 1048576.0,
                 cache_file.empty() ? "" : fmt::format("; kept in {} for later runs", cache_file).c_str());
    std::fflush(options.log);
  }
  ASSIGN_OR_RETURN(std::string digest, file_sha256(path, {.progress = options.progress}));
  if (!cache_file.empty()) {
    std::erase_if(entries, [&](const Entry& e) { return e.path == absolute; });
    entries.push_back({.size = size, .mtime_ns = mtime_ns, .sha256 = digest, .path = absolute});
    write_entries(options.cache_dir, cache_file, entries);
  }
  return CachedSha256{std::move(digest), false};
}

}  // namespace moetier
