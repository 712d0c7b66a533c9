#include "core/format.h"

#include <fmt/format.h>

namespace moetier {

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / (1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / (1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / (1ull << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace moetier
