// Small helpers of the Windows implementation (platform/windows/*.cpp): UTF-8 <-> UTF-16
// for the wide-character APIs, and the text of a Win32 error code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::platform::windows_impl {

// UTF-8 to UTF-16 (MultiByteToWideChar); invalid sequences become U+FFFD.
std::wstring widen(std::string_view utf8);
// UTF-16 to UTF-8 (WideCharToMultiByte); unpaired surrogates become U+FFFD.
std::string narrow(std::wstring_view wide);

// The system's text of an error code (FormatMessageW), e.g. "The system cannot find the file
// specified.", without the trailing period and line break; "error N" when it has none.
std::string error_text(unsigned long code);
// error_text(GetLastError()).
std::string last_error_text();

// An environment variable's value as UTF-8 (found = false when unset).
struct EnvValue {
  bool found = false;
  std::string value;
};
EnvValue get_env(const wchar_t* name);

// The folders of a PATH value (';'-separated; empty entries dropped).
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

}  // namespace moetier::platform::windows_impl
