#include "platform/linux/util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace moetier::platform::linux_impl {

std::string read_text_file(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  // /proc and /sys files report size 0: read until the end.
  std::string text;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

std::string cache_dir_from(const char* xdg_cache_home, const char* home) {
  if (xdg_cache_home != nullptr && xdg_cache_home[0] == '/') return xdg_cache_home;
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache";
  return "";
}

std::vector<std::string> path_folders(std::string_view path) {
  std::vector<std::string> out;
  for (;;) {
    const size_t colon = path.find(':');
    out.emplace_back(path.substr(0, colon));
    if (colon == std::string_view::npos) return out;
    path.remove_prefix(colon + 1);
  }
}

}  // namespace moetier::platform::linux_impl
