// `moetier tune`'s measurement plan and decision, with the measuring behind an interface
// (Measurer) so the whole search — rounds, time budget, finalists, the verdict — runs in
// unit tests on made-up speeds and a made-up clock.
//
// Phase 1: every candidate short (-r 2 of pp128 and tg32 by default), one repetition of
// each per round (interleaved, as bench does), candidates of one load mode (mmap or not)
// per model load. A candidate is admitted only while the time already spent, the rest of
// the admitted runs, its own runs (placement and warm-up included) and, from the third
// candidate on, two rounds of phase 2 fit in the budget (each estimated from the
// repetitions measured so far); candidates run until one has run, so there is always a
// result. Phase 2: the best two again at full size (pp512, tg128) with up to -r 5,
// interleaved when they share a load, as many rounds as the budget still allows (none
// below 2). The verdict: the better mean score wins; when the 95% interval of the ratio
// winner / runner-up holds 1 the two are not distinguishable and the one with less memory
// (then: fewer flags) is reported instead, saying so.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "core/status.h"
#include "tune/candidates.h"

namespace moetier::tune {

// Tokens of one repetition: a pp test of n_prompt tokens, then a tg test of n_gen.
struct RunSize {
  int64_t n_prompt = 128;
  int64_t n_gen = 32;
};

// What one candidate measured: pp_ts[i] and tg_ts[i] are repetition i's prompt and
// generation speeds (t/s), memory is peak − idle over its repetitions.
struct Measurement {
  std::vector<double> pp_ts, tg_ts;
  std::optional<int64_t> rss_bytes;   // peak − idle RSS
  std::optional<int64_t> vram_bytes;  // peak − idle GPU memory (nullopt: no GPU part)
  int64_t reps() const { return static_cast<int64_t>(std::min(pp_ts.size(), tg_ts.size())); }
};

// The chat turn --for serve scores: a 512-token prompt (a system prompt, history and the
// question) and a 128-token answer, llama-bench's default sizes. Its time at speeds pp and
// tg is 512/pp + 128/tg seconds.
inline constexpr double kTurnPromptTokens = 512;
inline constexpr double kTurnGenTokens = 128;
double turn_seconds(double pp_ts, double tg_ts);

// Per-repetition scores, higher is better: --for serve chat turns per second
// (1 / turn_seconds of that repetition's pp and tg), --for bench the tg t/s.
std::vector<double> score_samples(const Measurement& m, Purpose purpose);

// The timed seconds of one repetition's pp and tg parts.
struct RepTiming {
  double pp_s = 0, tg_s = 0;
};

// Runs candidates. The search opens one set at a time (all with the same use_mmap: one
// model load), runs repetitions in the order it chooses, then closes it.
class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual Status open(std::span<const Candidate> set, RunSize size, int64_t repetitions) = 0;
  // One timed repetition of set[i] (pp, then tg); the first call for i also places and warms
  // it up (untimed). Returns the timed seconds of each part (the search's time estimates).
  // An error means this candidate cannot run here (it is dropped, the search goes on).
  virtual Result<RepTiming> repetition(size_t i, int64_t rep) = 0;
  // One Measurement per candidate of the set (empty for those never run).
  virtual Result<std::vector<Measurement>> close() = 0;
};

struct SearchParams {
  Purpose purpose = Purpose::kServe;
  double time_budget_s = 300;
  RunSize short_size{.n_prompt = 128, .n_gen = 32};
  int64_t short_reps = 2;
  RunSize full_size{.n_prompt = 512, .n_gen = 128};
  int64_t full_reps = 5;
  std::function<double()> now;  // monotonic seconds (required)
  // Progress: a phase begins with `steps` repetitions planned; one step is one repetition.
  std::function<void(const std::string& phase, int64_t steps)> on_phase;
  std::function<void()> on_step;
  std::function<void(const std::string&)> log;  // one line per event worth telling
};

struct CandidateResult {
  Candidate candidate;
  bool measured = false;                 // false: left out by the time budget, or failed
  std::string failure;                   // why it could not run ("" = it ran or was left out)
  Measurement short_run;                 // phase 1
  std::optional<Measurement> full_run;   // phase 2 (the finalists)
};

struct SearchResult {
  std::vector<CandidateResult> candidates;  // in priority order (the start first)
  size_t winner = 0;
  std::optional<size_t> runner_up;
  bool phase2 = false;             // the verdict rests on phase 2's full-size runs
  int64_t phase2_reps = 0;
  bool phase2_interleaved = false; // the finalists shared a load (else one after the other)
  std::string phase2_note;         // why phase 2 was skipped or shortened ("" = ran fully)
  std::optional<bench::RatioCi> ci;  // score ratio winner / runner-up
  bool no_difference = false;      // the interval holds 1
  bool chose_lighter = false;      // ... and the runner-up was faster on average but heavier
  std::string lighter_reason;      // why the winner is the lighter one ("less peak − idle memory (...)")
  int64_t n_skipped = 0;           // candidates the budget left out (failed ones: CandidateResult::failure)
  double elapsed_s = 0;
  // The measurement the verdict rests on for candidate i (full run when it has one).
  const Measurement& final_measurement(size_t i) const;
};

Result<SearchResult> run_search(const std::vector<Candidate>& candidates, Measurer& measurer, const SearchParams& params);

}  // namespace moetier::tune
