// GPT-2 byte-level alphabet: every byte value has a printable stand-in character, so BPE
// vocabularies can store arbitrary bytes as text. Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF
// stand for themselves (the code point of the same value); the remaining 68 bytes
// (0x00-0x20, 0x7F-0xA0, 0xAD), in increasing order, map to U+0100, U+0101, ... U+0143.
// Example: space 0x20 -> U+0120 'Ġ', LF 0x0A -> U+010A 'Ċ'.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moetier::text {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // The stand-in character for byte `b`.
  char32_t char_for_byte(uint8_t b) const { return byte_to_char_[b]; }
  // The byte a stand-in character represents; nullopt for characters outside the alphabet.
  std::optional<uint8_t> byte_for_char(char32_t c) const;

  // Bytes -> byte-level text (each byte becomes its stand-in, UTF-8 encoded).
  std::string encode(std::string_view bytes) const;
  // Byte-level text -> bytes. A character outside the alphabet is copied through as its own
  // UTF-8 bytes (llama.cpp writes a "[UNK_BYTE_...]" marker instead; for well-formed
  // byte-level vocabularies the case never arises). Returns false if that happened.
  bool decode(std::string_view text, std::string& out) const;

 private:
  std::array<char32_t, 256> byte_to_char_{};
  std::array<int16_t, 0x144> char_to_byte_{};  // indexed by code point < U+0144; -1 = none
};

}  // namespace moetier::text
