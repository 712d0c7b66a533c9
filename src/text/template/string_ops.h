// Python str operations on UTF-8 strings, as chat templates call them (str.strip, split,
// slicing by code point, ...). Invalid UTF-8 bytes count as one code point each, so no
// input makes these fail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::text::jinja {

// Byte offset of the start of every code point, plus s.size() at the end (size = n_codepoints + 1).
std::vector<size_t> codepoint_offsets(std::string_view s);
size_t codepoint_count(std::string_view s);
std::vector<uint32_t> decode_utf8(std::string_view s);

// Python str.isspace() for one code point.
bool is_python_space(uint32_t cp);

// str.strip / lstrip / rstrip: `chars` absent = Python whitespace, else any of its code points.
std::string python_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// str.split(sep, maxsplit): with no sep, splits on whitespace runs and drops empty parts.
// maxsplit < 0 = no limit. sep must not be empty (the caller reports that error).
std::vector<std::string> python_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);

// str.replace(old, new, count); count < 0 = all. An empty `old` inserts `new` between code points.
std::string python_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);

// Case mappings with Unicode's one-to-one (simple) mappings for Latin, Greek, Cyrillic,
// Armenian and fullwidth letters; other code points, and the few one-to-many mappings Python
// applies (ß -> SS), are left unchanged.
uint32_t simple_upper(uint32_t cp);
uint32_t simple_lower(uint32_t cp);
std::string python_upper(std::string_view s);
std::string python_lower(std::string_view s);
std::string python_title(std::string_view s);       // "hello world" -> "Hello World"
std::string python_capitalize(std::string_view s);  // "hELLO" -> "Hello"

}  // namespace moetier::text::jinja
