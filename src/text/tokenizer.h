// Byte-level BPE tokenizer built from GGUF metadata (tokenizer.ggml.model = "gpt2"), matching
// llama.cpp's token ids. Pipeline of encode():
//   1. special-token split on the raw bytes: CONTROL tokens (only when parse_special) and
//      USER_DEFINED tokens (always) are cut out wherever their exact text occurs, longest
//      text first (tokenizer_special.cpp);
//   2. no normalization;
//   3. pre-tokenizer regex on each remaining fragment (pretokenize.h);
//   4. byte-level BPE by merge rank on each piece (tokenizer_bpe.h);
//   5. BOS / EOS only when the metadata asks for them (add_bos_token / add_eos_token).
//
// A Tokenizer is immutable after from_gguf() and cheap to copy (it shares its tables);
// every method is const and may be called from any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "text/tokenizer_vocab.h"

namespace moetier::text {

struct EncodeOptions {
  // Match CONTROL tokens (<|im_start|> ...) in the text. USER_DEFINED tokens (<think> ...)
  // are matched either way, as llama.cpp and Hugging Face do.
  bool parse_special = true;
  // Add BOS / EOS where the model's metadata asks for them (llama.cpp's add_special).
  bool add_special = true;
};

class Tokenizer {
 public:
  // Errors (kBadInput): tokenizer.ggml.model other than "gpt2", a missing or unsupported
  // tokenizer.ggml.pre (the message lists the supported ones), missing or malformed tokens or
  // merges, merges referring to texts that are not tokens.
  static Result<Tokenizer> from_gguf(const gguf::GgufFile& file);

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const;

  // The bytes of one token, as llama.cpp's llama_token_to_piece (lstrip 0):
  //  * NORMAL (and BYTE) tokens: their byte-level text decoded to bytes; may be part of a
  //    UTF-8 character (use Detokenizer for streaming);
  //  * USER_DEFINED tokens: their text, always;
  //  * CONTROL and UNKNOWN tokens: their text when `render_special`, else nothing. A token
  //    that is both NORMAL and CONTROL (Qwen3's `</s>`) counts as CONTROL;
  //  * UNUSED and undefined tokens, and ids out of range: nothing.
  std::string token_to_piece(int32_t id, bool render_special = false) const;
  void append_piece(int32_t id, bool render_special, std::string& out) const;
  // Concatenated pieces (raw bytes: not necessarily valid UTF-8).
  std::string detokenize(std::span<const int32_t> ids, bool render_special = false) const;

  // Pieces of the pre-tokenizer regex alone (no special-token split), raw bytes. For tests
  // and debugging.
  std::vector<std::string> pretokenize(std::string_view text) const;

  int32_t n_vocab() const;
  std::string_view token_text(int32_t id) const;  // as stored in the GGUF; "" out of range
  TokenType token_type(int32_t id) const;         // as stored; kUndefined out of range
  uint32_t token_attr(int32_t id) const;          // token_attr bits after llama.cpp's fix-ups
  bool is_control(int32_t id) const;
  bool is_eog(int32_t id) const;                   // ends generation
  std::optional<int32_t> find_token(std::string_view text) const;

  const SpecialTokenIds& special_ids() const;
  int32_t bos_id() const { return special_ids().bos; }
  int32_t eos_id() const { return special_ids().eos; }
  int32_t eot_id() const { return special_ids().eot; }
  // End-of-generation ids as llama.cpp computes them (sorted): eos, eot, eom, the FIM
  // pad/repo/sep tokens and every token whose text is a known end marker.
  const std::vector<int32_t>& eog_ids() const;
  bool add_bos() const;
  bool add_eos() const;
  const std::string& pre_tokenizer_name() const;
  bool regex_jit_enabled() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Streaming detokenizer: feed generated ids one at a time, get back text that is always
// complete, valid UTF-8. Bytes of a character split across tokens are held back until the
// character is complete; bytes that can never form a valid character are replaced with
// U+FFFD, and finish() replaces a still-incomplete tail with U+FFFD. One per stream; not
// thread-safe (the Tokenizer it uses is).
class Detokenizer {
 public:
  explicit Detokenizer(Tokenizer tokenizer, bool render_special = false)
      : tokenizer_(std::move(tokenizer)), render_special_(render_special) {}

  // Text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is held back, made valid; the stream can then start over.
  std::string finish();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  std::string pending_;  // at most 3 bytes between calls: an incomplete UTF-8 sequence
};

}  // namespace moetier::text
