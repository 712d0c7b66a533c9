#include "text/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include "text/utf8.h"

namespace moetier::text {

namespace {

// The patterns exactly as the models' tokenizer.json files write them.
// qwen2: Qwen2, Qwen2.5, Qwen3 (llama.cpp also maps "deepseek-r1-qwen" here).
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// qwen35: Qwen3.5 / Qwen3.6; combining marks (\p{M}) count as letters.
constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct KnownPreTokenizer {
  std::string_view name;
  std::string_view pattern;
};
constexpr KnownPreTokenizer kKnown[] = {
    {"qwen2", kQwen2Pattern},
    {"deepseek-r1-qwen", kQwen2Pattern},  // alias, as in llama.cpp
    {"qwen35", kQwen35Pattern},
};

// The case-insensitive contraction group, spelled with explicit letter pairs. Under PCRE2's
// Unicode case folding (?i:'s) would also match "'ſ" (U+017F LONG S); llama.cpp (whose ids we
// must reproduce) only accepts ASCII s/S there.
constexpr std::string_view kCaselessContractions = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
constexpr std::string_view kAsciiContractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

// Unicode White_Space (25 code points). PCRE2's \s under UCP is "Z categories plus HT..CR",
// which misses U+0085 NEXT LINE; Hugging Face (Rust regex) and llama.cpp both include it.
constexpr std::string_view kWhiteSpaceSet =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string pcre2_error_text(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<const char*>(buf));
}

// llama.cpp decodes text leniently (see utf8.h) and re-encodes each code point. PCRE2 needs
// strictly valid UTF-8, so for the regex we substitute U+FFFD for each encoded surrogate: both
// are outside \s, \p{L}, \p{M} and \p{N} and take 3 bytes, so the pieces are the same byte
// ranges in both strings. `for_regex` is left empty when it would equal `reencoded`.
void reencode_lenient(std::string_view text, std::string& reencoded, std::string& for_regex) {
  reencoded.clear();
  for_regex.clear();
  reencoded.reserve(text.size() + 8);
  bool has_surrogate = false;
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t cp = decode_lenient(text, pos);
    has_surrogate |= (cp >= 0xD800 && cp <= 0xDFFF);
    append_utf8(cp, reencoded);
  }
  if (!has_surrogate) return;
  size_t p = 0;
  while (p < reencoded.size()) {
    const char32_t cp = decode_lenient(reencoded, p);
    append_utf8((cp >= 0xD800 && cp <= 0xDFFF) ? kReplacementChar : cp, for_regex);
  }
}

}  // namespace

std::string spell_out_whitespace_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() * 2);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpaceSet;
        } else {
          out += fmt::format("[{}]", kWhiteSpaceSet);
        }
      } else if (e == 'S' && !in_class) {
        out += fmt::format("[^{}]", kWhiteSpaceSet);
      } else {
        out.push_back('\\');  // anything else (including \S inside a class) is kept as written
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

std::string PreTokenizer::supported_names() {
  return "qwen2, qwen35 (and deepseek-r1-qwen, an alias of qwen2)";
}

Result<PreTokenizer> PreTokenizer::create(std::string_view name) {
  const KnownPreTokenizer* known = nullptr;
  for (const auto& k : kKnown) {
    if (k.name == name) known = &k;
  }
  if (known == nullptr) {
    return Status::bad_input(fmt::format("unsupported pre-tokenizer '{}' (tokenizer.ggml.pre); supported: {}", name,
                                         supported_names()));
  }

  PreTokenizer pt;
  pt.name_ = std::string(name);
  pt.source_pattern_ = std::string(known->pattern);
  std::string rewritten = pt.source_pattern_;
  if (const size_t at = rewritten.find(kCaselessContractions); at != std::string::npos) {
    rewritten.replace(at, kCaselessContractions.size(), kAsciiContractions);
  }
  pt.compiled_pattern_ = spell_out_whitespace_classes(rewritten);

  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pt.compiled_pattern_.data()),
                                   pt.compiled_pattern_.size(), PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset,
                                   nullptr);
  if (code == nullptr) {
    // Our own constant patterns: a failure means PCRE2 was built without Unicode support.
    return Status::runtime(fmt::format("pre-tokenizer '{}': PCRE2 cannot compile its regex at offset {}: {}", name,
                                       error_offset, pcre2_error_text(error_code)));
  }
  pt.code_ = std::shared_ptr<void>(code, [](void* p) { pcre2_code_free(static_cast<pcre2_code*>(p)); });
  // JIT is an optimisation only: when the platform or the PCRE2 build lacks it (error
  // PCRE2_ERROR_JIT_BADOPTION), pcre2_match runs the interpreter on the same code.
  pt.jit_enabled_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return pt;
}

void PreTokenizer::split(std::string_view text, PreTokens& out) const {
  out.pieces.clear();
  std::string for_regex;
  if (is_valid_utf8(text)) {
    out.text.assign(text);
  } else {
    reencode_lenient(text, out.text, for_regex);
  }
  const std::string& subject = for_regex.empty() ? out.text : for_regex;
  if (subject.empty()) return;

  auto* code = static_cast<const pcre2_code*>(code_.get());
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  const auto* subject_ptr = reinterpret_cast<PCRE2_SPTR>(subject.data());
  const size_t n = subject.size();

  auto add_piece = [&](size_t begin, size_t end) {
    if (end > begin) out.pieces.push_back({.begin = begin, .size = end - begin});
  };

  size_t pos = 0;
  uint32_t options = PCRE2_NO_UTF_CHECK;  // validated above
  while (pos < n) {
    int rc = pcre2_match(code, subject_ptr, n, pos, options, match.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The JIT's default 32 KiB stack ran out (very long runs): continue with the interpreter,
      // which keeps its backtracking state on the heap.
      options |= PCRE2_NO_JIT;
      continue;
    }
    if (rc < 0) {
      // No match (cannot happen: every character matches some alternative) or a resource
      // limit: keep the rest as one piece rather than dropping text.
      add_piece(pos, n);
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ovector[0];
    const size_t end = ovector[1];
    add_piece(pos, begin);  // an unmatched gap stays a piece of its own (defensive)
    if (end <= begin) {
      // Empty match (impossible with these patterns); step one character to make progress.
      size_t next = begin;
      decode_lenient(subject, next);
      add_piece(begin, next);
      pos = next;
      continue;
    }
    add_piece(begin, end);
    pos = end;
  }
}

}  // namespace moetier::text
