// The OS-independent parts of platform/: names and descriptions shared by every OS's
// implementation (platform/<os>/ holds the rest).
#include <fmt/format.h>

#include "core/format.h"

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

HugePageHelp huge_page_help(OsFamily os) {
  switch (os) {
    case OsFamily::kLinux:
      return {.name = "transparent huge pages",
              .short_name = "THP",
              .setting = "/sys/kernel/mm/transparent_hugepage/enabled",
              .enable = "set THP to madvise to get huge pages",
              .available = "MemAvailable in /proc/meminfo"};
    case OsFamily::kWindows:
      // Large pages are locked pages: Windows gives them only to an account holding
      // SeLockMemoryPrivilege, which takes effect at the next sign-in.
      return {.name = "large pages",
              .short_name = "large pages",
              .setting = "they need the 'Lock pages in memory' right",
              .enable = "to get large pages, grant this account 'Lock pages in memory' (Local Security Policy, "
                        "secpol.msc: Local Policies > User Rights Assignment), then sign out and in",
              .available = "GlobalMemoryStatusEx's available physical memory"};
  }
  return {};
}

HugePageHelp huge_page_help() {
#ifdef _WIN32
  return huge_page_help(OsFamily::kWindows);
#else
  return huge_page_help(OsFamily::kLinux);
#endif
}

std::string windows_lock_error_message(const WindowsLockFailure& f) {
  if (f.working_set_refused) {
    return fmt::format(
        "cannot lock {} in RAM: Windows refused to raise this process's minimum working set to {} (locked pages must "
        "fit in it): {}; {}",
        format_bytes(f.bytes), format_bytes(f.min_working_set), f.reason,
        f.privilege_missing
            ? "this account lacks the 'Increase a process working set' right (SeIncreaseWorkingSetPrivilege): grant it "
              "in Local Security Policy (secpol.msc: Local Policies > User Rights Assignment), then sign out and in"
            : "free memory (close programs) or keep fewer weights on the CPU");
  }
  return fmt::format(
      "cannot lock {} in RAM: VirtualLock failed with the minimum working set raised to {} (maximum {}): {}; {}",
      format_bytes(f.bytes), format_bytes(f.min_working_set), format_bytes(f.max_working_set), f.reason,
      f.privilege_missing ? "this account lacks the 'Lock pages in memory' right (SeLockMemoryPrivilege): grant it in "
                            "Local Security Policy (secpol.msc: Local Policies > User Rights Assignment), then sign "
                            "out and in"
                          : "the locked pages must fit in physical memory and the working-set quota: free memory "
                            "(close programs) or keep fewer weights on the CPU");
}

std::string ProcessExit::describe() const {
  return signal != 0 ? fmt::format("signal {}", signal) : fmt::format("status {}", code);
}

}  // namespace moetier::platform
