#include "text/template/string_ops.h"
#include "text/utf8.h"

namespace moetier::text::jinja {

namespace {

// Length of the UTF-8 sequence starting with `lead`; stray continuation bytes count as 1.
size_t sequence_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Decodes the code point at byte offset `pos`, advancing `pos`.
uint32_t decode_at(std::string_view s, size_t& pos) {
  const unsigned char lead = static_cast<unsigned char>(s[pos]);
  size_t len = sequence_length(lead);
  if (pos + len > s.size()) len = 1;
  uint32_t cp = lead;
  if (len == 2) cp = lead & 0x1F;
  if (len == 3) cp = lead & 0x0F;
  if (len == 4) cp = lead & 0x07;
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + i]) & 0x3F);
  pos += len;
  return cp;
}

}  // namespace

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> cps;
  for (size_t pos = 0; pos < s.size();) cps.push_back(decode_at(s, pos));
  return cps;
}

std::vector<size_t> codepoint_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  size_t pos = 0;
  while (pos < s.size()) {
    offsets.push_back(pos);
    decode_at(s, pos);
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t codepoint_count(std::string_view s) { return codepoint_offsets(s).size() - 1; }

bool is_python_space(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20)) return true;
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string python_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<uint32_t> strip_set = chars ? decode_utf8(*chars) : std::vector<uint32_t>{};
  auto strippable = [&](uint32_t cp) {
    if (!chars) return is_python_space(cp);
    for (uint32_t c : strip_set) {
      if (c == cp) return true;
    }
    return false;
  };
  const std::vector<size_t> offsets = codepoint_offsets(s);
  size_t first = 0, last = offsets.size() - 1;  // code point range [first, last)
  auto cp_at = [&](size_t i) {
    size_t pos = offsets[i];
    return decode_at(s, pos);
  };
  if (left) {
    while (first < last && strippable(cp_at(first))) ++first;
  }
  if (right) {
    while (last > first && strippable(cp_at(last - 1))) --last;
  }
  return std::string(s.substr(offsets[first], offsets[last] - offsets[first]));
}

std::vector<std::string> python_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t hit = s.find(*sep, start);
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, hit - start));
      start = hit + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  // Whitespace runs separate parts; leading/trailing whitespace yields no empty parts.
  size_t pos = 0;
  auto skip_space = [&] {
    while (pos < s.size()) {
      size_t next = pos;
      if (!is_python_space(decode_at(s, next))) break;
      pos = next;
    }
  };
  skip_space();
  while (pos < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(pos));  // the remainder is kept as is, trailing whitespace included
      return parts;
    }
    const size_t start = pos;
    while (pos < s.size()) {
      size_t next = pos;
      if (is_python_space(decode_at(s, next))) break;
      pos = next;
    }
    parts.emplace_back(s.substr(start, pos - start));
    skip_space();
  }
  return parts;
}

std::string python_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    const std::vector<size_t> offsets = codepoint_offsets(s);
    int64_t done = 0;
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old_text, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += new_text;
    start = hit + old_text.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

namespace {

// Blocks where upper and lower case alternate: `upper_is_even` tells which of a pair is upper.
struct PairRange {
  uint32_t first, last;
  bool upper_is_even;
};
constexpr PairRange kPairRanges[] = {
    {0x0100, 0x012F, true}, {0x0132, 0x0137, true}, {0x0139, 0x0148, false}, {0x014A, 0x0177, true},
    {0x0179, 0x017E, false}, {0x0460, 0x0481, true}, {0x048A, 0x04BF, true}, {0x1E00, 0x1E95, true},
    {0x1EA0, 0x1EFF, true},
};

// Blocks where the lower-case letter is the upper-case one plus `offset`.
struct OffsetRange {
  uint32_t upper_first, upper_last;
  uint32_t offset;
};
constexpr OffsetRange kOffsetRanges[] = {
    {'A', 'Z', 0x20},       {0x00C0, 0x00D6, 0x20}, {0x00D8, 0x00DE, 0x20}, {0x0391, 0x03A1, 0x20},
    {0x03A3, 0x03AB, 0x20}, {0x0388, 0x038A, 0x25}, {0x038E, 0x038F, 0x3F}, {0x0410, 0x042F, 0x20},
    {0x0400, 0x040F, 0x50}, {0x0531, 0x0556, 0x30}, {0xFF21, 0xFF3A, 0x20},
};

}  // namespace

uint32_t simple_upper(uint32_t cp) {
  for (const OffsetRange& r : kOffsetRanges) {
    if (cp >= r.upper_first + r.offset && cp <= r.upper_last + r.offset) return cp - r.offset;
  }
  for (const PairRange& r : kPairRanges) {
    if (cp >= r.first && cp <= r.last && ((cp % 2 == 0) != r.upper_is_even)) return cp - 1;
  }
  switch (cp) {
    case 0x00FF: return 0x0178;
    case 0x03AC: return 0x0386;
    case 0x03CC: return 0x038C;
    case 0x03C2: return 0x03A3;  // final sigma
    default: return cp;
  }
}

uint32_t simple_lower(uint32_t cp) {
  for (const OffsetRange& r : kOffsetRanges) {
    if (cp >= r.upper_first && cp <= r.upper_last) return cp + r.offset;
  }
  for (const PairRange& r : kPairRanges) {
    if (cp >= r.first && cp <= r.last && ((cp % 2 == 0) == r.upper_is_even)) return cp + 1;
  }
  switch (cp) {
    case 0x0178: return 0x00FF;
    case 0x0386: return 0x03AC;
    case 0x038C: return 0x03CC;
    default: return cp;
  }
}

namespace {

bool is_cased(uint32_t cp) { return simple_upper(cp) != cp || simple_lower(cp) != cp; }

template <typename Fn>
std::string map_codepoints(std::string_view s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t start = pos;
    const uint32_t cp = decode_at(s, pos);
    const uint32_t mapped = fn(cp);
    if (mapped == cp) out.append(s.substr(start, pos - start));  // keeps invalid bytes as they were
    else text::append_utf8(static_cast<char32_t>(mapped), out);
  }
  return out;
}

}  // namespace

std::string python_upper(std::string_view s) { return map_codepoints(s, simple_upper); }
std::string python_lower(std::string_view s) { return map_codepoints(s, simple_lower); }

std::string python_title(std::string_view s) {
  bool prev_cased = false;
  return map_codepoints(s, [&](uint32_t cp) {
    const bool cased = is_cased(cp);
    const uint32_t mapped = cased ? (prev_cased ? simple_lower(cp) : simple_upper(cp)) : cp;
    prev_cased = cased;
    return mapped;
  });
}

std::string python_capitalize(std::string_view s) {
  bool first = true;
  return map_codepoints(s, [&](uint32_t cp) {
    const uint32_t mapped = first ? simple_upper(cp) : simple_lower(cp);
    first = false;
    return mapped;
  });
}

}  // namespace moetier::text::jinja
