// The rollback journal of a CPU recurrent layer (SequenceState::begin_journal, begin_ssm_pass,
// truncate) driven by the real delta-rule kernel as model/blocks/delta_net runs it: verify
// passes that record, cut-backs that leave a replay pending, the next pass that applies it
// (rebasing the origin when a new window starts), passes that continue a window after a
// cut-back, plain decode steps, snapshots and clears. After every operation the sequence's
// state must equal, bit for bit, the state of the same layer fed only the kept tokens one step
// at a time (the scalar step, the oracle), and every pass's outputs must be that oracle's.
#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <random>
#include <vector>

#include "cpu/delta_rule.h"
#include "state/sequence_state.h"

namespace moetier {
namespace {

// d 64: whole column blocks at every vector width (the fused kernel), two heads; d 5 × 6: the
// step-by-step fallback.
struct Shape {
  int64_t heads, dk, dv;
};

struct Token {
  std::vector<float> q, k, v;  // [heads][dk], [heads][dk], [heads][dv]
  std::vector<float> beta, decay;  // [heads]
  std::vector<float> conv;     // the conv state after it (a stand-in)
};

class Harness {
 public:
  explicit Harness(Shape s) : s_(s) {
    spec_ = {.conv_state_elems = 6, .ssm_state_elems = s.heads * s.dk * s.dv, .ssm_heads = s.heads, .ssm_d_k = s.dk,
             .ssm_d_v = s.dv};
    auto seq = SequenceState::create({spec_}, {.n_ctx = 256});
    EXPECT_TRUE(seq.is_ok());
    seq_ = std::make_unique<SequenceState>(std::move(*seq));
  }

  Token make_token() {
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.3f, 0.99f);
    Token t;
    const auto unit_vectors = [&](std::vector<float>& out) {
      out.resize(static_cast<size_t>(s_.heads * s_.dk));
      for (int64_t h = 0; h < s_.heads; ++h) {
        double norm = 0;
        for (int64_t i = 0; i < s_.dk; ++i) {
          const float x = g(rng_);
          out[static_cast<size_t>(h * s_.dk + i)] = x;
          norm += double{x} * x;
        }
        for (int64_t i = 0; i < s_.dk; ++i) out[static_cast<size_t>(h * s_.dk + i)] /= static_cast<float>(std::sqrt(norm));
      }
    };
    unit_vectors(t.q);
    unit_vectors(t.k);
    t.v.resize(static_cast<size_t>(s_.heads * s_.dv));
    for (float& x : t.v) x = g(rng_);
    for (int64_t h = 0; h < s_.heads; ++h) {
      t.beta.push_back(unit(rng_));
      t.decay.push_back(unit(rng_));
    }
    for (int i = 0; i < 6; ++i) t.conv.push_back(g(rng_));
    return t;
  }

  // A forward pass over new tokens, as the block runs it; returns its outputs [token][heads][dv].
  std::vector<float> pass(const std::vector<Token>& tokens) {
    const auto m = static_cast<int64_t>(tokens.size());
    const SequenceState::SsmPass p = seq_->begin_ssm_pass(0, m);
    max_replay_ = std::max(max_replay_, p.n_replay);
    write_backs_ += p.write_back_replay ? 1 : 0;
    std::vector<float> out(static_cast<size_t>(m * s_.heads * s_.dv));
    const int64_t row = 2 * s_.dk + s_.dv;
    for (int64_t h = 0; h < s_.heads; ++h) {
      std::vector<float> rows(static_cast<size_t>(m * row)), beta, decay, scratch(static_cast<size_t>(2 * s_.dv));
      for (int64_t t = 0; t < m; ++t) {
        const Token& tk = tokens[static_cast<size_t>(t)];
        std::copy_n(tk.q.begin() + h * s_.dk, s_.dk, rows.begin() + t * row);
        std::copy_n(tk.k.begin() + h * s_.dk, s_.dk, rows.begin() + t * row + s_.dk);
        std::copy_n(tk.v.begin() + h * s_.dv, s_.dv, rows.begin() + t * row + 2 * s_.dk);
        beta.push_back(tk.beta[static_cast<size_t>(h)]);
        decay.push_back(tk.decay[static_cast<size_t>(h)]);
      }
      cpu::DeltaRuleTokens run = p.head_run(h);
      run.n_tokens = m;
      run.q = rows.data();
      run.k = rows.data() + s_.dk;
      run.v = rows.data() + 2 * s_.dk;
      run.stride = row;
      run.beta = beta.data();
      run.decay = decay.data();
      run.q_scale = 0.125f;
      run.out = out.data() + h * s_.dv;
      run.out_stride = s_.heads * s_.dv;
      run.scratch = scratch.data();
      cpu::delta_rule_tokens(run);
    }
    for (int64_t t = 0; t < m; ++t) {
      const Token& tk = tokens[static_cast<size_t>(t)];
      std::copy(tk.conv.begin(), tk.conv.end(), seq_->conv_state(0));
      if (float* slot = seq_->journal_conv(0, seq_->n_past() + t)) std::copy(tk.conv.begin(), tk.conv.end(), slot);
    }
    seq_->set_n_past(seq_->n_past() + m);
    return out;
  }

  // The oracle: the scalar step over `history` from a zero state; its outputs for the last
  // n_out tokens and its final state.
  void oracle(const std::vector<Token>& history, int64_t n_out, std::vector<float>& state, std::vector<float>& out) const {
    state.assign(static_cast<size_t>(s_.heads * s_.dk * s_.dv), 0.0f);
    out.assign(static_cast<size_t>(n_out * s_.heads * s_.dv), 0.0f);
    const auto n = static_cast<int64_t>(history.size());
    std::vector<float> scratch(static_cast<size_t>(2 * s_.dv)), o(static_cast<size_t>(s_.dv));
    for (int64_t t = 0; t < n; ++t) {
      const Token& tk = history[static_cast<size_t>(t)];
      for (int64_t h = 0; h < s_.heads; ++h) {
        cpu::delta_rule_kernels(cpu::IsaTier::kScalar)
            .step({.state = state.data() + h * s_.dk * s_.dv, .d_k = s_.dk, .d_v = s_.dv, .q = tk.q.data() + h * s_.dk,
                   .k = tk.k.data() + h * s_.dk, .v = tk.v.data() + h * s_.dv, .beta = tk.beta[static_cast<size_t>(h)],
                   .decay = tk.decay[static_cast<size_t>(h)], .q_scale = 0.125f, .out = o.data(), .scratch = scratch.data()});
        if (t >= n - n_out) std::copy(o.begin(), o.end(), out.begin() + ((t - (n - n_out)) * s_.heads + h) * s_.dv);
      }
    }
  }

  // Feeds `tokens` in one pass and checks its outputs and the state after it.
  void feed_and_check(std::vector<Token>& history, const std::vector<Token>& tokens, const std::string& what) {
    const std::vector<float> out = pass(tokens);
    history.insert(history.end(), tokens.begin(), tokens.end());
    std::vector<float> state, want;
    oracle(history, static_cast<int64_t>(tokens.size()), state, want);
    ASSERT_EQ(out, want) << what << ": outputs";
    expect_state(history, what);
  }

  void expect_state(const std::vector<Token>& history, const std::string& what) {
    std::vector<float> state, unused;
    oracle(history, 0, state, unused);
    ASSERT_EQ(seq_->n_past(), static_cast<int64_t>(history.size())) << what;
    // Read through a snapshot first (a pending replay is rebuilt into a copy, the sequence not
    // touched), then through ssm_state (which rebuilds it in place).
    auto bytes = seq_->snapshot();
    ASSERT_TRUE(bytes.is_ok());
    const size_t ssm_bytes = state.size() * sizeof(float);
    ASSERT_GE(bytes->size(), ssm_bytes);
    ASSERT_EQ(0, std::memcmp(bytes->data() + bytes->size() - ssm_bytes, state.data(), ssm_bytes)) << what << ": snapshot";
    if (!history.empty()) {
      ASSERT_EQ(0, std::memcmp(seq_->conv_state(0), history.back().conv.data(), 6 * sizeof(float))) << what << ": conv";
    }
    if (read_in_place_) {
      ASSERT_EQ(0, std::memcmp(seq_->ssm_state(0), state.data(), ssm_bytes)) << what << ": state";
    }
  }

  SequenceState& seq() { return *seq_; }
  int64_t max_replay() const { return max_replay_; }  // the most records a pass applied first
  int write_backs() const { return write_backs_; }     // passes that made a new origin
  void set_read_in_place(bool on) { read_in_place_ = on; }

 private:
  Shape s_;
  LayerStateSpec spec_;
  std::unique_ptr<SequenceState> seq_;
  std::mt19937 rng_{29};
  bool read_in_place_ = false;
  int64_t max_replay_ = 0;
  int write_backs_ = 0;
};

std::vector<Token> tokens_of(Harness& h, int64_t n) {
  std::vector<Token> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(h.make_token());
  return out;
}

// Verify steps of 2-5 tokens, each cut back to 1..k tokens (all of them in some rounds), with
// plain decode steps between some of them; the state must follow the kept tokens exactly. Run
// once reading the state only through snapshots (so each pending replay is applied by the
// next pass, fused into its sweep) and once reading it in place after every step (so it is
// rebuilt there first).
TEST(RollbackJournal, CutBacksReplayToTheKeptTokensState) {
  for (const Shape shape : {Shape{2, 64, 64}, Shape{1, 5, 6}}) {
    for (const bool in_place : {false, true}) {
      Harness h(shape);
      h.set_read_in_place(in_place);
      std::vector<Token> history;
      const std::string tag = std::to_string(shape.dk) + "x" + std::to_string(shape.dv) + (in_place ? " read in place" : "");
      h.feed_and_check(history, tokens_of(h, 3), tag + " prompt");
      for (int round = 0; round < 12; ++round) {
        const int64_t k = 2 + round % 4;
        ASSERT_TRUE(h.seq().begin_journal(k).is_ok());
        const std::vector<Token> verify = tokens_of(h, k);
        h.feed_and_check(history, verify, tag + " verify, round " + std::to_string(round));
        const int64_t keep = round % 3 == 0 ? k : 1 + round % k;
        const int64_t first = h.seq().n_past() - k;
        ASSERT_TRUE(h.seq().truncate(first + keep)) << tag << " round " << round;
        h.seq().end_journal();
        history.resize(static_cast<size_t>(first + keep));
        h.expect_state(history, tag + " cut back, round " + std::to_string(round));
        if (round % 4 == 1) h.feed_and_check(history, tokens_of(h, 1), tag + " decode, round " + std::to_string(round));
      }
    }
  }
}

// Cut-backs in a row, with no decode step or whole verify between them: the kept tokens'
// records pile up on the origin until they are more than 8, then the next window's first pass
// writes the replayed state back as its origin (and records into the other buffer). The state
// follows the kept tokens throughout.
TEST(RollbackJournal, LongRunsOfCutBacksMakeANewOrigin) {
  Harness h({2, 64, 64});
  std::vector<Token> history;
  h.feed_and_check(history, tokens_of(h, 2), "prompt");
  for (int round = 0; round < 20; ++round) {
    const int64_t k = 3 + round % 2, keep = 1 + round % 2;
    ASSERT_TRUE(h.seq().begin_journal(k).is_ok());
    h.feed_and_check(history, tokens_of(h, k), "verify, round " + std::to_string(round));
    const int64_t first = h.seq().n_past() - k;
    ASSERT_TRUE(h.seq().truncate(first + keep));
    h.seq().end_journal();
    history.resize(static_cast<size_t>(first + keep));
    h.expect_state(history, "cut back, round " + std::to_string(round));
  }
  EXPECT_GE(h.write_backs(), 2);
  EXPECT_LE(h.max_replay(), 8 + 2);
}

// Within one window: a cut-back, then more passes in the same journal (they replay the
// pending records without moving the origin), then a cut-back to a position the earlier pass
// recorded. Positions outside the window or not yet fed are refused and change nothing.
TEST(RollbackJournal, CutBacksWithinOneWindowAndRefusals) {
  Harness h({2, 64, 64});
  std::vector<Token> history;
  h.feed_and_check(history, tokens_of(h, 4), "prompt");
  EXPECT_FALSE(h.seq().truncate(2));  // no journal: a recurrent sequence cannot go back
  ASSERT_TRUE(h.seq().begin_journal(5).is_ok());  // positions 4-8
  ASSERT_TRUE(h.seq().begin_journal(5).is_ok());  // again before any pass: the same window
  h.feed_and_check(history, tokens_of(h, 3), "first pass");  // positions 4-6
  EXPECT_FALSE(h.seq().truncate(4));  // the state before the window's first token: not recorded
  ASSERT_TRUE(h.seq().truncate(5));
  history.resize(5);
  h.expect_state(history, "cut to 5");
  h.feed_and_check(history, tokens_of(h, 2), "second pass");  // positions 5-6
  h.feed_and_check(history, tokens_of(h, 1), "third pass");   // position 7
  ASSERT_TRUE(h.seq().truncate(6));
  history.resize(6);
  h.expect_state(history, "cut to 6");
  h.feed_and_check(history, tokens_of(h, 4), "past the window");  // positions 6-9, 9 outside it
  EXPECT_TRUE(h.seq().truncate(10));   // every position kept: nothing to do
  EXPECT_FALSE(h.seq().truncate(3));   // before the window
  EXPECT_TRUE(h.seq().truncate(9));    // position 8, the window's last, recorded
  history.resize(9);
  h.expect_state(history, "cut to 9");
  h.seq().end_journal();
  EXPECT_FALSE(h.seq().truncate(8));  // the journal has ended
  h.feed_and_check(history, tokens_of(h, 2), "after the journal");
  // A cleared sequence starts from zero, a pending replay forgotten.
  ASSERT_TRUE(h.seq().begin_journal(3).is_ok());
  h.feed_and_check(history, tokens_of(h, 3), "before the clear");
  ASSERT_TRUE(h.seq().truncate(h.seq().n_past() - 2));
  h.seq().end_journal();
  h.seq().clear();
  history.clear();
  h.feed_and_check(history, tokens_of(h, 2), "after the clear");
}

// A slot saved with a replay pending restores, in another sequence, to the same state.
TEST(RollbackJournal, SnapshotWithAPendingReplayRestores) {
  Harness a({2, 64, 64}), b({2, 64, 64});
  std::vector<Token> history;
  a.feed_and_check(history, tokens_of(a, 3), "prompt");
  ASSERT_TRUE(a.seq().begin_journal(4).is_ok());
  a.feed_and_check(history, tokens_of(a, 4), "verify");
  ASSERT_TRUE(a.seq().truncate(5));
  a.seq().end_journal();
  history.resize(5);
  auto bytes = a.seq().snapshot();
  ASSERT_TRUE(bytes.is_ok());
  ASSERT_TRUE(b.seq().restore(*bytes).is_ok());
  b.expect_state(history, "restored");
  b.feed_and_check(history, tokens_of(b, 2), "restored, then a pass");
}

// The journal's memory: the conv state per token, one more SSM state (the origin) and two
// buffers of small per-token records (each the window's after up to 8 pending ones), not a
// state per token.
TEST(RollbackJournal, JournalBytesAreOneStatePlusRecords) {
  Harness h({2, 64, 64});
  const uint64_t state = 2 * 64 * 64 * sizeof(float), record = 2 * (64 + 64 + 1) * sizeof(float);
  EXPECT_EQ(h.seq().journal_bytes(4), 4 * 6 * sizeof(float) + state + 2 * (8 + 4) * record);
}

}  // namespace
}  // namespace moetier
