// GrammarMatcher: byte acceptance through the lazy DFA, and the mask as one preorder walk of
// the vocabulary trie that skips every subtree whose prefix the grammar rejects.
#include "grammar/grammar_matcher.h"

#include <cmath>

namespace moetier::grammar {

using StateId = GrammarAutomaton::StateId;

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits)
    : grammar_(std::move(grammar)), automaton_(std::make_unique<GrammarAutomaton>(grammar_, limits)) {
  state_ = automaton_->initial_state();
}

Result<GrammarMatcher> GrammarMatcher::create(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits) {
  if (grammar == nullptr) return Status::bad_input("grammar matcher: no grammar");
  return GrammarMatcher(std::move(grammar), limits);
}

void GrammarMatcher::compact_if_needed() const {
  if (automaton_->over_limits()) state_ = automaton_->compact(state_);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  compact_if_needed();
  StateId s = state_;
  for (const char c : bytes) {
    s = automaton_->next(s, static_cast<uint8_t>(c));
    if (s == GrammarAutomaton::kDead) return false;
  }
  state_ = s;
  return true;
}

bool GrammarMatcher::accept_token(int32_t id, const TokenVocabulary& vocab) {
  if (vocab.is_eog(id)) return can_end();
  const std::string_view piece = vocab.piece(id);
  return !piece.empty() && accept_bytes(piece);
}

void GrammarMatcher::reset() {
  state_ = automaton_->initial_state();
  compact_if_needed();
}

void GrammarMatcher::fill_allowed(const TokenVocabulary& vocab, std::vector<uint8_t>& allowed) const {
  compact_if_needed();
  allowed.assign(static_cast<size_t>(vocab.size()), 0);
  if (can_end()) {
    for (const int32_t id : vocab.eog_ids()) allowed[static_cast<size_t>(id)] = 1;
  }
  if (is_dead()) return;
  const auto trie = vocab.trie();
  const auto tokens = vocab.trie_tokens();
  // walk_states_[d]: the state after the first d bytes of the current trie path.
  walk_states_.resize(vocab.max_depth() + 1);
  walk_states_[0] = state_;
  GrammarAutomaton& dfa = *automaton_;
  for (size_t i = 0; i < trie.size();) {
    const TokenVocabulary::TrieNode& node = trie[i];
    const StateId s = dfa.next(walk_states_[node.depth - 1], node.byte);
    if (s == GrammarAutomaton::kDead) {
      i = node.subtree_end;  // no piece with this prefix can continue the grammar
      continue;
    }
    walk_states_[node.depth] = s;
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) allowed[static_cast<size_t>(tokens[t])] = 1;
    ++i;
  }
}

void GrammarMatcher::mask_logits(std::span<float> logits, const TokenVocabulary& vocab) const {
  std::vector<uint8_t>& allowed = allowed_scratch_;
  fill_allowed(vocab, allowed);
  const size_t n = std::min(logits.size(), allowed.size());
  for (size_t i = 0; i < n; ++i) {
    if (!allowed[i]) logits[i] = -INFINITY;
  }
  for (size_t i = n; i < logits.size(); ++i) logits[i] = -INFINITY;
}

}  // namespace moetier::grammar
