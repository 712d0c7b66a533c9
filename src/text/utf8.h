// UTF-8 helpers for the tokenizer: strict validation, llama.cpp-compatible lenient decoding,
// encoding, and the "complete prefix" test a streaming detokenizer needs.
//
// Two notions of validity are used on purpose:
//  * strict (RFC 3629): no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
//    This is what PCRE2 in UTF mode accepts and what we promise to emit from the Detokenizer.
//  * lenient (llama.cpp's decoder): a lead byte with the right number of continuation bytes is
//    accepted even when overlong or a surrogate; anything else is one U+FFFD per bad byte.
//    Tokenization follows this so that token ids match llama.cpp on invalid input too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moetier::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Appends the UTF-8 encoding of `cp` (1..4 bytes). Surrogates are encoded like any other
// 3-byte code point (CESU-style bytes ED A0..BF xx); `cp` must be <= kMaxCodePoint.
void append_utf8(char32_t cp, std::string& out);

// True when `bytes` is strictly valid UTF-8 (see above).
bool is_valid_utf8(std::string_view bytes);

// Decodes one strictly valid code point at `bytes[pos]` (pos < size) and advances `pos`;
// nullopt (pos unchanged) for an invalid or cut-short sequence.
std::optional<char32_t> decode_strict(std::string_view bytes, size_t& pos);

// Decodes one code point at `bytes[pos]` the way llama.cpp does and returns it, advancing `pos`.
// Invalid or truncated sequences, and 4-byte forms above U+10FFFF (which llama.cpp cannot
// re-encode), yield U+FFFD and advance by exactly one byte.
char32_t decode_lenient(std::string_view bytes, size_t& pos);

// Length of the longest prefix of `bytes` that does not end inside an incomplete but still
// possibly valid UTF-8 sequence. Bytes that can never become valid (stray continuation bytes,
// 0xC0/0xC1/0xF5..0xFF, a lead followed by a non-continuation) count as "complete" so the caller
// can replace them; only a strict-valid sequence cut short at the end of `bytes` is held back.
size_t complete_utf8_prefix(std::string_view bytes);

// Copies `bytes` to `out`, replacing every maximal invalid subsequence with U+FFFD (the
// WHATWG / Unicode "substitution of maximal subparts" practice), so `out` is strictly valid.
void append_utf8_sanitized(std::string_view bytes, std::string& out);

}  // namespace moetier::text
