// Pre-tokenizer: cuts text into the pieces that BPE then works on, with the regex that the
// model's tokenizer.json names (GGUF key `tokenizer.ggml.pre`). Runs PCRE2 in UTF + UCP mode,
// JIT-compiled when the platform allows, the interpreter otherwise. The compiled pattern is
// immutable and shared; matching allocates its own match data, so one PreTokenizer may be used
// from many threads at once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace moetier::text {

// A piece of pre-tokenized text: byte range [begin, begin + size) of PreTokens::text.
struct PieceSpan {
  size_t begin = 0;
  size_t size = 0;
};

struct PreTokens {
  // The input after llama.cpp's lenient UTF-8 decoding and re-encoding: identical to the
  // input when it is valid UTF-8; otherwise each undecodable byte is U+FFFD and overlong
  // forms are re-encoded canonically (C0 AF -> '/'). Encoded surrogates are kept as is.
  std::string text;
  std::vector<PieceSpan> pieces;  // in order, covering `text` exactly

  std::string_view piece(size_t i) const { return std::string_view(text).substr(pieces[i].begin, pieces[i].size); }
};

class PreTokenizer {
 public:
  // `name` is the value of tokenizer.ggml.pre. Unknown names are kBadInput, listing the
  // supported ones.
  static Result<PreTokenizer> create(std::string_view name);
  // "qwen2, qwen35" plus aliases, for error messages and --help.
  static std::string supported_names();

  // The regex as written in the model's tokenizer.json, and the PCRE2 pattern actually
  // compiled from it (\s spelled out, see pretokenize.cpp).
  const std::string& name() const { return name_; }
  const std::string& source_pattern() const { return source_pattern_; }
  const std::string& compiled_pattern() const { return compiled_pattern_; }
  bool jit_enabled() const { return jit_enabled_; }

  // Splits `text` (any bytes). Clears and fills `out`.
  void split(std::string_view text, PreTokens& out) const;

 private:
  PreTokenizer() = default;

  std::string name_;
  std::string source_pattern_;
  std::string compiled_pattern_;
  std::shared_ptr<void> code_;  // a pcre2_code_8*, immutable after construction (keeps pcre2.h private)
  bool jit_enabled_ = false;
};

// Rewrites `\s` and `\S` (inside and outside character classes) into explicit classes of the
// 25 Unicode White_Space code points. Exposed for tests.
std::string spell_out_whitespace_classes(std::string_view pattern);

}  // namespace moetier::text
