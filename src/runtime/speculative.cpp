#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "core/math.h"
#include "runtime/sampler_stages.h"

namespace moetier {

std::string_view spec_type_name(SpecType type) {
  switch (type) {
    case SpecType::kNone: return "none";
    case SpecType::kNgramSimple: return "ngram-simple";
    case SpecType::kReplay: return "replay";
    case SpecType::kDraftMtp: return "draft-mtp";
    case SpecType::kDraftSimple: return "draft-simple";
    case SpecType::kNgramMod: return "ngram-mod";
  }
  return "none";
}

Result<SpecType> parse_spec_type(std::string_view name) {
  if (name == "none") return SpecType::kNone;
  if (name == "ngram-simple") return SpecType::kNgramSimple;
  if (name == "draft-mtp") return SpecType::kDraftMtp;
  if (name == "draft-simple") return SpecType::kDraftSimple;
  if (name == "ngram-mod") return SpecType::kNgramMod;
  // llama.cpp's other types: named, so the error says what is missing rather than "unknown".
  for (std::string_view later : {"draft-eagle3", "draft-dflash", "draft-dspark",
                                  "ngram-map-k", "ngram-map-k4v", "ngram-cache"}) {
    if (name == later) {
      return Status::bad_input(fmt::format(
          "--spec-type {}: not supported yet (supported: none, ngram-simple, ngram-mod, draft-mtp, draft-simple; bench also has --spec-replay)", name));
    }
  }
  return Status::bad_input(fmt::format("--spec-type: unknown type '{}' (supported: none, ngram-simple, ngram-mod, draft-mtp, draft-simple)", name));
}

Status validate(const SpecParams& p) {
  if (p.n_max < 1 || p.n_max > 64) return Status::bad_input("--spec-draft-n-max must be in [1, 64]");
  if (p.n_min < 0 || p.n_min > p.n_max) return Status::bad_input("--spec-draft-n-min must be in [0, --spec-draft-n-max]");
  if (p.ngram_size_n < 1 || p.ngram_size_n > 1024) return Status::bad_input("--spec-ngram-simple-size-n must be in [1, 1024]");
  if (p.ngram_size_m < 1 || p.ngram_size_m > 1024) return Status::bad_input("--spec-ngram-simple-size-m must be in [1, 1024]");
  if (p.ngram_mod_n_match < 1 || p.ngram_mod_n_match > 1024) {
    return Status::bad_input("--spec-ngram-mod-n-match must be in [1, 1024]");
  }
  if (p.ngram_mod_n_max < 1 || p.ngram_mod_n_max > 64) return Status::bad_input("--spec-ngram-mod-n-max must be in [1, 64]");
  if (p.ngram_mod_n_min < 0 || p.ngram_mod_n_min > p.ngram_mod_n_max) {
    return Status::bad_input("--spec-ngram-mod-n-min must be in [0, --spec-ngram-mod-n-max]");
  }
  if (p.ngram_min_hits < 1) return Status::bad_input("--spec-ngram-simple-min-hits must be at least 1");
  if (!(p.p_min >= 0 && p.p_min <= 1)) return Status::bad_input("--spec-draft-p-min must be in [0, 1]");
  if (!(p.replay_acceptance >= 0 && p.replay_acceptance <= 1)) return Status::bad_input("--spec-replay must be in [0, 1]");
  return Status::ok();
}

GreedyPick greedy_pick(std::span<const float> logits, double p_min) {
  const int32_t token = first_argmax(logits.data(), static_cast<int32_t>(logits.size()));
  const float best = logits[static_cast<size_t>(token)];
  GreedyPick pick{.token = token};
  if (p_min > 0) {
    double sum = 0;
    for (float l : logits) sum += math::exp_f64(static_cast<double>(l - best));
    pick.p = 1.0 / sum;
  }
  return pick;
}

void NgramSimpleDrafter::draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  const auto n = static_cast<int64_t>(params_.ngram_size_n);
  const auto len = static_cast<int64_t>(history.size());
  if (max_tokens <= 0 || len < n + 1) return;
  const int32_t* tail = history.data() + len - n;
  int64_t hits = 0, latest = -1;
  for (int64_t i = len - n - 1; i >= 0; --i) {  // earlier occurrences, latest first
    if (std::equal(tail, tail + n, history.data() + i)) {
      if (latest < 0) latest = i;
      ++hits;
      if (hits >= params_.ngram_min_hits) break;
    }
  }
  if (latest < 0 || hits < params_.ngram_min_hits) return;
  const int64_t from = latest + n;
  const int64_t count = std::min({max_tokens, static_cast<int64_t>(params_.ngram_size_m), len - from});
  out.assign(history.begin() + from, history.begin() + from + count);
}

size_t NgramModDrafter::slot(const int32_t* window) const {
  // A multiply-xorshift mix of the window's tokens.
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (int32_t i = 0; i < params_.ngram_mod_n_match; ++i) {
    h ^= static_cast<uint32_t>(window[i]);
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
  }
  return static_cast<size_t>(h % kSlots);
}

void NgramModDrafter::draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  const auto n = static_cast<size_t>(params_.ngram_mod_n_match);
  if (history.size() <= n || max_tokens <= 0) return;
  if (added_until_ > history.size()) added_until_ = 0;  // a new sequence: its n-grams go in anew
  // Windows whose next token is known: starting at i with i + n < history.size().
  for (size_t i = added_until_; i + n < history.size(); ++i) {
    int32_t& e = table_[slot(history.data() + i)];
    if (e == kEmpty) ++used_;
    e = history[i + n];
  }
  added_until_ = history.size() - n;
  if (used_ > kSlots / 4) {  // mostly stale: start over from this history
    std::fill(table_.begin(), table_.end(), kEmpty);
    used_ = 0;
    added_until_ = 0;
  }
  const int64_t want = std::min<int64_t>(max_tokens, params_.ngram_mod_n_max);
  window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  while (static_cast<int64_t>(out.size()) < want) {
    const int32_t next = table_[slot(window_.data() + out.size())];
    if (next == kEmpty) break;
    out.push_back(next);
    window_.push_back(next);
  }
  if (static_cast<int64_t>(out.size()) < std::min<int64_t>(params_.ngram_mod_n_min, want)) out.clear();
}

ReplayDrafter::ReplayDrafter(std::vector<int32_t> expected, int64_t prompt_tokens, int32_t n_vocab, double acceptance,
                             uint32_t seed)
    : expected_(std::move(expected)), prompt_tokens_(prompt_tokens), n_vocab_(n_vocab), acceptance_(acceptance), rng_(seed) {}

void ReplayDrafter::draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  // history ends with the last generated token (expected_[g − 1]); drafts continue at g.
  const int64_t g = static_cast<int64_t>(history.size()) - prompt_tokens_;
  if (g < 0 || n_vocab_ < 2) return;
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::uniform_int_distribution<int32_t> other(1, n_vocab_ - 1);
  for (int64_t i = g; i < static_cast<int64_t>(expected_.size()) && static_cast<int64_t>(out.size()) < max_tokens; ++i) {
    int32_t t = expected_[static_cast<size_t>(i)];
    if (coin(rng_) >= acceptance_) t = (t + other(rng_)) % n_vocab_;  // any other token
    out.push_back(t);
  }
}

Speculator::Speculator(const SpecParams& params, std::unique_ptr<Drafter> drafter)
    : params_(params), drafter_(std::move(drafter)), seconds_(static_cast<size_t>(params.n_max + 2), 0.0),
      chosen_(drafter_->bytes_per_token() > 0 ? std::max(1, params.n_min) : params.n_max) {}

double Speculator::estimated_acceptance() const { return (accepted_ewma_ + 1) / (drafted_ewma_ + 2); }

int64_t Speculator::best_length(double alpha, std::span<const double> t, int32_t n_min, int32_t n_max,
                                double draft_seconds) {
  alpha = std::clamp(alpha, 0.0, 0.999);
  const double t1 = t.size() > 1 && t[1] > 0 ? t[1] : 0;
  if (t1 <= 0) return n_max;  // nothing measured yet: try the longest draft
  const auto cost = [&](int64_t b) {
    if (b < static_cast<int64_t>(t.size()) && t[static_cast<size_t>(b)] > 0) return t[static_cast<size_t>(b)];
    return t1 * (1 + 0.1 * static_cast<double>(b - 1));
  };
  int64_t best = 0;
  double best_rate = 1 / t1;
  for (int64_t k = std::max<int64_t>(1, n_min); k <= n_max; ++k) {
    const double expected_tokens = (1 - math::pow_f64(alpha, static_cast<double>(k + 1))) / (1 - alpha);
    const double rate = expected_tokens / (cost(k + 1) + static_cast<double>(k) * draft_seconds);
    if (rate > best_rate) best = k, best_rate = rate;
  }
  return best;
}

int64_t Speculator::draft_length(int64_t max_tokens) {
  int64_t k = params_.adaptive ? chosen_ : params_.n_max;
  if (params_.adaptive && seconds_[1] <= 0 && stats_.n_steps > 0) {
    return 0;  // one plain step first: the rule compares against t(1), which must be measured
  }
  probing_ = false;
  if (k == 0) {
    if (++tokens_since_probe_ < probe_interval_) return 0;
    tokens_since_probe_ = 0;
    k = std::max(1, params_.n_min);  // probe: is the drafter agreeing now?
    probing_ = true;
  }
  return std::max<int64_t>(0, std::min(k, max_tokens));
}

void Speculator::take_draft(int64_t length, std::vector<int32_t>& out, double seconds_per_token) {
  if (!out.empty() && seconds_per_token > 0) {
    draft_seconds_ = draft_seconds_ > 0 ? 0.8 * draft_seconds_ + 0.2 * seconds_per_token : seconds_per_token;
  }
  if (static_cast<int64_t>(out.size()) > length) out.resize(static_cast<size_t>(length));
  if (static_cast<int64_t>(out.size()) < std::max(1, params_.n_min)) out.clear();
}

void Speculator::propose(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  const ProposeJob job{.spec = this, .history = history, .max_tokens = max_tokens, .out = &out};
  propose_together({&job, 1});
}

void propose_together(std::span<const ProposeJob> jobs) {
  std::vector<DraftJob> drafts;
  std::vector<size_t> of;  // drafts[i] is jobs[of[i]]'s
  std::vector<int64_t> length(jobs.size(), 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].out->clear();
    length[i] = jobs[i].spec->draft_length(jobs[i].max_tokens);
    if (length[i] <= 0) continue;
    drafts.push_back({.drafter = &jobs[i].spec->drafter(), .history = jobs[i].history, .max_tokens = length[i],
                      .out = jobs[i].out});
    of.push_back(i);
  }
  if (drafts.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  drafts[0].drafter->draft_jobs(drafts);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The drafters' time, shared out per drafted token (drafting together is what makes each
  // slot's draft cheaper).
  size_t n_drafted = 0;
  for (const DraftJob& d : drafts) n_drafted += d.out->size();
  const double per_token = n_drafted > 0 ? seconds / static_cast<double>(n_drafted) : 0;
  for (size_t i : of) jobs[i].spec->take_draft(length[i], *jobs[i].out, per_token);
}

void Speculator::record(int64_t drafted, int64_t accepted, int64_t batch_tokens, double seconds) {
  if (drafted > 0) {
    ++stats_.n_steps;
    stats_.n_drafted += drafted;
    stats_.n_accepted += accepted;
    // Per-token acceptance: each accepted draft is a success; a rejection ends the step.
    constexpr double kDecay = 0.95;
    drafted_ewma_ = kDecay * drafted_ewma_ + static_cast<double>(accepted + (accepted < drafted ? 1 : 0));
    accepted_ewma_ = kDecay * accepted_ewma_ + static_cast<double>(accepted);
    if (accepted > 0) {
      probe_interval_ = kProbeInterval;
    } else if (probing_) {
      probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
    }
    probing_ = false;
  }
  if (batch_tokens >= 1 && batch_tokens < static_cast<int64_t>(seconds_.size()) && seconds > 0) {
    double& s = seconds_[static_cast<size_t>(batch_tokens)];
    s = s > 0 ? 0.8 * s + 0.2 * seconds : seconds;
  }
  if (params_.adaptive) {
    chosen_ = best_length(estimated_acceptance(), seconds_, params_.n_min, params_.n_max, draft_seconds_);
  }
}

}  // namespace moetier
