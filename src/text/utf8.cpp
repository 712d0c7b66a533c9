#include "text/utf8.h"

namespace moetier::text {

namespace {

enum class SeqStatus { kValid, kIncomplete, kInvalid };

struct SeqScan {
  SeqStatus status;
  size_t length;  // kValid: bytes of the sequence; kInvalid: bytes of the maximal invalid subpart
};

// Classifies the sequence starting at bytes[pos] against Unicode's table of well-formed
// UTF-8 byte sequences (The Unicode Standard, table 3-7). The second byte's allowed range
// depends on the lead byte; this is what excludes overlongs, surrogates and > U+10FFFF.
SeqScan scan_strict(std::string_view bytes, size_t pos) {
  const auto lead = static_cast<uint8_t>(bytes[pos]);
  if (lead < 0x80) return {SeqStatus::kValid, 1};
  size_t need = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {SeqStatus::kInvalid, 1};  // continuation byte, C0, C1, F5..FF
  }
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= bytes.size()) return {SeqStatus::kIncomplete, i};
    const auto b = static_cast<uint8_t>(bytes[pos + i]);
    const uint8_t min = (i == 1) ? lo : uint8_t{0x80};
    const uint8_t max = (i == 1) ? hi : uint8_t{0xBF};
    if (b < min || b > max) return {SeqStatus::kInvalid, i};
  }
  return {SeqStatus::kValid, need};
}

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII fast path: most text is ASCII, skip it 1 byte at a time without the table.
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const SeqScan s = scan_strict(bytes, pos);
    if (s.status != SeqStatus::kValid) return false;
    pos += s.length;
  }
  return true;
}

std::optional<char32_t> decode_strict(std::string_view bytes, size_t& pos) {
  const SeqScan s = scan_strict(bytes, pos);
  if (s.status != SeqStatus::kValid) return std::nullopt;
  const auto lead = static_cast<uint8_t>(bytes[pos]);
  static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t cp = lead & kLeadMask[s.length];
  for (size_t i = 1; i < s.length; ++i) cp = (cp << 6) | (static_cast<uint8_t>(bytes[pos + i]) & 0x3F);
  pos += s.length;
  return cp;
}

char32_t decode_lenient(std::string_view bytes, size_t& pos) {
  const auto lead = static_cast<uint8_t>(bytes[pos]);
  if (lead < 0x80) {
    pos += 1;
    return lead;
  }
  // The number of leading 1 bits decides the length; only the continuation bytes' top two
  // bits are checked (llama.cpp's rule), so overlongs and surrogates decode to their value.
  size_t need = 0;
  char32_t cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    need = 2;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    need = 3;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    need = 4;
    cp = lead & 0x07;
  } else {
    pos += 1;  // continuation byte as lead, or F8..FF
    return kReplacementChar;
  }
  if (pos + need > bytes.size()) {
    pos += 1;
    return kReplacementChar;
  }
  for (size_t i = 1; i < need; ++i) {
    const auto b = static_cast<uint8_t>(bytes[pos + i]);
    if (!is_continuation(b)) {
      pos += 1;
      return kReplacementChar;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp > kMaxCodePoint) {
    // llama.cpp would fail to re-encode this; we treat the lead byte as invalid instead.
    pos += 1;
    return kReplacementChar;
  }
  pos += need;
  return cp;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // An incomplete sequence is at most 3 bytes, so only the tail needs looking at: find the
  // last lead-ish byte among the final 3 and check whether it starts a truncated sequence.
  const size_t n = bytes.size();
  const size_t first = n >= 3 ? n - 3 : 0;
  for (size_t start = n; start-- > first;) {
    if (is_continuation(static_cast<uint8_t>(bytes[start]))) continue;
    const SeqScan s = scan_strict(bytes, start);
    return s.status == SeqStatus::kIncomplete ? start : n;
  }
  return n;
}

void append_utf8_sanitized(std::string_view bytes, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SeqScan s = scan_strict(bytes, pos);
    if (s.status == SeqStatus::kValid) {
      out.append(bytes.substr(pos, s.length));
    } else {
      append_utf8(kReplacementChar, out);  // a truncated tail is one maximal subpart too
    }
    pos += s.length;
  }
}

}  // namespace moetier::text
