// The matcher's engine: the grammar's pushdown automaton run on a *set* of stacks, turned
// lazily into a byte-level DFA so that repeated work (the same grammar state seeing the same
// byte, step after step and token after token) is one table lookup.
//
// * A stack is a persistent linked list of nodes (pos, parent): `pos` is the next element to
//   process in Grammar::elements(), `parent` the frame to return to when the alternative ends.
//   Nodes are hash-consed, so equal stacks are the same node id and share their tails. Node 0
//   is the empty stack: the root rule is complete.
// * A stack set is the sorted list of the stacks alive after some input, every top at a kChars
//   element (or node 0). Expanding a rule reference pushes one stack per alternative; a
//   reference that is the last item of its alternative returns straight to the caller's frame
//   (tail call), so x* and right recursion in tail position do not grow the stacks.
// * A DFA state is a stack set plus the bytes of an unfinished UTF-8 character (0..3 bytes).
//   Its transitions are a table of 256 entries (64 when inside a character: only continuation
//   bytes can follow), filled on first use. A state inside a character exists only if some
//   stack top accepts some code point that starts with those bytes.
// * Code-point steps are memoized per stack set by the set of stacks whose top accepts the
//   code point, so the ~20K distinct CJK characters of a vocabulary cost one lookup each.
//
// Not thread-safe: every method may grow the caches. One per GrammarMatcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/gbnf.h"

namespace moetier::grammar {

struct AutomatonLimits {
  // A set of more stacks than this after one code point is treated as a dead end (only
  // pathologically ambiguous grammars get there).
  size_t max_stacks = 4096;
  // GrammarMatcher drops the caches (compact()) between steps when they grow past these.
  size_t max_states = size_t{1} << 16;
  size_t max_nodes = size_t{1} << 20;
};

class GrammarAutomaton {
 public:
  using StateId = int32_t;
  static constexpr StateId kDead = 0;

  GrammarAutomaton(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits);

  StateId initial_state();

  // The state after one more byte; kDead when no stack can take it (or the byte breaks UTF-8).
  StateId next(StateId s, uint8_t byte) {
    const State& st = states_[static_cast<size_t>(s)];
    uint32_t slot = byte;
    if (st.partial_len > 0) {
      if ((byte & 0xC0) != 0x80) return kDead;
      slot = byte & 0x3Fu;
    }
    const size_t at = st.table + slot;
    StateId t = table_[at];
    if (t == kUnknown) {
      t = compute(s, byte);
      table_[at] = t;  // index again: compute() may have grown table_
    }
    return t;
  }

  // The root rule can be complete here (not inside a UTF-8 character).
  bool can_end(StateId s) const;
  bool inside_char(StateId s) const { return states_[static_cast<size_t>(s)].partial_len > 0; }

  size_t num_states() const { return states_.size(); }
  size_t num_nodes() const { return nodes_.size(); }
  bool over_limits() const { return states_.size() > limits_.max_states || nodes_.size() > limits_.max_nodes; }
  // Drops every cached state, stack set and node except what `keep` needs; returns keep's new id.
  StateId compact(StateId keep);

 private:
  static constexpr StateId kUnknown = -1;

  struct Node {
    uint32_t pos = 0;     // index in grammar elements
    uint32_t parent = 0;  // node id; 0 = the empty stack
  };
  struct StackSet {
    uint32_t begin = 0;  // range in pool_ of sorted node ids
    uint32_t end = 0;
    bool can_end = false;
    std::unordered_map<uint64_t, uint32_t> memo;  // matching-stacks bitmask -> next stack set
  };
  struct State {
    uint32_t stack_set = 0;
    uint32_t bytes = 0;       // bytes of the unfinished character, first byte highest
    uint8_t partial_len = 0;  // how many of them
    uint8_t char_len = 0;     // the character's full length (from its lead byte)
    uint32_t table = 0;       // offset in table_
  };

  void reset_caches();
  StateId compute(StateId s, uint8_t byte);
  StateId intern_state(uint32_t stack_set, uint32_t bytes, uint8_t partial_len, uint8_t char_len);
  uint32_t intern_node(uint32_t pos, uint32_t parent);
  uint32_t intern_stack_set(std::vector<uint32_t>& tops);  // sorts/dedups tops
  // The stack set after one code point; 0 (the empty set) when none can take it.
  uint32_t advance(uint32_t stack_set, uint32_t cp);
  // Appends to `out` every stack reachable from frame (pos, parent) with a kChars top.
  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out);
  bool any_top_intersects(uint32_t stack_set, uint32_t lo, uint32_t hi) const;

  std::shared_ptr<const Grammar> grammar_;
  AutomatonLimits limits_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_index_;
  std::vector<uint32_t> pool_;
  std::vector<StackSet> stack_sets_;
  std::unordered_map<std::string, uint32_t> stack_set_index_;  // raw bytes of the sorted ids
  std::vector<State> states_;
  std::unordered_map<uint64_t, StateId> state_index_;
  std::vector<StateId> table_;
  StateId initial_ = kUnknown;
  // Scratch for expand()/advance(), kept to avoid allocations.
  std::unordered_set<uint64_t> visited_;
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::vector<uint32_t> tops_;
  bool overflow_ = false;  // expand() hit the ambiguity limit
};

}  // namespace moetier::grammar
