// Streaming detokenizer (declared in tokenizer.h).
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace moetier::text {

std::string Detokenizer::push(int32_t id) {
  tokenizer_.append_piece(id, render_special_, pending_);
  // Everything up to a possibly-incomplete trailing sequence can go out now; invalid bytes in
  // it are replaced so the caller only ever sees valid UTF-8.
  const size_t ready = complete_utf8_prefix(pending_);
  std::string out;
  append_utf8_sanitized(std::string_view(pending_).substr(0, ready), out);
  pending_.erase(0, ready);
  return out;
}

std::string Detokenizer::finish() {
  std::string out;
  append_utf8_sanitized(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace moetier::text
