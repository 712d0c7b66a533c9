// Speculative decoding: a drafter proposes the next few tokens, the target model verifies
// them in one batch (one read of the weights for several tokens), and generate() keeps the
// longest prefix the target's own sampler agrees with, plus the target's token after it.
//
// Exactness: every drafter here proposes single tokens (point masses), and the verify step
// samples the target's distribution at each drafted position in order, accepting the draft
// where the sample equals it; at the first mismatch the sample itself is the next token.
// That is speculative sampling for deterministic drafts (P(accept x) = p(x); a rejection
// leaves p conditioned on ≠ x, which is the residual distribution), and the sampler draws
// exactly once per emitted token, as without speculation: with the same seed the output is
// the same token for token (the CPU forward gives a token the same logits whether it is
// verified in a batch or decoded alone).
//
// Rolling back rejected drafts: attention-only sequences just forget KV rows; sequences
// with recurrent (DeltaNet) state record their state per verified token in a journal
// (SequenceState::begin_journal) and go back to the last accepted one.
//
// Draft length: a controller picks, each step, the number of tokens to draft that maximises
// the expected tokens per second from the measured acceptance rate and verify cost, and
// drafts nothing when plain decoding is faster ("never worse than no speculation"; the rule
// and its probes are in docs/speculative.md, "Draft length").
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace moetier {

enum class SpecType {
  kNone,
  kNgramSimple,  // --spec-type ngram-simple: continue an earlier occurrence of the last n tokens
  kReplay,       // bench --spec-replay: the target's own greedy continuation, corrupted at a set rate
  kDraftMtp,     // --spec-type draft-mtp: the model's own MTP head (runtime/mtp_drafter.h)
  kDraftSimple,  // --spec-type draft-simple: a separate draft model (runtime/draft_model_drafter.h)
  kNgramMod,     // --spec-type ngram-mod: chains next tokens from a hashed table of the history's n-grams
};

// The names --spec-type takes (llama.cpp's spelling) and their parse; unknown or not yet
// supported types are a clear error.
std::string_view spec_type_name(SpecType type);
Result<SpecType> parse_spec_type(std::string_view name);

struct SpecParams {
  SpecType type = SpecType::kNone;
  int32_t n_max = 3;     // --spec-draft-n-max: tokens drafted per step at most (llama.cpp's default)
  int32_t n_min = 0;     // --spec-draft-n-min: draft at least this many when drafting at all
  bool adaptive = true;  // --spec-adaptive on|off: choose the length by measured speed (else always n_max)
  // --spec-draft-p-min: a model drafter (draft-mtp) stops drafting at a token whose
  // probability under the drafter is below this (llama.cpp's default 0: draft n_max).
  double p_min = 0.0;
  // ngram-simple (llama.cpp's defaults)
  int32_t ngram_size_n = 12;   // --spec-ngram-simple-size-n: length of the looked-up n-gram
  int32_t ngram_size_m = 48;   // --spec-ngram-simple-size-m: tokens proposed after a match, at most
  int32_t ngram_min_hits = 1;  // --spec-ngram-simple-min-hits: occurrences needed to propose
  // ngram-mod (llama.cpp's defaults): drafts of n_min..n_max tokens or none
  int32_t ngram_mod_n_match = 24;  // --spec-ngram-mod-n-match: the hashed n-gram's length
  int32_t ngram_mod_n_min = 48;    // --spec-ngram-mod-n-min
  int32_t ngram_mod_n_max = 64;    // --spec-ngram-mod-n-max
  // replay (bench only)
  double replay_acceptance = 0.8;  // --spec-replay: the probability each drafted token is the target's
  uint32_t replay_seed = 1;
};

// kBadInput naming the flag when a value is out of range.
Status validate(const SpecParams& params);

// A model drafter's pick from its logits: the greedy token and, when a draft must stop below
// a probability (p_min > 0), that token's softmax probability; without p_min the sum over
// the vocabulary (248K exps per drafted token on Qwen3.6) is skipped and p is 1.
struct GreedyPick {
  int32_t token = 0;
  double p = 1.0;
};
GreedyPick greedy_pick(std::span<const float> logits, double p_min);

class Drafter;

// One sequence's draft request: what Drafter::draft takes, for draft_jobs.
struct DraftJob {
  Drafter* drafter = nullptr;
  std::span<const int32_t> history;
  int64_t max_tokens = 0;
  std::vector<int32_t>* out = nullptr;
};

// Proposes up to max_tokens tokens to follow `history` (every token of the sequence so far,
// prompt and generated, the last one included). May propose fewer, or none.
class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) = 0;
  // Several sequences' drafts (a server step's slots; jobs[0].drafter is this one), each as
  // its drafter's draft() would give it. A drafter that runs a model overrides this to run
  // the jobs of drafters like itself together (draft-mtp: one head pass per draft position
  // for all of them); the base runs every job on its own drafter.
  virtual void draft_jobs(std::span<const DraftJob> jobs) {
    for (const DraftJob& j : jobs) j.drafter->draft(j.history, j.max_tokens, *j.out);
  }

  // Drafters that run a model beside the target (draft-mtp) see the target's final-norm
  // hidden state of every token it processes (Model's ForwardOptions::on_hidden) ...
  virtual bool wants_hidden() const { return false; }
  virtual void on_hidden(std::span<const int32_t> /*tokens*/, int64_t /*first_pos*/, const float* /*hidden*/) {}
  // ... and are told when the target's sequence is cut back to its first n_keep positions.
  virtual void on_truncate(int64_t /*n_keep*/) {}
  // The first error the drafter met (its own forward pass failing); generation stops with it.
  virtual Status status() const { return Status::ok(); }
  // Weight bytes the drafter reads per drafted token (0: a lookup that reads no weights).
  virtual uint64_t bytes_per_token() const { return 0; }
};

// ngram-simple: finds the latest earlier occurrence of the last size_n tokens of the history
// (seen at least min_hits times) and proposes the tokens that followed it.
class NgramSimpleDrafter final : public Drafter {
 public:
  explicit NgramSimpleDrafter(const SpecParams& params) : params_(params) {}
  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override;

 private:
  SpecParams params_;
};

// ngram-mod: a fixed-size hash table (kSlots entries) maps each n_match-token window of the
// history to the token that followed it (a later occurrence overwrites, colliding windows
// share a slot: lossy by design, so memory stays fixed however long the history). A draft
// starts from the history's last n_match tokens and follows the table one token at a time;
// fewer than ngram_mod_n_min tokens found is no draft. The table is emptied when a quarter of
// it is in use, so stale entries do not pile up.
class NgramModDrafter final : public Drafter {
 public:
  static constexpr size_t kSlots = size_t{1} << 22;  // 16 MiB of int32 entries
  explicit NgramModDrafter(const SpecParams& params) : params_(params), table_(kSlots, kEmpty) {}
  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override;

 private:
  static constexpr int32_t kEmpty = -1;
  size_t slot(const int32_t* window) const;
  SpecParams params_;
  std::vector<int32_t> table_;
  size_t used_ = 0;
  size_t added_until_ = 0;  // windows starting before this history index are in the table
  std::vector<int32_t> window_;
};

// Replay (benchmarks on random-weight models, whose drafters agree only by chance): proposes
// the target's own continuation `expected` (the tokens generated after `prompt_tokens`
// history tokens), each proposed token replaced by another one with probability
// 1 − acceptance, so a drafted token is accepted with probability `acceptance` exactly
// (given the ones before it were) and the real verify path runs.
class ReplayDrafter final : public Drafter {
 public:
  ReplayDrafter(std::vector<int32_t> expected, int64_t prompt_tokens, int32_t n_vocab, double acceptance, uint32_t seed);
  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override;

 private:
  std::vector<int32_t> expected_;
  int64_t prompt_tokens_;
  int32_t n_vocab_;
  double acceptance_;
  std::mt19937 rng_;
};

// Counters a generation reports (run stats, serve timings, bench records).
struct SpecStats {
  int64_t n_steps = 0;     // verify passes with at least one drafted token
  int64_t n_drafted = 0;   // tokens proposed and verified
  int64_t n_accepted = 0;  // drafted tokens the target kept
  double acceptance_rate() const { return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0; }
  double mean_draft_length() const { return n_steps > 0 ? static_cast<double>(n_drafted) / n_steps : 0; }
};

// A drafter with the draft-length controller of the header comment.
class Speculator {
 public:
  Speculator(const SpecParams& params, std::unique_ptr<Drafter> drafter);

  // The drafted tokens for this step (at most max_tokens; empty: decode one token plainly).
  void propose(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out);
  // The two halves of propose, for propose_together: how many tokens to draft now (0: none
  // this step), then the draft the drafter gave for that length and the drafter's time per
  // drafted token.
  int64_t draft_length(int64_t max_tokens);
  void take_draft(int64_t length, std::vector<int32_t>& out, double seconds_per_token);
  // What the step gave: `drafted` proposed, `accepted` kept, and the wall time of the forward
  // pass over `batch_tokens` tokens (1 for a plain step).
  void record(int64_t drafted, int64_t accepted, int64_t batch_tokens, double seconds);

  const SpecStats& stats() const { return stats_; }
  const SpecParams& params() const { return params_; }
  // The controller's current choice (for logs and tests) and its estimates.
  int64_t chosen_length() const { return chosen_; }
  double estimated_acceptance() const;

  // The controller's choice for given estimates: α per drafted token, t[b] = seconds of a
  // forward of b tokens (b = 1 .. n_max + 1; ≤ 0: unknown, then t(1)·(1 + 0.1(b − 1)) is
  // assumed, an optimistic guess that gets measured once tried).
  // draft_seconds: the drafter's own time per drafted token (0 for free drafters), added
  // k times to a draft of k.
  static int64_t best_length(double alpha, std::span<const double> t, int32_t n_min, int32_t n_max,
                             double draft_seconds = 0);
  // The drafter's measured time per drafted token (0 until measured).
  double draft_seconds_per_token() const { return draft_seconds_; }
  Drafter& drafter() { return *drafter_; }

  // Tokens between retries while off: kProbeInterval, doubled after each probe that got
  // nothing accepted (up to kMaxProbeInterval), back to kProbeInterval once a draft is kept.
  static constexpr int64_t kProbeInterval = 16;
  static constexpr int64_t kMaxProbeInterval = 256;
  int64_t probe_interval() const { return probe_interval_; }

 private:
  SpecParams params_;
  std::unique_ptr<Drafter> drafter_;
  SpecStats stats_;
  std::vector<double> seconds_;  // [b]: running mean of a forward of b tokens (0: not measured)
  double drafted_ewma_ = 0, accepted_ewma_ = 0;  // decayed counts for α
  double draft_seconds_ = 0;                      // running mean per drafted token
  int64_t chosen_ = 0;
  int64_t tokens_since_probe_ = 0;
  int64_t probe_interval_ = kProbeInterval;
  bool probing_ = false;  // the current step's draft is a probe
};

// Several speculators' propose() in one call (a server step's generating slots): each
// chooses its length, then their drafters run together where they can (Drafter::draft_jobs,
// called on the first job's drafter), and each gets what its own propose() would give.
struct ProposeJob {
  Speculator* spec = nullptr;
  std::span<const int32_t> history;
  int64_t max_tokens = 0;
  std::vector<int32_t>* out = nullptr;
};
void propose_together(std::span<const ProposeJob> jobs);

}  // namespace moetier
