// A tokenizer's vocabulary as the grammar matcher sees it: each token's bytes and whether it
// ends generation, plus a byte trie over all pieces so that a mask over 150K-250K tokens walks
// each shared prefix once (GrammarMatcher::mask_logits).
//
// Build once per tokenizer; immutable afterwards, so one instance (e.g. behind a
// shared_ptr<const TokenVocabulary>) can serve any number of matchers on any threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::text {
class Tokenizer;
}

namespace moetier::grammar {

class TokenVocabulary {
 public:
  // One node of the trie, stored in preorder: a node's subtree is [its index, subtree_end).
  struct TrieNode {
    uint32_t subtree_end = 0;
    uint32_t tokens_begin = 0;  // tokens whose piece ends here: trie_tokens()[begin, end)
    uint32_t tokens_end = 0;
    uint32_t depth = 0;         // piece length in bytes up to and including `byte`; >= 1
    uint8_t byte = 0;
  };

  // pieces[id] = the bytes token id stands for. Tokens in `eog_ids` end generation; their
  // pieces are ignored. Tokens with an empty piece can never be produced under a grammar.
  explicit TokenVocabulary(std::vector<std::string> pieces, const std::vector<int32_t>& eog_ids = {});
  // From a tokenizer: piece = token_to_piece(id, render_special = false), so CONTROL tokens
  // (<|im_start|> ...) have an empty piece and are never allowed; USER_DEFINED tokens
  // (<think>) are matched by their text; is_eog() as the tokenizer says.
  explicit TokenVocabulary(const text::Tokenizer& tokenizer);

  int32_t size() const { return static_cast<int32_t>(offsets_.size()) - 1; }
  std::string_view piece(int32_t id) const;  // "" out of range
  bool is_eog(int32_t id) const { return id >= 0 && id < size() && eog_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

  std::span<const TrieNode> trie() const { return trie_; }
  std::span<const int32_t> trie_tokens() const { return trie_tokens_; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  void build(std::vector<std::string> pieces, const std::vector<int32_t>& eog_ids);

  std::string bytes_;              // all pieces, concatenated
  std::vector<uint32_t> offsets_;  // piece(id) = bytes_[offsets_[id], offsets_[id + 1])
  std::vector<bool> eog_;
  std::vector<int32_t> eog_ids_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  uint32_t max_depth_ = 0;
};

}  // namespace moetier::grammar
