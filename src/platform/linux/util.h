// Small helpers of the Linux implementation (platform/linux/*.cpp and the platform tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace moetier::platform::linux_impl {

// The text of an errno value, e.g. "No such file or directory" (thread-safe, unlike strerror).
inline std::string errno_text(int e) { return std::system_category().message(e); }

// A small text file's contents (/proc, /sys); "" when it cannot be read.
std::string read_text_file(const char* path);

// The user's cache folder from the values of $XDG_CACHE_HOME and $HOME (nullptr when
// unset): the first when absolute (the XDG base directory spec ignores a relative one),
// else $HOME/.cache, else "".
std::string cache_dir_from(const char* xdg_cache_home, const char* home);

// The folders of a PATH value, in order ("" for an empty entry, which means ".").
std::vector<std::string> path_folders(std::string_view path);

// [addr, addr + bytes) widened to whole pages of `page` bytes (a power of two).
struct PageRange {
  uintptr_t begin = 0;
  size_t bytes = 0;
  void* ptr() const { return reinterpret_cast<void*>(begin); }
};
inline PageRange widen_to_pages(const void* addr, size_t bytes, size_t page) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t begin = a & ~static_cast<uintptr_t>(page - 1);
  const uintptr_t end = (a + bytes + page - 1) & ~static_cast<uintptr_t>(page - 1);
  return {.begin = begin, .bytes = static_cast<size_t>(end - begin)};
}

}  // namespace moetier::platform::linux_impl
