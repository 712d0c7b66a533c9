// Constrained decoding with a GBNF grammar: tracks which bytes the grammar still allows and
// masks the logits of tokens that cannot continue it.
//
//   auto grammar = Grammar::parse(text);                       // once per grammar
//   TokenVocabulary vocab(tokenizer);                           // once per tokenizer
//   auto m = GrammarMatcher::create(std::make_shared<const Grammar>(std::move(*grammar)));
//   per step: m->mask_logits(logits, vocab); id = sample(logits); m->accept_token(id, vocab);
//
// Input is UTF-8 bytes; the grammar works on code points. A token may end inside a multi-byte
// character: the matcher then holds the character's first bytes, allows only tokens that can
// complete it, and can_end() is false until it is complete. Bytes that are not valid UTF-8
// (stray continuation bytes, overlong forms, C0/C1/F5..FF) are never accepted.
//
// One matcher per sequence. Every method, including the const ones, updates internal caches,
// so a matcher must not be used from two threads at once (the Grammar and TokenVocabulary it
// reads can be shared freely).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace moetier::grammar {

class GrammarMatcher {
 public:
  // Error (kBadInput) only for a null grammar.
  static Result<GrammarMatcher> create(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits = {});

  // Advances over `bytes`. Returns false and leaves the state unchanged if the grammar does
  // not allow all of them. Empty input is accepted.
  bool accept_bytes(std::string_view bytes);
  // An end-of-generation token is accepted (returns true, state unchanged) iff can_end();
  // any other token iff its piece is non-empty and accept_bytes(piece) succeeds.
  bool accept_token(int32_t id, const TokenVocabulary& vocab);

  // The input so far is a complete sentence of the grammar (end of generation allowed).
  bool can_end() const { return automaton_->can_end(state_); }
  // Nothing can follow, not even the end (only after a stack-limit overflow, see
  // AutomatonLimits; accept_* never moves the matcher into a dead state otherwise).
  bool is_dead() const { return state_ == GrammarAutomaton::kDead; }
  // The input ends inside a multi-byte UTF-8 character.
  bool inside_char() const { return automaton_->inside_char(state_); }

  // Sets the logit of every token that cannot continue the grammar to -INFINITY; leaves the
  // others unchanged. End-of-generation tokens are allowed iff can_end(). Logits beyond
  // vocab.size() (a model's padded rows) are masked too.
  void mask_logits(std::span<float> logits, const TokenVocabulary& vocab) const;
  // The same decision as mask_logits: allowed[id] = 1 if token id may come next, else 0;
  // allowed is resized to vocab.size().
  void fill_allowed(const TokenVocabulary& vocab, std::vector<uint8_t>& allowed) const;

  // Back to the start of the grammar.
  void reset();

  const Grammar& grammar() const { return *grammar_; }

 private:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits);
  void compact_if_needed() const;

  std::shared_ptr<const Grammar> grammar_;
  // Mutable state: the automaton's caches grow (and are compacted) inside const methods.
  std::unique_ptr<GrammarAutomaton> automaton_;
  mutable GrammarAutomaton::StateId state_ = GrammarAutomaton::kDead;
  mutable std::vector<GrammarAutomaton::StateId> walk_states_;  // scratch for the trie walk
  mutable std::vector<uint8_t> allowed_scratch_;                 // scratch for mask_logits
};

}  // namespace moetier::grammar
