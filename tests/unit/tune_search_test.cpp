// `moetier tune`'s search without a model: candidates from made-up plans, and the whole
// measurement plan against a fake Measurer whose speeds are a fixed function of the
// configuration (plus a small deterministic wobble) and whose clock advances by the time a
// repetition would take at those speeds. The search must find what a brute-force sweep of
// the same candidates finds, respect the time budget, and prefer the lighter of two
// indistinguishable configurations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tune/candidates.h"
#include "tune/report.h"
#include "tune/search.h"

namespace moetier::tune {
namespace {

// True speeds of a configuration, deterministic and without ties among the candidates:
// threads help up to 6 of 8 (7 and 8 are a little slower: the OS needs a core), -ub 256
// triples prompt speed (so serve and bench pick different winners), no-mmap and a q8_0 KV
// cache help generation a little, each block's experts kept on the CPU (-ncmoe) costs
// generation speed, and the CPU alone is slowest.
struct Speeds {
  double pp, tg;
  int64_t rss_mib;
};
Speeds true_speeds(const Candidate& c) {
  const double t = static_cast<double>(c.n_threads);
  const double f = t <= 6 ? t : 6 - 0.1 * (t - 6);
  const double pp = 100 * f * (c.n_ubatch == 256 ? 3.0 : c.n_ubatch == 128 ? 0.9 : 1.0);
  double tg = 10 * f * (c.use_mmap ? 1.0 : 1.05) * (c.type_kv == DType::Q8_0 ? 1.03 : 1.0);
  tg *= c.n_gpu_layers == 0 ? 0.25 : 1.0 - 0.02 * static_cast<double>(c.n_cpu_moe);
  return {pp, tg, 100 + (c.use_mmap ? 0 : 50)};
}

class FakeMeasurer final : public Measurer {
 public:
  explicit FakeMeasurer(std::function<Speeds(const Candidate&)> speeds) : speeds_(std::move(speeds)) {}
  double clock = 0;
  int64_t opens = 0;
  std::vector<Candidate> ran;  // every candidate that ran a repetition, in order
  std::function<bool(const Candidate&)> fails;  // candidates that cannot run (e.g. out of GPU memory)
  double warmup_s = 0.5;                        // untimed seconds of a candidate's first repetition

  Status open(std::span<const Candidate> set, RunSize size, int64_t) override {
    set_.assign(set.begin(), set.end());
    size_ = size;
    ms_.assign(set.size(), Measurement{});
    clock += 1.0;  // a model load
    ++opens;
    for (const Candidate& c : set) EXPECT_EQ(c.use_mmap, set.front().use_mmap) << "one load mode per set";
    return Status::ok();
  }
  Result<RepTiming> repetition(size_t i, int64_t rep) override {
    if (fails && fails(set_[i])) return Status::runtime("GPU memory budget exhausted");
    const Speeds s = speeds_(set_[i]);
    // ±0.2% alternating wobble: a spread for the statistics, far below the gaps between candidates.
    const double w = 1.0 + ((rep % 2 == 0) ? 0.002 : -0.002);
    ms_[i].pp_ts.push_back(s.pp * w);
    ms_[i].tg_ts.push_back(s.tg * w);
    ms_[i].rss_bytes = s.rss_mib << 20;
    const RepTiming t{.pp_s = static_cast<double>(size_.n_prompt) / s.pp, .tg_s = static_cast<double>(size_.n_gen) / s.tg};
    clock += t.pp_s + t.tg_s;
    if (rep == 0) clock += warmup_s;  // placement and warm-up, untimed
    ran.push_back(set_[i]);
    return t;
  }
  Result<std::vector<Measurement>> close() override { return ms_; }

 private:
  std::function<Speeds(const Candidate&)> speeds_;
  std::vector<Candidate> set_;
  RunSize size_;
  std::vector<Measurement> ms_;
};

SpaceParams gpu_space(Purpose purpose) {
  return SpaceParams{.purpose = purpose,
                     .gpu = true,
                     .n_layer_all = 40,
                     .fit_n_gpu_layers = 41,
                     .fit_n_cpu_moe = 34,
                     .physical_cores = 8,
                     .kv_types = {DType::F16, DType::Q8_0},
                     // The budget holds the experts of at most 7 blocks: -ncmoe >= 33.
                     .fits = [](const Candidate& c) { return c.n_cpu_moe >= 33 || c.n_gpu_layers == 0; }};
}

SearchParams params_for(FakeMeasurer& m, Purpose purpose, double budget) {
  return SearchParams{.purpose = purpose, .time_budget_s = budget, .now = [&m] { return m.clock; }};
}

double score_of(const Candidate& c, Purpose p) {
  const Speeds s = true_speeds(c);
  return p == Purpose::kBench ? s.tg : 1.0 / turn_seconds(s.pp, s.tg);
}

TEST(TuneCandidates, StartFirstNeighboursThatFitNoDuplicates) {
  const std::vector<Candidate> c = build_candidates(gpu_space(Purpose::kServe));
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].n_gpu_layers, 41);
  EXPECT_EQ(c[0].n_cpu_moe, 34);
  EXPECT_EQ(c[0].n_threads, 8);
  EXPECT_EQ(c[0].n_ubatch, 512);
  EXPECT_TRUE(c[0].use_mmap);
  std::vector<int64_t> ncmoe;
  for (const Candidate& x : c) {
    EXPECT_TRUE(x.n_cpu_moe >= 33 || x.n_gpu_layers == 0) << x.why << " does not fit";
    EXPECT_EQ(std::count(c.begin(), c.end(), x), 1) << x.why;
    if (x.n_gpu_layers == 41 && x.n_threads == 8 && x.n_ubatch == 512 && x.use_mmap && x.type_kv == DType::F16) {
      ncmoe.push_back(x.n_cpu_moe);
    }
  }
  // 34 (start), 33 (N-1), 35 (N+1), 36 (N+2), 40 (-cmoe); 32 (N-2) does not fit.
  EXPECT_EQ(ncmoe, (std::vector<int64_t>{34, 33, 35, 36, 40}));
  const auto has = [&](auto pred) { return std::any_of(c.begin(), c.end(), pred); };
  EXPECT_TRUE(has([](const Candidate& x) { return x.n_gpu_layers == 0; }));
  EXPECT_TRUE(has([](const Candidate& x) { return x.n_threads == 7; }));
  EXPECT_TRUE(has([](const Candidate& x) { return x.n_threads == 4; }));
  EXPECT_TRUE(has([](const Candidate& x) { return x.n_ubatch == 128; }));
  EXPECT_TRUE(has([](const Candidate& x) { return !x.use_mmap; }));
  EXPECT_TRUE(has([](const Candidate& x) { return x.type_kv == DType::Q8_0; }));
  EXPECT_FALSE(has([](const Candidate& x) { return x.type_kv == DType::Q4_0; })) << "not allowed";
}

TEST(TuneCandidates, WithoutGpuThePlacementCollapsesAndBenchSkipsUbatch) {
  const std::vector<Candidate> c =
      build_candidates({.purpose = Purpose::kBench, .gpu = false, .n_layer_all = 4, .physical_cores = 2});
  for (const Candidate& x : c) {
    EXPECT_EQ(x.n_gpu_layers, 0);
    EXPECT_EQ(x.n_cpu_moe, 0);
    EXPECT_EQ(x.n_ubatch, 512);
  }
  // start (t=2), t=1, --no-mmap
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(candidate_flags(c[0], Purpose::kBench, 4), "-t 2 -ngl 0");
  EXPECT_EQ(candidate_flags(c[2], Purpose::kServe, 4), "-t 2 -ngl 0 --no-mmap");
  Candidate cmoe{.n_gpu_layers = 5, .n_cpu_moe = 4, .n_threads = 2, .type_kv = DType::Q8_0};
  EXPECT_EQ(candidate_flags(cmoe, Purpose::kServe, 4), "-t 2 -ngl 99 -cmoe -ctk q8_0 -ctv q8_0");
  EXPECT_EQ(candidate_flags(cmoe, Purpose::kBench, 4), "-t 2 -ngl 99 -ncmoe 4 -ctk q8_0 -ctv q8_0");
}

// The search with an ample budget picks the brute-force argmax of the true score over the
// same candidates, for both purposes.
TEST(TuneSearch, FindsWhatABruteForceSweepFinds) {
  for (Purpose purpose : {Purpose::kServe, Purpose::kBench}) {
    const std::vector<Candidate> cands = build_candidates(gpu_space(purpose));
    const auto best = std::max_element(cands.begin(), cands.end(), [&](const Candidate& a, const Candidate& b) {
      return score_of(a, purpose) < score_of(b, purpose);
    });
    FakeMeasurer m(true_speeds);
    auto r = run_search(cands, m, params_for(m, purpose, 1e6));
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->n_skipped, 0);
    EXPECT_TRUE(r->phase2);
    EXPECT_EQ(r->phase2_reps, 5);
    EXPECT_EQ(r->candidates[r->winner].candidate, *best) << purpose_name(purpose) << ": " << r->candidates[r->winner].candidate.why;
    ASSERT_TRUE(r->ci.has_value());
    EXPECT_FALSE(r->no_difference);
    EXPECT_GT(r->ci->low, 1.0);
    // Phase 1: one load per mmap mode; phase 2: one load for finalists of the same mode (serve:
    // -ub 256 and -ncmoe 33), two for different ones (bench: -ncmoe 33 and --no-mmap).
    EXPECT_EQ(m.opens, purpose == Purpose::kServe ? 3 : 4);
  }
}

// Phase 1 is interleaved: the first round runs every candidate once before any runs twice.
TEST(TuneSearch, PhaseOneRunsRoundRobin) {
  const std::vector<Candidate> cands = build_candidates({.purpose = Purpose::kServe, .physical_cores = 4});
  FakeMeasurer m(true_speeds);
  ASSERT_TRUE(run_search(cands, m, params_for(m, Purpose::kServe, 1e6)).is_ok());
  // mmap candidates: start, t=3, t=2, ub 256, ub 128 → two rounds of 5, then the no-mmap load.
  std::vector<Candidate> mmap_runs;
  for (size_t i = 0; i < 10; ++i) mmap_runs.push_back(m.ran[i]);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(mmap_runs[i], mmap_runs[i + 5]);
}

// A short budget: the start always runs, later candidates are left out, the search ends
// within the budget plus at most one repetition's overshoot and still has a winner.
TEST(TuneSearch, TimeBudgetLeavesCandidatesOutButAlwaysAnswers) {
  const std::vector<Candidate> cands = build_candidates(gpu_space(Purpose::kServe));
  FakeMeasurer m(true_speeds);
  // A short repetition of the start takes 128/580 + 32/18.56 ≈ 1.9 s (+ 0.5 s warm-up), a
  // full-size one 4× that; the phase-2 reserve (2 finalists × 3 rounds) is ~48 s.
  auto r = run_search(cands, m, params_for(m, Purpose::kServe, 60));
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->candidates[0].measured);
  EXPECT_GT(r->n_skipped, 0);
  EXPECT_LT(r->n_skipped, static_cast<int64_t>(cands.size()));
  EXPECT_LE(m.clock, 60 * 1.1);
  EXPECT_TRUE(r->phase2) << r->phase2_note;
  EXPECT_TRUE(r->candidates[r->winner].measured);

  FakeMeasurer tiny(true_speeds);
  auto r1 = run_search(cands, tiny, params_for(tiny, Purpose::kServe, 0.001));
  ASSERT_TRUE(r1.is_ok());
  EXPECT_EQ(r1->winner, 0u);
  EXPECT_FALSE(r1->runner_up.has_value());
  EXPECT_FALSE(r1->phase2);
  EXPECT_EQ(r1->n_skipped, static_cast<int64_t>(cands.size()) - 1);
  const std::string md = render_markdown({.purpose = Purpose::kServe, .n_layer_all = 40, .result = *r1});
  EXPECT_NE(md.find("only one candidate was measured"), std::string::npos) << md;
}

// Two configurations as fast as each other: the one with less memory is reported.
TEST(TuneSearch, NoDifferencePrefersTheLighterOne) {
  const std::vector<Candidate> cands = build_candidates({.purpose = Purpose::kBench, .physical_cores = 2, .threads = {2}});
  ASSERT_EQ(cands.size(), 2u);  // start (mmap), --no-mmap
  // no-mmap a hair faster on average but within noise, and 50 MiB heavier.
  FakeMeasurer m([](const Candidate& c) {
    Speeds s = true_speeds(c);
    s.tg = c.use_mmap ? 20.0 : 20.01;
    return s;
  });
  auto r = run_search(cands, m, params_for(m, Purpose::kBench, 1e6));
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->no_difference);
  EXPECT_TRUE(r->chose_lighter);
  EXPECT_EQ(r->lighter_reason, "less peak − idle memory (100.0 vs 150.0 MiB)");
  EXPECT_TRUE(r->candidates[r->winner].candidate.use_mmap);
  ASSERT_TRUE(r->ci.has_value());
  EXPECT_LT(r->ci->ratio, 1.0);
  EXPECT_TRUE(r->ci->includes_one());
  const std::string md = render_markdown({.model_path = "m.gguf", .purpose = Purpose::kBench, .n_layer_all = 4, .result = *r});
  EXPECT_NE(md.find("no difference"), std::string::npos) << md;
  EXPECT_NE(md.find("    moetier bench -m m.gguf -t 2 -ngl 0\n"), std::string::npos) << md;
}

// Within noise and within 5% of memory: the one with fewer flags (here: without --no-mmap).
TEST(TuneSearch, NoDifferenceAtTheSameMemoryPrefersFewerFlags) {
  const std::vector<Candidate> cands = build_candidates({.purpose = Purpose::kBench, .physical_cores = 2, .threads = {2}});
  FakeMeasurer m([](const Candidate& c) { return Speeds{100, c.use_mmap ? 20.0 : 20.01, c.use_mmap ? 100 : 98}; });
  auto r = run_search(cands, m, params_for(m, Purpose::kBench, 1e6));
  ASSERT_TRUE(r.is_ok());
  EXPECT_TRUE(r->no_difference);
  EXPECT_TRUE(r->candidates[r->winner].candidate.use_mmap);
  EXPECT_EQ(r->lighter_reason, "fewer flags at the same memory");
}

// A candidate that cannot run is dropped with its reason; the search goes on, and a start
// that cannot run does not leave the search without an answer.
TEST(TuneSearch, FailedCandidatesAreDroppedNotFatal) {
  const std::vector<Candidate> cands = build_candidates(gpu_space(Purpose::kBench));
  FakeMeasurer m(true_speeds);
  m.fails = [](const Candidate& c) { return c.n_gpu_layers > 0 && c.n_cpu_moe <= 34; };  // start and -ncmoe 33
  auto r = run_search(cands, m, params_for(m, Purpose::kBench, 0.001));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_FALSE(r->candidates[0].measured);
  EXPECT_EQ(r->candidates[0].failure, "GPU memory budget exhausted");
  EXPECT_TRUE(r->candidates[r->winner].measured);
  EXPECT_EQ(r->candidates[r->winner].candidate.n_cpu_moe, 35) << "the first that ran (-ncmoe 35, N+1)";
  const std::string md = render_markdown({.purpose = Purpose::kBench, .n_layer_all = 40, .result = *r});
  EXPECT_NE(md.find("failed: GPU memory budget exhausted"), std::string::npos) << md;

  FakeMeasurer all_fail(true_speeds);
  all_fail.fails = [](const Candidate&) { return true; };
  auto none = run_search(cands, all_fail, params_for(all_fail, Purpose::kBench, 1e6));
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no candidate could run"), std::string::npos);
}

TEST(TuneSearch, ServeScoreIsTheChatTurnTime) {
  EXPECT_DOUBLE_EQ(turn_seconds(512, 128), 2.0);
  const Measurement m{.pp_ts = {512, 1024}, .tg_ts = {128, 64}};
  EXPECT_EQ(score_samples(m, Purpose::kServe), (std::vector<double>{0.5, 1.0 / 2.5}));
  EXPECT_EQ(score_samples(m, Purpose::kBench), (std::vector<double>{128, 64}));
}

}  // namespace
}  // namespace moetier::tune
