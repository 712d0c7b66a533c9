// Paths as UTF-8 text. Every path moetier handles (arguments, flags, JSON, file names it
// builds) is UTF-8. A std::filesystem::path made from a std::string reads the string in the
// system's narrow encoding, and path::string() writes that encoding back: on Windows that is
// the ANSI code page, so "模型-ü.gguf" cannot be opened that way (std::ifstream and
// std::filesystem calls taking a std::string convert the same way). These two go through
// char8_t, which both Linux and Windows take as UTF-8 (Linux keeps the bytes as they are).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace moetier {

// The path named by UTF-8 text; use it for every std::ifstream/std::ofstream and
// std::filesystem call. Text that is not valid UTF-8 (possible only on Linux, where file
// names are bytes) is taken as it is.
std::filesystem::path utf8_path(std::string_view utf8);

// A path as UTF-8 text (for messages, JSON and the platform layer's functions), instead of
// path::string().
std::string path_utf8(const std::filesystem::path& path);

}  // namespace moetier
