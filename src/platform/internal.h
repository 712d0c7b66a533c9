// Helpers shared by the OS implementations of this folder (platform/<os>/); not for callers
// outside it. Header-only, so the folder needs nothing from core/ but core/status.h.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace moetier::platform::internal {

// "1.50 GiB", "312.0 MiB", "12.3 KiB", "17 B": the same text as core/progress.h's
// format_bytes, which this folder cannot use (core's progress bar depends on it).
inline std::string byte_text(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / (1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / (1ull << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace moetier::platform::internal
