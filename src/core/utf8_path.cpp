#include "core/utf8_path.h"

namespace moetier {

std::filesystem::path utf8_path(std::string_view utf8) {
  const std::u8string_view text(reinterpret_cast<const char8_t*>(utf8.data()), utf8.size());
  try {
    return std::filesystem::path(text);
  } catch (const std::exception&) {
    // Windows' UTF-8 -> UTF-16 conversion throws on bytes that are not UTF-8: keep them.
    return std::filesystem::path(utf8);
  }
}

std::string path_utf8(const std::filesystem::path& path) {
  try {
    const std::u8string text = path.u8string();
    return std::string(text.begin(), text.end());
  } catch (const std::exception&) {
    // A Windows name with an unpaired surrogate (not text): the ANSI code page's best try.
    try {
      return path.string();
    } catch (const std::exception&) {
      return {};
    }
  }
}

}  // namespace moetier
