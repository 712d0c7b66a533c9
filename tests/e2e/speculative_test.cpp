// Speculative decoding (runtime/speculative.h) gives the same output as plain decoding, on
// every reference model (attention-only qwen3moe and hybrid qwen35moe, whose DeltaNet state
// is rolled back through the journal):
//  * greedy, with drafts that are the plain run's own continuation corrupted at acceptance
//    rates 1 and 0.5 and draft lengths 1, 3 and 5, so every rollback length happens; verify
//    batches also cross micro-batches (n_ubatch 2);
//  * sampled (temperature 0.8, top-k, top-p, a seed): the sampler draws once per emitted
//    token in both, so equal seeds give equal tokens;
//  * the sequence afterwards: same n_past and the same logits for a further token (the
//    rolled-back state is the plain run's state, bit for bit).
// Plus the pieces: ngram-simple's lookup, the draft-length rule, the journal's truncate, a
// chi-square test of the verified tokens' distribution, and the CLI's errors for what is not
// supported.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"
#include "text/tokenizer.h"

namespace moetier {
namespace {

const std::string kRef = moetier::testing::kRefDir;

using Loaded = moetier::testing::LoadedWithTokenizer;

Loaded load(const std::string& name, int64_t n_ubatch) {
  return moetier::testing::load_with_tokenizer(kRef + "/models/" + name, n_ubatch);
}

struct Outcome {
  std::vector<int32_t> tokens;
  int64_t n_past = 0;
  std::vector<float> next_logits;  // after feeding one more token: the state's fingerprint
  SpecStats spec;
};

Outcome run_generation(Loaded& l, const std::vector<int32_t>& prompt, const SamplerParams& sampling, int64_t n_predict,
                       Speculator* speculator, ThreadPool& pool) {
  Outcome o;
  auto seq = l.model->new_sequence({.n_ctx = 512, .type_k = DType::F16, .type_v = DType::F16});
  EXPECT_TRUE(seq.is_ok());
  auto sampler = Sampler::create(sampling);
  EXPECT_TRUE(sampler.is_ok());
  auto stats = generate(*l.model, *seq, *l.tokenizer, *sampler, prompt,
                        {.n_predict = n_predict, .stop_at_eog = false, .speculator = speculator}, pool,
                        [](std::string_view) {}, [&](int32_t t) { o.tokens.push_back(t); });
  EXPECT_TRUE(stats.is_ok()) << stats.status().message();
  if (!stats.is_ok()) return o;
  o.spec = stats->spec;
  o.n_past = seq->n_past();
  const int32_t probe = 7;
  EXPECT_TRUE(l.model->forward({&probe, 1}, *seq, {}, o.next_logits, pool).is_ok());
  return o;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.n_past, b.n_past) << what;
  ASSERT_EQ(a.next_logits.size(), b.next_logits.size()) << what;
  EXPECT_EQ(std::memcmp(a.next_logits.data(), b.next_logits.data(), a.next_logits.size() * sizeof(float)), 0)
      << what << ": the sequence state after generation differs";
}

class SpeculativeEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeEquivalence, GreedyAndSampledOutputsEqualPlainDecoding) {
  ThreadPool pool(2);
  for (int64_t n_ubatch : {512, 2}) {
    Loaded l = load(GetParam(), n_ubatch);
    ASSERT_TRUE(l.model && l.tokenizer);
    const std::vector<int32_t> prompt = l.tokenizer->encode("Speculative decoding keeps the output. 12 34 56", {});
    const int32_t n_vocab = static_cast<int32_t>(l.model->hparams().n_vocab);
    constexpr int64_t kTokens = 24;
    struct Mode {
      const char* name;
      SamplerParams sampling;
    };
    const Mode modes[] = {{"greedy", {.temperature = 0.0f}},
                          {"sampled", {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 7}}};
    for (const Mode& mode : modes) {
      const Outcome plain = run_generation(l, prompt, mode.sampling, kTokens, nullptr, pool);
      ASSERT_EQ(static_cast<int64_t>(plain.tokens.size()), kTokens);
      for (double alpha : {1.0, 0.5}) {
        for (int32_t n_max : {1, 3, 5}) {
          SpecParams sp{.type = SpecType::kReplay, .n_max = n_max, .adaptive = false};
          Speculator spec(sp, std::make_unique<ReplayDrafter>(plain.tokens, static_cast<int64_t>(prompt.size()), n_vocab,
                                                               alpha, 11));
          const Outcome fast = run_generation(l, prompt, mode.sampling, kTokens, &spec, pool);
          const std::string what = GetParam() + " " + mode.name + " ubatch " + std::to_string(n_ubatch) + " alpha " +
                                    std::to_string(alpha) + " n_max " + std::to_string(n_max);
          expect_same(plain, fast, what);
          EXPECT_GT(fast.spec.n_drafted, 0) << what;
          if (alpha == 1.0 && mode.sampling.temperature == 0.0f) {
            EXPECT_EQ(fast.spec.n_accepted, fast.spec.n_drafted) << what;  // the drafts are the output itself
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ref, SpeculativeEquivalence,
                         ::testing::Values("qwen3moe-small-q4_k_m.gguf", "qwen35moe-small-q4_k_m.gguf",
                                           "qwen35moe-small-ud_mix.gguf", "qwen35moe-small-iq4_xs.gguf",
                                           "qwen35moe-tiny-mixed.gguf", "qwen35moe-tiny-f32.gguf",
                                           "qwen3moe-tiny-f32.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.size() - 5);
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// Speculative sampling keeps the target's distribution (not only the seeded equality
// above): over 4000 seeds at temperature 1, the first verified token (the second generated),
// given the first, is chi-square tested against softmax(target logits). The drafter proposes
// the target's most likely token (often accepted) and then a fixed other token, so both the
// acceptance and the rejection paths sample. Fixed seeds: the outcome is deterministic; the
// test rejects at p < 1e-3.
TEST(SpeculativeSampling, VerifiedTokensFollowTheTargetDistribution) {
  ThreadPool pool(2);
  Loaded l = load("qwen35moe-tiny-f32.gguf", 512);
  ASSERT_TRUE(l.model && l.tokenizer);
  const std::vector<int32_t> prompt = l.tokenizer->encode("Chi-square", {});
  const int64_t n_vocab = l.model->hparams().n_vocab;
  const SamplerParams base{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_last_n = 0};
  const auto softmax_after = [&](const std::vector<int32_t>& tokens) {
    auto seq = l.model->new_sequence({.n_ctx = 64, .type_k = DType::F16, .type_v = DType::F16});
    std::vector<float> logits;
    EXPECT_TRUE(l.model->forward(tokens, *seq, {}, logits, pool).is_ok());
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    std::vector<double> p(logits.size());
    for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(static_cast<double>(logits[i] - mx));
    for (double& x : p) x /= sum;
    return p;
  };
  const std::vector<double> p1 = softmax_after(prompt);
  const int32_t x1 = static_cast<int32_t>(std::max_element(p1.begin(), p1.end()) - p1.begin());
  std::vector<int32_t> given = prompt;
  given.push_back(x1);
  const std::vector<double> p2 = softmax_after(given);
  const int32_t likely = static_cast<int32_t>(std::max_element(p2.begin(), p2.end()) - p2.begin());
  const int32_t other = (likely + 1) % static_cast<int32_t>(n_vocab);

  class Fixed final : public Drafter {
   public:
    explicit Fixed(std::vector<int32_t> d) : d_(std::move(d)) {}
    void draft(std::span<const int32_t>, int64_t max_tokens, std::vector<int32_t>& out) override {
      out.assign(d_.begin(), d_.begin() + std::min<int64_t>(max_tokens, static_cast<int64_t>(d_.size())));
    }

   private:
    std::vector<int32_t> d_;
  };
  std::vector<int64_t> counts(static_cast<size_t>(n_vocab), 0);
  int64_t n = 0, accepted = 0, drafted = 0;
  for (uint32_t seed = 1; seed <= 4000; ++seed) {
    SamplerParams sp = base;
    sp.seed = seed;
    Speculator spec({.n_max = 2, .adaptive = false}, std::make_unique<Fixed>(std::vector<int32_t>{likely, other}));
    const Outcome o = run_generation(l, prompt, sp, 2, &spec, pool);
    ASSERT_EQ(o.tokens.size(), 2u);
    accepted += o.spec.n_accepted;
    drafted += o.spec.n_drafted;
    if (o.tokens[0] != x1) continue;
    ++counts[static_cast<size_t>(o.tokens[1])];
    ++n;
  }
  ASSERT_GE(n, 200) << "too few draws with the likely first token";
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  // Bins: tokens expected at least 5 times, the rest pooled.
  double chi2 = 0, pooled_expected = 0;
  int64_t pooled_count = 0, bins = 0;
  for (int64_t t = 0; t < n_vocab; ++t) {
    const double e = p2[static_cast<size_t>(t)] * static_cast<double>(n);
    if (e >= 5) {
      chi2 += (counts[static_cast<size_t>(t)] - e) * (counts[static_cast<size_t>(t)] - e) / e;
      ++bins;
    } else {
      pooled_expected += e;
      pooled_count += counts[static_cast<size_t>(t)];
    }
  }
  if (pooled_expected > 0) {
    chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  ASSERT_GE(bins, 3);
  // The chi-square quantile at 1 − 1e-3 (Wilson–Hilferty; z = 3.09).
  const double df = static_cast<double>(bins - 1);
  const double q = 1 - 2 / (9 * df) + 3.09 * std::sqrt(2 / (9 * df));
  const double critical = df * q * q * q;
  EXPECT_LT(chi2, critical) << "draws " << n << ", bins " << bins;
}

TEST(NgramSimpleDrafter, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  NgramSimpleDrafter d(SpecParams{.ngram_size_n = 2, .ngram_size_m = 3});
  std::vector<int32_t> out;
  // ... 5 6 [7 8 9] ... 5 6 [1 2] ... 5 6 → the latest earlier "5 6" is followed by 1 2 3.
  const std::vector<int32_t> h = {5, 6, 7, 8, 9, 4, 5, 6, 1, 2, 3, 0, 5, 6};
  d.draft(h, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3}));
  d.draft(h, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2}));  // max_tokens caps it
  d.draft(std::vector<int32_t>{1, 2, 3, 4}, 5, out);
  EXPECT_TRUE(out.empty());  // no earlier occurrence
  NgramSimpleDrafter twice(SpecParams{.ngram_size_n = 2, .ngram_size_m = 3, .ngram_min_hits = 2});
  twice.draft(std::vector<int32_t>{5, 6, 7, 1, 5, 6}, 5, out);
  EXPECT_TRUE(out.empty());  // one hit < min_hits
  twice.draft(h, 5, out);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3}));  // two hits: still the latest's continuation
}

TEST(NgramModDrafter, ChainsTheTableFromTheLastWindowAndNeedsNMinTokens) {
  // n_match 2: the history "1 2 3 4 5 6 … 1 2" continues with 3 4 5 6 from the table.
  const SpecParams p{.ngram_mod_n_match = 2, .ngram_mod_n_min = 3, .ngram_mod_n_max = 5};
  NgramModDrafter d(p);
  std::vector<int32_t> out;
  const std::vector<int32_t> h = {1, 2, 3, 4, 5, 6, 7, 9, 1, 2};
  d.draft(h, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, 5, 6, 7}));  // n_max 5
  d.draft(h, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4, 5, 6}));  // the speculator's cap
  // The last window never seen before: no draft.
  NgramModDrafter unseen(p);
  unseen.draft(std::vector<int32_t>{1, 2, 3, 4}, 10, out);
  EXPECT_TRUE(out.empty());
  // Fewer than n_min tokens allowed (the speculator's cap of 2 < n_min 3 is fine: n_min is
  // capped by it), and n_min above what a draft may hold.
  d.draft(h, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4}));
  // A later occurrence overwrites: "1 2 → 3" then "1 2 → 7".
  NgramModDrafter later(SpecParams{.ngram_mod_n_match = 2, .ngram_mod_n_min = 1, .ngram_mod_n_max = 1});
  later.draft(std::vector<int32_t>{1, 2, 3, 0, 1, 2, 7, 0, 1, 2}, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7}));
}

TEST(Speculator, DraftLengthMaximisesMeasuredTokensPerSecond) {
  // Flat verify cost: drafting pays for any acceptance; the longest draft wins when α is high.
  const std::vector<double> flat = {0, 1.0, 1.0, 1.0, 1.0, 1.0};
  EXPECT_EQ(Speculator::best_length(0.9, flat, 0, 4), 4);
  // Nothing accepted: E(k) = 1 for every k, no gain, so no drafting.
  EXPECT_EQ(Speculator::best_length(0.0, flat, 0, 4), 0);
  // A verify of 2 tokens costs 1.9× one token (a hybrid placement reading many experts):
  // α = 0.5 gives E(1) = 1.5 < 1.9, so drafting is off; α = 0.95 gives E(1) = 1.95 > 1.9.
  const std::vector<double> steep = {0, 1.0, 1.9, 2.8, 3.7, 4.6};
  EXPECT_EQ(Speculator::best_length(0.5, steep, 0, 4), 0);
  EXPECT_EQ(Speculator::best_length(0.95, steep, 0, 1), 1);
  // n_min: drafts shorter than it are never chosen.
  EXPECT_EQ(Speculator::best_length(0.9, flat, 3, 4), 4);
  // Nothing measured yet: try the longest.
  EXPECT_EQ(Speculator::best_length(0.5, std::vector<double>(6, 0.0), 0, 4), 4);
}

TEST(Speculator, SwitchesOffWhenNothingIsAcceptedAndProbesAgain) {
  class Wrong final : public Drafter {
   public:
    void draft(std::span<const int32_t>, int64_t max_tokens, std::vector<int32_t>& out) override {
      out.assign(static_cast<size_t>(max_tokens), -1);
    }
  };
  Speculator spec(SpecParams{.n_max = 4}, std::make_unique<Wrong>());
  std::vector<int32_t> out;
  const std::vector<int32_t> history = {1, 2, 3};
  spec.propose(history, 10, out);
  EXPECT_EQ(out.size(), 4u);  // optimistic start
  for (int i = 0; i < 20; ++i) {
    spec.record(static_cast<int64_t>(out.size()), 0, static_cast<int64_t>(out.size()) + 1, 1.3);
    spec.record(0, 0, 1, 1.0);
    spec.propose(history, 10, out);
    if (out.empty()) break;
  }
  EXPECT_EQ(spec.chosen_length(), 0);
  int64_t plain_steps = 0;
  while (out.empty() && plain_steps < 100) {
    spec.record(0, 0, 1, 1.0);
    spec.propose(history, 10, out);
    ++plain_steps;
  }
  EXPECT_EQ(out.size(), 1u);  // a one-token probe
  EXPECT_LE(plain_steps, Speculator::kProbeInterval);
  // The probe fails: the next one comes after twice as many tokens, and so on up to the cap.
  spec.record(1, 0, 2, 1.3);
  EXPECT_EQ(spec.probe_interval(), 2 * Speculator::kProbeInterval);
  for (int i = 0; i < 10; ++i) {
    do {
      spec.record(0, 0, 1, 1.0);
      spec.propose(history, 10, out);
    } while (out.empty());
    spec.record(1, 0, 2, 1.3);
  }
  EXPECT_EQ(spec.probe_interval(), Speculator::kMaxProbeInterval);
  // A probe that is accepted resets the interval.
  do {
    spec.record(0, 0, 1, 1.0);
    spec.propose(history, 10, out);
  } while (out.empty());
  spec.record(1, 1, 2, 1.3);
  EXPECT_EQ(spec.probe_interval(), Speculator::kProbeInterval);
}

TEST(Speculator, DraftersThatReadWeightsStartWithOneToken) {
  class Costly final : public Drafter {
   public:
    void draft(std::span<const int32_t>, int64_t max_tokens, std::vector<int32_t>& out) override {
      out.assign(static_cast<size_t>(max_tokens), 1);
    }
    uint64_t bytes_per_token() const override { return 1 << 20; }
  };
  Speculator spec(SpecParams{.n_max = 4}, std::make_unique<Costly>());
  std::vector<int32_t> out;
  spec.propose(std::vector<int32_t>{1, 2}, 10, out);
  EXPECT_EQ(out.size(), 1u);
}

TEST(SequenceStateJournal, TruncatesRecurrentStateToJournaledPositions) {
  const std::vector<LayerStateSpec> specs = {
      {.conv_state_elems = 3, .ssm_state_elems = 4, .ssm_heads = 1, .ssm_d_k = 2, .ssm_d_v = 2},
      {.k_row_elems = 32, .v_row_elems = 32}};
  auto seq = SequenceState::create(specs, {.n_ctx = 16, .type_k = DType::F32, .type_v = DType::F32});
  ASSERT_TRUE(seq.is_ok());
  seq->set_n_past(5);
  EXPECT_FALSE(seq->truncate(3));  // recurrent state, no journal
  ASSERT_TRUE(seq->begin_journal(3).is_ok());
  EXPECT_EQ(seq->journal_conv(0, 4), nullptr);  // before the window
  EXPECT_EQ(seq->journal_conv(0, 8), nullptr);  // after it
  EXPECT_EQ(seq->journal_conv(1, 5), nullptr);  // an attention layer has none
  // The pass over positions 5-7 (SSM records: tests/unit/rollback_journal_test.cpp).
  const SequenceState::SsmPass pass = seq->begin_ssm_pass(0, 3);
  EXPECT_EQ(pass.n_record, 3);
  EXPECT_NE(pass.source, pass.state);  // the window's first pass leaves the origin as it was
  for (int64_t pos = 5; pos < 8; ++pos) {
    for (int i = 0; i < 3; ++i) seq->journal_conv(0, pos)[i] = static_cast<float>(-pos - i);
  }
  seq->set_n_past(8);
  EXPECT_FALSE(seq->truncate(5));  // the state after position 4 was not recorded
  ASSERT_TRUE(seq->truncate(7));   // after the token at 6
  EXPECT_EQ(seq->n_past(), 7);
  EXPECT_EQ(seq->conv_state(0)[1], -7.0f);
  seq->end_journal();
  EXPECT_FALSE(seq->truncate(6));

  // A DeltaNet layer on a GPU journals through the sequence's GPU state; a sequence without
  // one (here: none was attached) is a clear error, not a wrong rollback. The GPU journal
  // itself: tests/gpu/vk_speculative_test.cpp.
  auto gpu = SequenceState::create({{.conv_state_elems = 3, .ssm_state_elems = 4, .on_device = true}},
                                   {.n_ctx = 16, .type_k = DType::F32, .type_v = DType::F32});
  ASSERT_TRUE(gpu.is_ok());
  const Status st = gpu->begin_journal(4);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("GPU"), std::string::npos) << st.message();
  EXPECT_FALSE(gpu->journal_active());
}

// ngram-mod through `run`: the same text as without, on a prompt that repeats; its own
// lengths (--spec-ngram-mod-*) and not the general ones.
TEST(SpeculativeCli, NgramModRunsAndKeepsTheOutput) {
  const std::string model = kRef + "/models/qwen3moe-tiny-f32.gguf";
  const std::string base = "run -m '" + model + "' -p 'a b c a b c a b c a b c' -n 48 --temp 0 -t 2";
  const auto plain = moetier::testing::run_moetier(base);
  const auto mod = moetier::testing::run_moetier(
      base + " --spec-type ngram-mod --spec-ngram-mod-n-match 2 --spec-ngram-mod-n-min 1 --spec-ngram-mod-n-max 4 "
             "--spec-adaptive off");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(mod.rc, 0) << mod.err;
  EXPECT_EQ(mod.out, plain.out);
  EXPECT_NE(mod.err.find("speculative (ngram-mod)"), std::string::npos) << mod.err;
  const auto wrong = moetier::testing::run_moetier(base + " --spec-type ngram-mod --spec-draft-n-max 8");
  EXPECT_EQ(wrong.rc, 2);
  EXPECT_NE(wrong.err.find("--spec-ngram-mod-n-min/-n-max"), std::string::npos) << wrong.err;
  // One drafter's settings with another drafter: an error, not ignored.
  const auto crossed = moetier::testing::run_moetier(base + " --spec-type ngram-mod --spec-ngram-simple-size-n 4");
  EXPECT_EQ(crossed.rc, 2);
  EXPECT_NE(crossed.err.find("apply to --spec-type ngram-simple"), std::string::npos) << crossed.err;
  const auto crossed2 = moetier::testing::run_moetier(base + " --spec-type ngram-simple --spec-ngram-mod-n-match 8");
  EXPECT_EQ(crossed2.rc, 2);
  EXPECT_NE(crossed2.err.find("apply to --spec-type ngram-mod"), std::string::npos) << crossed2.err;
}

// The CLI rejects what it cannot honour, with one clear line and exit status 2.
TEST(SpeculativeCli, UnsupportedTypesAndDraftModelsAreClearErrors) {
  const std::string model = kRef + "/models/qwen3moe-tiny-f32.gguf";
  for (const std::string& flags : {std::string("--spec-type draft-mtp"), std::string("--spec-type bogus"),
                                   std::string("-md x.gguf"), std::string("--spec-draft-p-min 0.5"),
                                   std::string("--spec-type ngram-simple --spec-draft-n-max 0"),
                                   std::string("--spec-draft-n-max 5")}) {  // no --spec-type: would be ignored
    const std::string cmd = std::string(MOETIER_BINARY) + " run -m " + model + " -p hi -n 2 " + flags + " 2>&1";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    const int status = pclose(f);
    EXPECT_EQ(WEXITSTATUS(status), 2) << flags << ": " << out;
    EXPECT_NE(out.find("error"), std::string::npos) << flags << ": " << out;
  }
  // serve: draft-mtp on a file without an MTP block is the same clear error, before listening.
  const std::string cmd = std::string(MOETIER_BINARY) + " serve -m " + model + " --port 0 --spec-type draft-mtp 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(f)), 2) << out;
  EXPECT_NE(out.find("no MTP head"), std::string::npos) << out;
}

}  // namespace
}  // namespace moetier
