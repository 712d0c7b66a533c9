// SHA-256 of a model file remembered across runs: bench records cite the file's digest,
// and hashing a 20 GB model costs a minute, so digests are kept in a small cache file keyed
// by the file's absolute path, size and modification time (any change of those rehashes).
#pragma once

#include <cstdio>
#include <string>

#include "core/status.h"

namespace moetier {

// moetier's folder in the user's cache folder (platform::user_cache_dir(); on Linux
// $XDG_CACHE_HOME/moetier or $HOME/.cache/moetier), "" (no cache) when there is none.
std::string default_cache_dir();

struct Sha256CacheOptions {
  std::string cache_dir;        // "" = no cache: always hash
  std::FILE* log = nullptr;     // a line here before hashing (bench: stderr); nullptr = quiet
  bool progress = true;         // progress bar while hashing (drawn only on a terminal)
};

struct CachedSha256 {
  std::string sha256;        // lower-case hex
  bool from_cache = false;   // true: taken from the cache file, not computed
};

// The digest of `path`, from `cache_dir`/sha256.tsv when an entry matches the file's path,
// size and mtime, else computed and stored there. A cache that cannot be read or written is
// skipped (the digest is still returned); errors reading the file itself are returned.
Result<CachedSha256> cached_file_sha256(const std::string& path, const Sha256CacheOptions& options);

}  // namespace moetier
