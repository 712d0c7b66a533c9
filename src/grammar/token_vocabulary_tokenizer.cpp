// TokenVocabulary from a moetier Tokenizer (its own file so the grammar code builds without
// the tokenizer).
#include "grammar/token_vocabulary.h"
#include "text/tokenizer.h"

namespace moetier::grammar {

namespace {

std::vector<std::string> pieces_of(const text::Tokenizer& tokenizer) {
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.n_vocab()));
  for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
    if (!tokenizer.is_control(id)) pieces[static_cast<size_t>(id)] = tokenizer.token_to_piece(id, false);
  }
  return pieces;
}

}  // namespace

TokenVocabulary::TokenVocabulary(const text::Tokenizer& tokenizer) {
  build(pieces_of(tokenizer), tokenizer.eog_ids());
}

}  // namespace moetier::grammar
