#include "bench/memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace moetier::bench {

std::optional<int64_t> status_field_bytes(std::string_view text, std::string_view field) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    if (line.size() > field.size() && line.substr(0, field.size()) == field && line[field.size()] == ':') {
      long long kb = 0;
      // The kernel always writes the value in kB (1024 bytes).
      if (std::sscanf(std::string(line.substr(field.size() + 1)).c_str(), "%lld", &kb) == 1) {
        return static_cast<int64_t>(kb) * 1024;
      }
      return std::nullopt;
    }
    pos = end + 1;
  }
  return std::nullopt;
}

namespace {
std::string read_status() {
  std::ifstream in("/proc/self/status");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::optional<int64_t> current_rss_bytes() { return status_field_bytes(read_status(), "VmRSS"); }
std::optional<int64_t> peak_rss_bytes() { return status_field_bytes(read_status(), "VmHWM"); }

bool reset_peak_rss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

}  // namespace moetier::bench
