// Stack-set pushdown automaton with a lazily built byte DFA on top (see grammar_automaton.h).
#include "grammar/grammar_automaton.h"

#include <algorithm>
#include <cstring>

namespace moetier::grammar {

namespace {

constexpr uint32_t kEmptyStack = 0;         // node id of the empty stack (root complete)
constexpr uint32_t kNoPos = UINT32_MAX;     // pos of that node
constexpr size_t kFullTable = 256;          // transitions of a state between characters
constexpr size_t kContinuationTable = 64;   // inside a character: bytes 0x80..0xBF only

// Length of the UTF-8 sequence a lead byte starts; 0 if it cannot start one (strict: no
// C0/C1 overlong leads, nothing above F4).
uint8_t utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Payload bits of the bytes so far (lead first, in the high bytes of `bytes`).
uint32_t payload(uint32_t bytes, int n_bytes, int char_len) {
  uint32_t v = 0;
  for (int i = 0; i < n_bytes; ++i) {
    const uint32_t b = (bytes >> (8 * (n_bytes - 1 - i))) & 0xFF;
    v = i == 0 ? b & (0x7Fu >> char_len) : (v << 6) | (b & 0x3F);
  }
  return v;
}

uint32_t min_code_point(int char_len) { return char_len == 2 ? 0x80 : char_len == 3 ? 0x800 : 0x10000; }

}  // namespace

GrammarAutomaton::GrammarAutomaton(std::shared_ptr<const Grammar> grammar, const AutomatonLimits& limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  reset_caches();
}

void GrammarAutomaton::reset_caches() {
  nodes_.assign(1, Node{.pos = kNoPos, .parent = 0});
  node_index_.clear();
  pool_.clear();
  stack_sets_.assign(1, StackSet{});  // set 0: no stacks (dead)
  stack_set_index_.clear();
  stack_set_index_.emplace(std::string(), 0);
  states_.clear();
  state_index_.clear();
  table_.clear();
  // State 0 = dead: every byte leads back to it.
  states_.push_back(State{.stack_set = 0, .bytes = 0, .partial_len = 0, .char_len = 0, .table = 0});
  table_.assign(kFullTable, kDead);
  state_index_.emplace(0, kDead);
  initial_ = kUnknown;
}

uint32_t GrammarAutomaton::intern_node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = node_index_.emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) nodes_.push_back(Node{.pos = pos, .parent = parent});
  return it->second;
}

void GrammarAutomaton::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
  const auto& el = grammar_->elements();
  const auto& rules = grammar_->rules();
  work_.clear();
  work_.emplace_back(pos, parent);
  while (!work_.empty()) {
    const auto [p, par] = work_.back();
    work_.pop_back();
    if (!visited_.insert((uint64_t{p} << 32) | par).second) continue;
    const Element& e = el[p];
    if (e.kind == ElementKind::kChars) {
      out.push_back(intern_node(p, par));
    } else if (e.kind == ElementKind::kEnd) {
      if (par == kEmptyStack) {
        out.push_back(kEmptyStack);
      } else {
        const Node n = nodes_[par];
        work_.emplace_back(n.pos, n.parent);
      }
    } else {
      // Tail call: nothing left after the reference, so return straight to our caller.
      const uint32_t ret = el[p + 1].kind == ElementKind::kEnd ? par : intern_node(p + 1, par);
      for (const uint32_t alt : rules[e.index].alternatives) work_.emplace_back(alt, ret);
    }
    if (visited_.size() > limits_.max_stacks * 8) {  // runaway ambiguity: give up (dead end)
      overflow_ = true;
      return;
    }
  }
}

uint32_t GrammarAutomaton::intern_stack_set(std::vector<uint32_t>& tops) {
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  if (tops.empty() || tops.size() > limits_.max_stacks) return 0;
  std::string key(reinterpret_cast<const char*>(tops.data()), tops.size() * sizeof(uint32_t));
  auto [it, inserted] = stack_set_index_.emplace(std::move(key), static_cast<uint32_t>(stack_sets_.size()));
  if (inserted) {
    StackSet set;
    set.begin = static_cast<uint32_t>(pool_.size());
    pool_.insert(pool_.end(), tops.begin(), tops.end());
    set.end = static_cast<uint32_t>(pool_.size());
    set.can_end = tops.front() == kEmptyStack;
    stack_sets_.push_back(std::move(set));
  }
  return it->second;
}

uint32_t GrammarAutomaton::advance(uint32_t stack_set, uint32_t cp) {
  const auto& el = grammar_->elements();
  const auto& sets = grammar_->char_sets();
  const StackSet& ss = stack_sets_[stack_set];
  const uint32_t n = ss.end - ss.begin;
  // Which stacks take cp decides the result, so it is the memo key (sets of <= 64 stacks).
  uint64_t mask = 0;
  bool any = false;
  for (uint32_t i = 0; i < n; ++i) {
    const Node& node = nodes_[pool_[ss.begin + i]];
    if (node.pos == kNoPos || !sets[el[node.pos].index].contains(cp)) continue;
    any = true;
    if (i < 64) mask |= uint64_t{1} << i;
  }
  if (!any) return 0;
  const bool memoizable = n <= 64;
  if (memoizable) {
    const auto it = ss.memo.find(mask);
    if (it != ss.memo.end()) return it->second;
  }
  tops_.clear();
  visited_.clear();
  overflow_ = false;
  for (uint32_t i = ss.begin; i < ss.end && !overflow_; ++i) {
    const Node node = nodes_[pool_[i]];
    if (node.pos == kNoPos || !sets[el[node.pos].index].contains(cp)) continue;
    expand(node.pos + 1, node.parent, tops_);
  }
  const uint32_t result = overflow_ ? 0 : intern_stack_set(tops_);
  if (memoizable) stack_sets_[stack_set].memo.emplace(mask, result);  // re-index: may have grown
  return result;
}

bool GrammarAutomaton::any_top_intersects(uint32_t stack_set, uint32_t lo, uint32_t hi) const {
  const StackSet& ss = stack_sets_[stack_set];
  for (uint32_t i = ss.begin; i < ss.end; ++i) {
    const Node& node = nodes_[pool_[i]];
    if (node.pos != kNoPos && grammar_->char_sets()[grammar_->elements()[node.pos].index].intersects(lo, hi)) {
      return true;
    }
  }
  return false;
}

GrammarAutomaton::StateId GrammarAutomaton::intern_state(uint32_t stack_set, uint32_t bytes, uint8_t partial_len,
                                                         uint8_t char_len) {
  if (stack_set == 0) return kDead;
  const uint64_t key = (uint64_t{stack_set} << 32) | (uint64_t{partial_len} << 24) | bytes;
  auto [it, inserted] = state_index_.emplace(key, static_cast<StateId>(states_.size()));
  if (inserted) {
    states_.push_back(State{.stack_set = stack_set, .bytes = bytes, .partial_len = partial_len,
                            .char_len = char_len, .table = static_cast<uint32_t>(table_.size())});
    table_.resize(table_.size() + (partial_len > 0 ? kContinuationTable : kFullTable), kUnknown);
  }
  return it->second;
}

GrammarAutomaton::StateId GrammarAutomaton::initial_state() {
  if (initial_ == kUnknown) {
    tops_.clear();
    visited_.clear();
    overflow_ = false;
    for (const uint32_t alt : grammar_->rules()[grammar_->root()].alternatives) expand(alt, kEmptyStack, tops_);
    initial_ = overflow_ ? kDead : intern_state(intern_stack_set(tops_), 0, 0, 0);
  }
  return initial_;
}

GrammarAutomaton::StateId GrammarAutomaton::compute(StateId s, uint8_t byte) {
  const State st = states_[static_cast<size_t>(s)];
  if (st.stack_set == 0) return kDead;
  if (st.partial_len == 0) {
    const uint8_t len = utf8_length(byte);
    if (len == 0) return kDead;
    if (len == 1) return intern_state(advance(st.stack_set, byte), 0, 0, 0);
    const uint32_t lo = payload(byte, 1, len) << (6 * (len - 1));
    const uint32_t hi = lo | ((1u << (6 * (len - 1))) - 1);
    if (!any_top_intersects(st.stack_set, std::max(lo, min_code_point(len)), std::min(hi, kMaxCodePoint))) {
      return kDead;
    }
    return intern_state(st.stack_set, byte, 1, len);
  }
  const uint32_t bytes = (st.bytes << 8) | byte;
  const int n = st.partial_len + 1;
  const uint32_t value = payload(bytes, n, st.char_len);
  const int rest = st.char_len - n;  // continuation bytes still to come
  const uint32_t lo = std::max(value << (6 * rest), min_code_point(st.char_len));
  const uint32_t hi = std::min(rest > 0 ? (value << (6 * rest)) | ((1u << (6 * rest)) - 1) : value, kMaxCodePoint);
  if (lo > hi) return kDead;  // overlong or above U+10FFFF
  if (rest == 0) return intern_state(advance(st.stack_set, value), 0, 0, 0);
  if (!any_top_intersects(st.stack_set, lo, hi)) return kDead;
  return intern_state(st.stack_set, bytes, static_cast<uint8_t>(n), st.char_len);
}

bool GrammarAutomaton::can_end(StateId s) const {
  const State& st = states_[static_cast<size_t>(s)];
  return st.partial_len == 0 && stack_sets_[st.stack_set].can_end;
}

GrammarAutomaton::StateId GrammarAutomaton::compact(StateId keep) {
  const State st = states_[static_cast<size_t>(keep)];
  // Each stack of `keep` as its positions from the bottom frame up.
  std::vector<std::vector<uint32_t>> stacks;
  const StackSet& ss = stack_sets_[st.stack_set];
  for (uint32_t i = ss.begin; i < ss.end; ++i) {
    std::vector<uint32_t> frames;
    for (uint32_t n = pool_[i]; n != kEmptyStack; n = nodes_[n].parent) frames.push_back(nodes_[n].pos);
    std::reverse(frames.begin(), frames.end());
    stacks.push_back(std::move(frames));
  }
  reset_caches();
  tops_.clear();
  for (const auto& frames : stacks) {
    uint32_t node = kEmptyStack;
    for (const uint32_t pos : frames) node = intern_node(pos, node);
    tops_.push_back(node);
  }
  return intern_state(intern_stack_set(tops_), st.bytes, st.partial_len, st.char_len);
}

}  // namespace moetier::grammar
