#include "tune/search.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace moetier::tune {

double turn_seconds(double pp_ts, double tg_ts) {
  if (pp_ts <= 0 || tg_ts <= 0) return INFINITY;
  return kTurnPromptTokens / pp_ts + kTurnGenTokens / tg_ts;
}

std::vector<double> score_samples(const Measurement& m, Purpose purpose) {
  std::vector<double> out;
  for (int64_t i = 0; i < m.reps(); ++i) {
    const auto k = static_cast<size_t>(i);
    if (purpose == Purpose::kBench) {
      out.push_back(m.tg_ts[k]);
    } else {
      const double t = turn_seconds(m.pp_ts[k], m.tg_ts[k]);
      out.push_back(std::isfinite(t) ? 1.0 / t : 0.0);
    }
  }
  return out;
}

const Measurement& SearchResult::final_measurement(size_t i) const {
  const CandidateResult& c = candidates[i];
  return c.full_run ? *c.full_run : c.short_run;
}

namespace {

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : bench::summarize(std::span<const double>(v)).mean;
}

// Seconds one repetition of `size` takes at the measured mean speeds.
double rep_seconds(const Measurement& m, RunSize size) {
  const double pp = mean_of(m.pp_ts), tg = mean_of(m.tg_ts);
  double s = 0;
  if (size.n_prompt > 0) s += pp > 0 ? static_cast<double>(size.n_prompt) / pp : 0;
  if (size.n_gen > 0) s += tg > 0 ? static_cast<double>(size.n_gen) / tg : 0;
  return s;
}

// Candidate indices grouped by load mode, groups in order of first appearance.
std::vector<std::vector<size_t>> load_groups(const std::vector<Candidate>& c, const std::vector<size_t>& which) {
  std::vector<std::vector<size_t>> groups;
  std::vector<bool> mode;
  for (size_t i : which) {
    auto it = std::find(mode.begin(), mode.end(), c[i].use_mmap);
    if (it == mode.end()) {
      mode.push_back(c[i].use_mmap);
      groups.push_back({i});
    } else {
      groups[static_cast<size_t>(it - mode.begin())].push_back(i);
    }
  }
  return groups;
}

int64_t memory_of(const Measurement& m) { return m.rss_bytes.value_or(0) + m.vram_bytes.value_or(0); }

// Phase 2 is reserved for at least this many rounds while admitting phase-1 candidates
// (it runs as many as the budget then allows, up to full_reps; fewer than 2 give no spread).
constexpr int64_t kMinPhase2Reps = 2;

class Phase1 {
 public:
  Phase1(const std::vector<Candidate>& cands, Measurer& m, const SearchParams& p, SearchResult& r)
      : cands_(cands), m_(m), p_(p), r_(r), t0_(p.now()) {}

  Status run() {
    std::vector<size_t> all(cands_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    if (p_.on_phase) {
      p_.on_phase(fmt::format("phase 1: {} candidates, pp{} + tg{}, {} repetitions each, interleaved", cands_.size(),
                              p_.short_size.n_prompt, p_.short_size.n_gen, p_.short_reps),
                  static_cast<int64_t>(cands_.size()) * p_.short_reps);
    }
    for (const std::vector<size_t>& group : load_groups(cands_, all)) RETURN_IF_ERROR(run_group(group));
    return Status::ok();
  }

 private:
  double elapsed() const { return p_.now() - t0_; }
  double mean_or_zero(double sum, int64_t n) const { return n > 0 ? sum / static_cast<double>(n) : 0.0; }
  // A short repetition's timed seconds, and the untimed cost of a candidate's first one
  // (placement, warm-up), from those measured so far.
  double typical_rep() const { return mean_or_zero(timed_s_, n_timed_); }
  double typical_overhead() const { return mean_or_zero(overhead_s_, n_ok_); }
  // Phase 2's two finalists at full size for kMinPhase2Reps rounds plus their warm-ups: each
  // part of a short repetition scaled by its token ratio (pp and tg grow linearly), averaged
  // over the candidates so far (the finalists are the fastest, so this errs long).
  double phase2_estimate() const {
    const double full_rep = mean_or_zero(full_rep_s_, n_ok_);
    return 2.0 * (static_cast<double>(kMinPhase2Reps + 1) * full_rep + typical_overhead());
  }
  bool admit(size_t k, double committed_s) const {
    // The start always runs, and so does every candidate until one has run: there is always a result.
    if (k == 0 || n_ok_ == 0) return true;
    const double own = typical_overhead() + static_cast<double>(p_.short_reps) * typical_rep();
    // Phase 2 is reserved from the third candidate on: a comparison needs two candidates,
    // phase 2 only sharpens it (on a slow device the budget may allow one but not both).
    const double reserve = n_ok_ >= 2 ? phase2_estimate() : 0.0;
    return elapsed() + committed_s + own + reserve <= p_.time_budget_s;
  }

  Status run_group(const std::vector<size_t>& group) {
    // A new load costs about what the last one did; skip the whole group when not even its
    // first candidate fits.
    if (!admit(group.front(), load_s_)) {
      for (size_t k : group) skip(k);
      return Status::ok();
    }
    std::vector<Candidate> set;
    for (size_t k : group) set.push_back(cands_[k]);
    const double t_open = p_.now();
    RETURN_IF_ERROR(m_.open(set, p_.short_size, p_.short_reps));
    load_s_ = p_.now() - t_open;
    std::vector<bool> admitted(group.size(), false);
    for (int64_t rep = 0; rep < p_.short_reps; ++rep) {
      for (size_t j = 0; j < group.size(); ++j) {
        if (rep == 0) {
          // Committed: the remaining repetitions of those admitted in this group.
          double committed = 0;
          for (size_t q = 0; q < j; ++q) {
            if (admitted[q]) committed += static_cast<double>(p_.short_reps - 1) * typical_rep();
          }
          if (!admit(group[j], committed)) {
            skip(group[j]);
            continue;
          }
          admitted[j] = true;
        } else if (!admitted[j]) {
          continue;
        }
        const double t = p_.now();
        Result<RepTiming> timing = m_.repetition(j, rep);
        if (!timing.is_ok()) {
          // This configuration cannot run here (e.g. its GPU part does not fit after all):
          // say so and go on with the others.
          admitted[j] = false;
          r_.candidates[group[j]].failure = timing.status().message();
          if (p_.log) p_.log(fmt::format("{}: failed: {}", cands_[group[j]].why, timing.status().message()));
          if (p_.on_step) {
            for (int64_t i = rep; i < p_.short_reps; ++i) p_.on_step();
          }
          continue;
        }
        const double wall = p_.now() - t;
        const double timed = timing->pp_s + timing->tg_s;
        timed_s_ += timed;
        ++n_timed_;
        if (rep == 0) {
          ++n_ok_;
          overhead_s_ += std::max(0.0, wall - timed);
          full_rep_s_ += timing->pp_s * ratio(p_.full_size.n_prompt, p_.short_size.n_prompt) +
                         timing->tg_s * ratio(p_.full_size.n_gen, p_.short_size.n_gen);
        }
        if (p_.on_step) p_.on_step();
      }
    }
    ASSIGN_OR_RETURN(std::vector<Measurement> ms, m_.close());
    for (size_t j = 0; j < group.size() && j < ms.size(); ++j) {
      if (!admitted[j]) continue;
      CandidateResult& cr = r_.candidates[group[j]];
      cr.measured = true;
      cr.short_run = std::move(ms[j]);
    }
    return Status::ok();
  }

  static double ratio(int64_t full, int64_t short_n) {
    return short_n > 0 ? static_cast<double>(full) / static_cast<double>(short_n) : 1.0;
  }

  void skip(size_t k) {
    ++r_.n_skipped;
    if (p_.log) p_.log(fmt::format("{}: left out (the --time-budget would be exceeded)", cands_[k].why));
    if (p_.on_step) {
      for (int64_t i = 0; i < p_.short_reps; ++i) p_.on_step();
    }
  }

  const std::vector<Candidate>& cands_;
  Measurer& m_;
  const SearchParams& p_;
  SearchResult& r_;
  double t0_;
  double timed_s_ = 0;      // timed seconds of every short repetition so far
  int64_t n_timed_ = 0;
  double overhead_s_ = 0;   // untimed seconds of the candidates' first repetitions
  double full_rep_s_ = 0;   // estimated full-size repetition seconds, summed over candidates
  double load_s_ = 0;
  int64_t n_ok_ = 0;        // candidates whose first repetition ran
};

// The index of the best mean score among `which`.
std::vector<size_t> ranked(const SearchResult& r, const std::vector<size_t>& which, Purpose purpose) {
  std::vector<std::pair<double, size_t>> s;
  for (size_t i : which) s.emplace_back(mean_of(score_samples(r.final_measurement(i), purpose)), i);
  std::stable_sort(s.begin(), s.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> out;
  for (const auto& e : s) out.push_back(e.second);
  return out;
}

}  // namespace

Result<SearchResult> run_search(const std::vector<Candidate>& candidates, Measurer& measurer, const SearchParams& p) {
  if (candidates.empty()) return Status::bad_input("tune: no candidates to measure");
  if (!p.now) return Status::runtime("tune: no clock");
  if (p.short_reps < 1 || p.full_reps < 2) return Status::bad_input("tune: repetitions out of range");
  SearchResult r;
  for (const Candidate& c : candidates) r.candidates.push_back({.candidate = c});
  const double t0 = p.now();
  {
    Phase1 phase1(candidates, measurer, p, r);
    RETURN_IF_ERROR(phase1.run());
  }
  std::vector<size_t> measured;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    if (r.candidates[i].measured) measured.push_back(i);
  }
  if (measured.empty()) {
    return Status::runtime(fmt::format("tune: no candidate could run here (the start: {})", r.candidates[0].failure));
  }
  std::vector<size_t> order = ranked(r, measured, p.purpose);

  // Phase 2: the best two at full size, as many rounds as the budget allows (at most
  // full_reps, none below 2: one repetition has no spread to compare).
  if (order.size() >= 2) {
    const std::vector<size_t> finalists = {order[0], order[1]};
    double per_round = 0;
    for (size_t i : finalists) per_round += rep_seconds(r.candidates[i].short_run, p.full_size);
    const bool same_load = candidates[finalists[0]].use_mmap == candidates[finalists[1]].use_mmap;
    // One round's worth for the two warm-ups (a full-size prompt each) and the placements.
    const double left = p.time_budget_s - (p.now() - t0) - per_round;
    int64_t reps = per_round > 0 ? static_cast<int64_t>(std::floor(left / per_round)) : p.full_reps;
    reps = std::min(reps, p.full_reps);
    if (reps < 2) {
      r.phase2_note = fmt::format("phase 2 skipped: {:.0f} s left of the --time-budget, one full-size round of the "
                                  "two best takes ~{:.0f} s; the verdict rests on phase 1", std::max(0.0, left + per_round), per_round);
    } else {
      if (reps < p.full_reps) {
        r.phase2_note = fmt::format("phase 2 shortened to {} repetitions by the --time-budget", reps);
      }
      if (p.on_phase) {
        p.on_phase(fmt::format("phase 2: the best two, pp{} + tg{}, {} repetitions each{}", p.full_size.n_prompt,
                               p.full_size.n_gen, reps, same_load ? ", interleaved" : ""),
                   2 * reps);
      }
      Status phase2 = Status::ok();
      for (const std::vector<size_t>& group : load_groups(candidates, finalists)) {
        std::vector<Candidate> set;
        for (size_t k : group) set.push_back(candidates[k]);
        RETURN_IF_ERROR(measurer.open(set, p.full_size, reps));
        for (int64_t rep = 0; rep < reps && phase2.is_ok(); ++rep) {
          for (size_t j = 0; j < group.size() && phase2.is_ok(); ++j) {
            phase2 = measurer.repetition(j, rep).status();
            if (p.on_step) p.on_step();
          }
        }
        ASSIGN_OR_RETURN(std::vector<Measurement> ms, measurer.close());
        if (!phase2.is_ok()) break;
        for (size_t j = 0; j < group.size() && j < ms.size(); ++j) r.candidates[group[j]].full_run = std::move(ms[j]);
      }
      if (phase2.is_ok()) {
        r.phase2 = true;
        r.phase2_reps = reps;
        r.phase2_interleaved = same_load;
        order = ranked(r, finalists, p.purpose);
      } else {
        // A finalist that ran short but not at full size (e.g. its larger prompt batches do not
        // fit): the verdict rests on phase 1.
        for (size_t i : finalists) r.candidates[i].full_run.reset();
        r.phase2_note = fmt::format("phase 2 failed ({}); the verdict rests on phase 1", phase2.message());
        if (p.log) p.log(r.phase2_note);
      }
    }
  }

  r.winner = order.front();
  if (order.size() >= 2) {
    r.runner_up = order[1];
    const std::vector<double> w = score_samples(r.final_measurement(r.winner), p.purpose);
    const std::vector<double> u = score_samples(r.final_measurement(*r.runner_up), p.purpose);
    r.ci = bench::ratio_ci(bench::summarize(std::span<const double>(u)), bench::summarize(std::span<const double>(w)));
    if (r.ci && r.ci->includes_one()) {
      r.no_difference = true;
      // Indistinguishable: report the lighter one (less peak − idle memory, then fewer flags).
      // Footprints within 5% (at least 1 MiB) count as equal: the pages a run happens to
      // touch vary by that much between load modes, and a smaller difference is not worth a flag.
      const Candidate& cw = candidates[r.winner];
      const Candidate& cu = candidates[*r.runner_up];
      const int64_t mw = memory_of(r.final_measurement(r.winner)), mu = memory_of(r.final_measurement(*r.runner_up));
      const int64_t same = std::max<int64_t>(int64_t{1} << 20, std::max(mw, mu) / 20);
      constexpr double kMiB = 1048576.0;
      if (mu + same < mw) {
        r.lighter_reason = fmt::format("less peak − idle memory ({:.1f} vs {:.1f} MiB)", mu / kMiB, mw / kMiB);
      } else if (std::llabs(mu - mw) <= same && complexity(cu) < complexity(cw)) {
        r.lighter_reason = "fewer flags at the same memory";
      }
      if (!r.lighter_reason.empty()) {
        std::swap(r.winner, *r.runner_up);
        r.chose_lighter = true;
        r.ci = bench::RatioCi{.ratio = 1.0 / r.ci->ratio, .low = 1.0 / r.ci->high, .high = 1.0 / r.ci->low, .df = r.ci->df};
      }
    }
  }
  r.elapsed_s = p.now() - t0;
  return r;
}

}  // namespace moetier::tune
