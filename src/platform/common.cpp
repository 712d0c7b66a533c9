// The OS-independent parts of platform/: names and descriptions shared by every OS's
// implementation (platform/<os>/ holds the rest).
#include <fmt/format.h>

#include "platform/memory.h"
#include "platform/process.h"

namespace moetier::platform {

std::string_view huge_page_mode_name(HugePageMode mode) {
  switch (mode) {
    case HugePageMode::kAlways: return "always";
    case HugePageMode::kMadvise: return "madvise";
    case HugePageMode::kNever: return "never";
    case HugePageMode::kUnavailable: return "unavailable";
  }
  return "?";
}

std::string ProcessExit::describe() const {
  return signal != 0 ? fmt::format("signal {}", signal) : fmt::format("status {}", code);
}

}  // namespace moetier::platform
