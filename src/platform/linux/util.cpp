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

}  // namespace moetier::platform::linux_impl
