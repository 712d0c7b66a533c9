// SHA-256 of a whole file, streamed in large sequential reads (never held in memory), with
// an optional progress bar on stderr (`inspect --sha256`, bench's provenance); and of bytes
// in memory (the evaluation suites' item digests).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace moetier {

struct Sha256Options {
  bool progress = true;  // progress bar (drawn only when stderr is a terminal)
};

// Lower-case hex digest. kBadInput if the file cannot be opened, kRuntime on read errors.
Result<std::string> file_sha256(const std::string& path, const Sha256Options& options = {});

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace moetier
