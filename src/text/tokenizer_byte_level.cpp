#include "text/tokenizer_byte_level.h"

#include "text/utf8.h"

namespace moetier::text {

namespace {

bool stands_for_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  char_to_byte_.fill(-1);
  char32_t next_shifted = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = stands_for_itself(b) ? static_cast<char32_t>(b) : next_shifted++;
    byte_to_char_[b] = c;
    char_to_byte_[c] = static_cast<int16_t>(b);
  }
}

std::optional<uint8_t> ByteLevelAlphabet::byte_for_char(char32_t c) const {
  if (c >= char_to_byte_.size() || char_to_byte_[c] < 0) return std::nullopt;
  return static_cast<uint8_t>(char_to_byte_[c]);
}

std::string ByteLevelAlphabet::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) append_utf8(byte_to_char_[static_cast<uint8_t>(ch)], out);
  return out;
}

bool ByteLevelAlphabet::decode(std::string_view text, std::string& out) const {
  bool all_mapped = true;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t c = decode_lenient(text, pos);
    if (const auto b = byte_for_char(c)) {
      out.push_back(static_cast<char>(*b));
    } else {
      out.append(text.substr(start, pos - start));
      all_mapped = false;
    }
  }
  return all_mapped;
}

}  // namespace moetier::text
