// Samplers: each stage on hand-computed cases, the chain against token sequences produced
// by llama.cpp's own samplers, seeded determinism and a chi-square check of the draw.
#include <bit>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/sampler_logprobs.h"
#include "runtime/sampler_stages.h"

namespace moetier {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every filter off, temperature 1: the draw sees the (penalised) softmax of the logits.
constexpr SamplerParams kPlainSoftmax{
    .temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 1234};

Sampler make_sampler(const SamplerParams& params) {
  Result<Sampler> s = Sampler::create(params);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return std::move(s).value();
}

CandidateList list_of(const std::vector<float>& logits) {
  CandidateList list;
  list.fill(logits.data(), static_cast<int32_t>(logits.size()));
  return list;
}

std::vector<int32_t> tokens_of(std::span<const Candidate> cands) {
  std::vector<int32_t> out;
  for (const Candidate& c : cands) out.push_back(c.token);
  return out;
}

// Logits whose softmax is exactly `probs` up to float rounding (~1e-7 relative).
std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Five-token distribution used by the filter tests. Sorted: t1 0.40, t3 0.25, t2 0.20,
// t0 0.10, t4 0.05; cumulative 0.40, 0.65, 0.85, 0.95, 1.00.
const std::vector<double> kProbs5 = {0.10, 0.40, 0.20, 0.25, 0.05};

// ---------------------------------------------------------------------------- stages

TEST(SamplerPenalties, FormulasOnHandComputedLogits) {
  // Window {0, 0, 1, 3}: counts t0 = 2, t1 = 1, t3 = 1. repeat 2, frequency 0.5, presence 0.25.
  //   t0:  2 > 0 -> 2/2 = 1;     1 - (2*0.5 + 0.25) = -0.25
  //   t1: -1 <= 0 -> -1*2 = -2;  -2 - (1*0.5 + 0.25) = -2.75
  //   t2:  not in window, 0.5
  //   t3:  3 > 0 -> 1.5;         1.5 - 0.75 = 0.75
  //   t4:  not in window, -2
  CandidateList list = list_of({2.0f, -1.0f, 0.5f, 3.0f, -2.0f});
  std::vector<int32_t> scratch;
  const std::vector<int32_t> window = {0, 0, 1, 3};
  apply_penalties(PenaltyParams{.repeat = 2.0f, .frequency = 0.5f, .presence = 0.25f}, window, &list,
                  &scratch);
  const std::vector<float> expected = {-0.25f, -2.75f, 0.5f, 0.75f, -2.0f};
  ASSERT_EQ(list.size, 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(list.items[i].logit, expected[i]) << "token " << i;
  for (int32_t c : scratch) EXPECT_EQ(c, 0);  // scratch left clean for the next call
}

TEST(SamplerPenalties, ZeroLogitIsMultipliedAndOutOfRangeIdsIgnored) {
  CandidateList list = list_of({0.0f, 1.0f});
  std::vector<int32_t> scratch;
  const std::vector<int32_t> window = {0, 7, -3};
  apply_penalties(PenaltyParams{.repeat = 3.0f, .frequency = 0.0f, .presence = 1.0f}, window, &list,
                  &scratch);
  EXPECT_EQ(list.items[0].logit, -1.0f);  // 0 * 3 - 1
  EXPECT_EQ(list.items[1].logit, 1.0f);
}

TEST(SamplerPenalties, OnlyTheLastNAcceptedTokensCount) {
  // repeat_last_n = 2: after accepting 0, 0, 1, 3 the window is {1, 3}; token 0 is free again.
  SamplerParams params = kPlainSoftmax;
  params.repeat_penalty = 2.0f;
  params.repeat_last_n = 2;
  Sampler sampler = make_sampler(params);
  for (int32_t t : {0, 0, 1, 3}) sampler.accept(t);
  EXPECT_EQ(sampler.window(), (std::vector<int32_t>{1, 3}));
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  sampler.sample(logits.data(), 5);
  // No filter ran, so the candidates are still the whole vocabulary in id order.
  std::vector<float> got;
  for (const Candidate& c : sampler.candidates()) got.push_back(c.logit);
  EXPECT_EQ(got, (std::vector<float>{2.0f, -2.0f, 0.5f, 1.5f, -2.0f}));
}

TEST(SamplerPenalties, DisabledWhenLastNIsZero) {
  SamplerParams params = kPlainSoftmax;
  params.repeat_penalty = 2.0f;
  params.repeat_last_n = 0;
  Sampler sampler = make_sampler(params);
  sampler.accept(1);
  EXPECT_TRUE(sampler.window().empty());
  const std::vector<float> logits = {0.0f, 4.0f};
  sampler.sample(logits.data(), 2);
  EXPECT_EQ(sampler.candidates()[1].logit, 4.0f);
}

TEST(SamplerTopK, KeepsTheKHighestSorted) {
  CandidateList list = list_of({1.0f, 5.0f, 3.0f, 4.0f, 2.0f});
  keep_top_k(2, &list);
  EXPECT_TRUE(list.sorted);
  EXPECT_EQ(tokens_of(list.live()), (std::vector<int32_t>{1, 3}));

  CandidateList all = list_of({1.0f, 5.0f, 3.0f, 4.0f, 2.0f});
  keep_top_k(10, &all);  // k >= size: everything, sorted
  EXPECT_EQ(tokens_of(all.live()), (std::vector<int32_t>{1, 3, 2, 4, 0}));

  for (int32_t off : {0, -1}) {
    CandidateList untouched = list_of({1.0f, 5.0f, 3.0f});
    keep_top_k(off, &untouched);
    EXPECT_FALSE(untouched.sorted);
    EXPECT_EQ(tokens_of(untouched.live()), (std::vector<int32_t>{0, 1, 2}));
  }
}

TEST(SamplerTopK, EqualLogitsRankByLowerId) {
  CandidateList list = list_of({2.0f, 7.0f, 7.0f, 1.0f, 7.0f});
  keep_top_k(2, &list);
  EXPECT_EQ(tokens_of(list.live()), (std::vector<int32_t>{1, 2}));
}

TEST(SamplerTopK, FusedFillEqualsFillPenaltiesTopK) {
  // Logits rounded to 1/4 so that many tie; a NaN; a window with repeats and an
  // out-of-range id. The fused path must give the same tokens, logits and order.
  std::mt19937 gen(21);
  std::uniform_int_distribution<int> quarter(-20, 20);
  std::vector<float> logits(3000);
  for (float& l : logits) l = 0.25f * static_cast<float>(quarter(gen));
  logits[17] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<int32_t> window = {5, 5, 9, 2999, 17, 4000, 5};
  for (const PenaltyParams& pen : {PenaltyParams{}, PenaltyParams{.repeat = 1.3f, .frequency = 0.5f, .presence = 0.25f}}) {
    for (int32_t k : {1, 2, 40, 1000, 2999}) {
      std::vector<int32_t> scratch_a, scratch_b;
      CandidateList reference = list_of(logits);
      apply_penalties(pen, window, &reference, &scratch_a);
      keep_top_k(k, &reference);
      CandidateList fused;
      fill_top_k(logits.data(), 3000, k, pen, window, &fused, &scratch_b);
      ASSERT_EQ(fused.size, reference.size);
      EXPECT_TRUE(fused.sorted);
      for (size_t i = 0; i < fused.size; ++i) {
        ASSERT_EQ(fused.items[i].token, reference.items[i].token) << "k " << k << " i " << i;
        ASSERT_EQ(fused.items[i].logit, reference.items[i].logit);
      }
      for (int32_t c : scratch_b) ASSERT_EQ(c, 0);
    }
  }
}

// Greedy without penalties takes its own path in fill_top_k (two vector passes, 4 lanes):
// the same token and logit as the reference selection on rows of every length mod 4, with
// the maximum in the vector part or the tail, ties, +0 against −0, ±inf and NaN (read as
// −inf: a row of NaN and −inf gives token 0).
TEST(SamplerTopK, GreedyPathEqualsTheReferenceSelection) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows = {
      {nan, -inf}, {-inf, -inf}, {nan, -inf, nan}, {-inf, nan, -inf, -inf, nan}, {nan, 3.0f}, {-0.0f, 0.0f, -1.0f},
      {-1.0f, -0.0f, -2.0f, 0.0f, -0.0f}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f}, {5.0f, 1.0f, 5.0f, 1.0f, 5.0f, 5.0f, 2.0f},
      {0.0f, inf, nan, inf, 1.0f}, {nan, nan, nan, nan, nan, nan, nan, nan, -inf},
      // A NaN after the maximum in the same lane, then a smaller value: the NaN must not
      // reset what the lane kept.
      {9.0f, 0.0f, 0.0f, 0.0f, nan, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, 0.0f}};
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> small(-3, 3);
  for (int n : {2, 3, 4, 5, 7, 8, 9, 13, 3001}) {
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<float> row(static_cast<size_t>(n));
      for (float& l : row) l = static_cast<float>(small(gen));  // many ties
      if (rep % 3 == 1) row[static_cast<size_t>(gen() % n)] = nan;
      if (rep % 4 == 2) row[static_cast<size_t>(n - 1)] = 10.0f;  // the maximum in the tail
      rows.push_back(row);
    }
  }
  for (const auto& row : rows) {
    const auto n = static_cast<int32_t>(row.size());
    CandidateList reference = list_of(row);
    keep_top_k(1, &reference);
    CandidateList greedy;
    std::vector<int32_t> scratch;
    fill_top_k(row.data(), n, 1, {}, {}, &greedy, &scratch);
    ASSERT_EQ(greedy.size, 1u);
    EXPECT_TRUE(greedy.sorted);
    EXPECT_EQ(greedy.items[0].token, reference.items[0].token) << "row of " << n;
    EXPECT_EQ(std::bit_cast<uint32_t>(greedy.items[0].logit), std::bit_cast<uint32_t>(reference.items[0].logit)) << "row of " << n;
  }
}

TEST(SamplerTopP, KeepsTheShortestNucleusReachingP) {
  // Cumulative sorted mass 0.40, 0.65, 0.85, 0.95, 1.00 (float error ~1e-7, far from every p).
  const std::vector<std::pair<float, std::vector<int32_t>>> cases = {
      {0.0f, {1}}, {0.3f, {1}}, {0.5f, {1, 3}}, {0.8f, {1, 3, 2}}, {0.9f, {1, 3, 2, 0}},
      {0.99f, {1, 3, 2, 0, 4}}};
  for (const auto& [p, survivors] : cases) {
    CandidateList list = list_of(log_of(kProbs5));
    keep_top_p(p, 0, &list);
    EXPECT_EQ(tokens_of(list.live()), survivors) << "top_p " << p;
    EXPECT_NEAR(list.items[0].prob, 0.40f, 1e-6f);  // probabilities of the full set
  }
  CandidateList off = list_of(log_of(kProbs5));
  keep_top_p(1.0f, 0, &off);
  EXPECT_EQ(off.size, 5u);
  EXPECT_FALSE(off.sorted);

  CandidateList min_keep = list_of(log_of(kProbs5));
  keep_top_p(0.5f, 4, &min_keep);
  EXPECT_EQ(tokens_of(min_keep.live()), (std::vector<int32_t>{1, 3, 2, 0}));
}

// Reference nucleus: full sort, then the same float accumulation of the same probabilities.
size_t reference_nucleus_size(const std::vector<float>& logits, float p) {
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<float> probs;
  float sum = 0.0f;
  for (float l : logits) {
    probs.push_back(std::exp(l - m));
    sum += probs.back();
  }
  for (float& q : probs) q /= sum;
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  float mass = 0.0f;
  for (size_t i = 0; i < order.size(); ++i) {
    mass += probs[order[i]];
    if (mass >= p) return i + 1;
  }
  return order.size();
}

TEST(SamplerTopP, LargeVocabularyPrefixAndFullSortPathsAgreeWithReference) {
  // 5000 tokens (> 1024: the partial-sort path). A peaked distribution has a nucleus inside
  // the 256-token prefix; a flat one needs the tail sorted too.
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {6.0f, 0.05f}) {
    std::vector<float> logits(5000);
    for (float& l : logits) l = scale * normal(gen);
    CandidateList list = list_of(logits);
    keep_top_p(0.9f, 0, &list);
    const size_t expected = reference_nucleus_size(logits, 0.9f);
    EXPECT_EQ(list.size, expected) << "scale " << scale;
    for (size_t i = 1; i < list.size; ++i) ASSERT_TRUE(ranks_before(list.items[i - 1], list.items[i]));
    if (scale < 1.0f) {
      EXPECT_GT(list.size, 256u);  // the flat case really exercised the tail sort
    } else {
      EXPECT_LT(list.size, 256u);
    }
  }
}

TEST(SamplerMinP, KeepsTokensAboveAFractionOfTheBest) {
  // p_max = 0.40. min_p 0.3 -> keep p >= 0.12: t1, t2, t3; min_p 0.55 -> p >= 0.22: t1, t3.
  CandidateList list = list_of(log_of(kProbs5));
  keep_min_p(0.3f, 0, &list);
  EXPECT_FALSE(list.sorted);  // the unsorted path keeps id order
  EXPECT_EQ(tokens_of(list.live()), (std::vector<int32_t>{1, 2, 3}));

  CandidateList tighter = list_of(log_of(kProbs5));
  keep_min_p(0.55f, 0, &tighter);
  EXPECT_EQ(tokens_of(tighter.live()), (std::vector<int32_t>{1, 3}));

  CandidateList sorted = list_of(log_of(kProbs5));
  keep_top_k(5, &sorted);
  keep_min_p(0.3f, 0, &sorted);
  EXPECT_EQ(tokens_of(sorted.live()), (std::vector<int32_t>{1, 3, 2}));

  // Only t1 passes min_p 0.9, fewer than min_keep = 3: the sorted rule keeps the best three.
  CandidateList kept = list_of(log_of(kProbs5));
  keep_min_p(0.9f, 3, &kept);
  EXPECT_EQ(tokens_of(kept.live()), (std::vector<int32_t>{1, 3, 2}));

  CandidateList off = list_of(log_of(kProbs5));
  keep_min_p(0.0f, 0, &off);
  EXPECT_EQ(off.size, 5u);
}

TEST(SamplerTemperature, ScalesLogitsAndSharpensOrFlattens) {
  // Logits {0, 2, 4} at temperature 2 are {0, 1, 2}: probabilities e^k / (1 + e + e^2).
  SamplerParams params = kPlainSoftmax;
  params.temperature = 2.0f;
  Sampler sampler = make_sampler(params);
  const std::vector<float> logits = {0.0f, 2.0f, 4.0f};
  sampler.sample(logits.data(), 3);
  const double z = 1.0 + std::exp(1.0) + std::exp(2.0);
  ASSERT_EQ(sampler.candidates().size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(sampler.candidates()[k].logit, static_cast<float>(k));
    // float exp and normalisation: a few ulp of 1.
    EXPECT_NEAR(sampler.candidates()[k].prob, std::exp(k) / z, 1e-6);
  }
  // Temperature 0.5 doubles the logits: p2 / p1 = e^4.
  params.temperature = 0.5f;
  Sampler sharp = make_sampler(params);
  sharp.sample(logits.data(), 3);
  const auto c = sharp.candidates();
  EXPECT_NEAR(c[2].prob / c[1].prob, std::exp(4.0), std::exp(4.0) * 1e-5);
}

TEST(SamplerGreedy, ArgmaxWithLowestIdOnTies) {
  for (float temp : {0.0f, -1.0f}) {
    SamplerParams params{.temperature = temp, .seed = 1};
    Sampler sampler = make_sampler(params);
    const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, -kInf};
    EXPECT_EQ(sampler.sample(logits.data(), 5), 1);
    ASSERT_EQ(sampler.candidates().size(), 1u);
    EXPECT_EQ(sampler.candidates()[0].prob, 1.0f);
  }
}

TEST(SamplerGreedy, SeesThePenalisedLogits) {
  Sampler sampler = make_sampler(SamplerParams{.temperature = 0.0f, .repeat_penalty = 2.0f, .seed = 1});
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(sampler.sample(logits.data(), 3), 1);
  sampler.accept(1);  // 3 -> 1.5, below token 2's 2.0
  EXPECT_EQ(sampler.sample(logits.data(), 3), 2);
}

TEST(SamplerDraw, NanAndInfiniteLogitsNeverCrash) {
  Sampler sampler = make_sampler(SamplerParams{.seed = 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> with_nan = {nan, 1.0f, nan};
  EXPECT_EQ(sampler.sample(with_nan.data(), 3), 1);
  const std::vector<float> all_neg_inf = {-kInf, -kInf, -kInf};
  EXPECT_EQ(sampler.sample(all_neg_inf.data(), 3), 0);
}

// ---------------------------------------------------------------------------- the chain

TEST(SamplerDraw, InverseCdfWalkOverTheSortedCandidates) {
  // With every filter off but top-k 5 (which sorts), the draw walks t1, t3, t2, t0, t4 and
  // picks the first whose cumulative mass reaches u, u being llama.cpp's first uniform draw
  // from std::mt19937(seed).
  const std::vector<float> logits = log_of(kProbs5);
  const std::vector<int32_t> sorted_ids = {1, 3, 2, 0, 4};
  const std::vector<double> cumulative = {0.40, 0.65, 0.85, 0.95, 1.00};
  for (uint32_t seed : {1u, 2u, 3u, 42u, 1000u, 123456u}) {
    std::mt19937 rng(seed);
    const double u = draw_uniform(&rng);
    size_t k = 0;
    while (cumulative[k] < u) ++k;
    ASSERT_GT(std::abs(cumulative[k] - u), 1e-5) << "u too close to a boundary for float softmax";
    SamplerParams params = kPlainSoftmax;
    params.top_k = 5;
    params.seed = seed;
    Sampler sampler = make_sampler(params);
    EXPECT_EQ(sampler.sample(logits.data(), 5), sorted_ids[k]) << "seed " << seed << " u " << u;
    EXPECT_EQ(sampler.candidates()[sampler.selected_index()].token, sorted_ids[k]);
  }
}

// The same pseudo-random logits the golden sequences below were generated from: 24-bit
// uniform in [-3, 3), a function of (token, step) only.
float golden_logit(int token, int step) {
  uint32_t a = static_cast<uint32_t>(token) * 0x9E3779B9u + static_cast<uint32_t>(step) * 0x85EBCA6Bu + 1u;
  a ^= a >> 16;
  a *= 0x7feb352dU;
  a ^= a >> 15;
  a *= 0x846ca68bU;
  a ^= a >> 16;
  const float u = static_cast<float>(a >> 8) * (1.0f / 16777216.0f);
  return u * 6.0f - 3.0f;
}

struct GoldenCase {
  const char* name;
  int n_vocab;
  SamplerParams params;
  std::vector<int32_t> tokens;
};

// Token sequences produced by llama.cpp's own samplers (libllama: penalties -> top_k ->
// top_p -> min_p -> temp_ext -> dist(seed) on the same logits, accepting each token), by a
// small out-of-tree program; no llama.cpp code is part of moetier.
TEST(SamplerChain, MatchesLlamaCppTokenForToken) {
  const std::vector<GoldenCase> cases = {
      {"Default", 50, SamplerParams{.seed = 42},
       {9,  16, 13, 34, 26, 45, 11, 40, 7,  34, 44, 25, 24, 15, 13, 18, 39, 20, 23, 7,  49, 17,
        42, 47, 40, 9,  46, 36, 3,  8,  37, 34, 39, 2,  33, 39, 45, 25, 2,  23, 29, 7,  11, 14,
        27, 44, 39, 21, 18, 8,  29, 0,  22, 30, 39, 15, 40, 23, 15, 0,  28, 36, 35, 46}},
      {"Penalties", 50,
       SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f,
                     .repeat_penalty = 1.3f, .repeat_last_n = 16, .frequency_penalty = 0.2f,
                     .presence_penalty = 0.4f, .seed = 7},
       {43, 2,  29, 11, 12, 44, 26, 30, 7,  38, 47, 22, 9,  23, 30, 49, 3,  30, 37, 21, 28, 28,
        12, 47, 14, 1,  35, 32, 11, 17, 19, 49, 12, 40, 46, 7,  26, 25, 22, 27, 43, 5,  24, 41,
        16, 37, 47, 30, 3,  42, 40, 7,  12, 38, 2,  23, 1,  21, 34, 0,  8,  27, 36, 22}},
      {"MinPUnsorted", 3000,
       SamplerParams{.temperature = 0.7f, .top_k = 0, .top_p = 1.0f, .min_p = 0.1f, .seed = 3},
       {224,  2484, 384,  1748, 1317, 63,   90,   672,  297, 2035, 448,  1372, 729, 993,  1431, 2714,
        2295, 2892, 1199, 1605, 873,  1743, 839,  1355, 2218, 2456, 811, 2669, 2109, 81, 428,  905}},
      {"TopPLargeVocab", 3000,
       SamplerParams{.temperature = 1.5f, .top_k = 0, .top_p = 0.9f, .min_p = 0.0f, .seed = 99},
       {1396, 2133, 160,  2539, 254,  1960, 207,  436,  372,  2665, 2338, 2461, 2304, 383, 966,  436,
        2957, 1193, 1679, 956,  201,  2110, 1336, 1459, 1229, 1280, 1721, 1773, 2878, 1608, 1431, 2902}},
      {"GreedyPenalised", 50,
       SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.5f, .repeat_last_n = 8, .seed = 5},
       {31, 38, 8, 45, 46, 44, 26, 37, 7, 27, 15, 48, 11, 13, 33, 25,
        3,  20, 23, 34, 30, 17, 43, 33, 40, 8, 2,  22, 11, 21, 26, 16}},
      {"QwenThinkingWithPresence", 5000,
       [] {
         SamplerParams p = kQwenThinkingSampling;
         p.presence_penalty = 1.5f;
         p.seed = 2026;
         return p;
       }(),
       {940,  4607, 4898, 4608, 3181, 2148, 1699, 3692, 724,  4275, 4927, 3356, 1368, 4068, 4639, 4592,
        3496, 1413, 4648, 4786, 4903, 1187, 734,  1361, 390,  4708, 3609, 2256, 1649, 4523, 4881, 2015}},
  };
  for (const GoldenCase& c : cases) {
    Sampler sampler = make_sampler(c.params);
    std::vector<float> logits(c.n_vocab);
    std::vector<int32_t> got;
    for (size_t step = 0; step < c.tokens.size(); ++step) {
      for (int i = 0; i < c.n_vocab; ++i) logits[i] = golden_logit(i, static_cast<int>(step));
      const int32_t t = sampler.sample(logits.data(), c.n_vocab);
      sampler.accept(t);
      got.push_back(t);
    }
    EXPECT_EQ(got, c.tokens) << c.name;
  }
}

TEST(SamplerChain, SameSeedSameSequenceAndResetReplays) {
  const int n_vocab = 1000;
  std::vector<float> logits(n_vocab);
  const auto run = [&](Sampler& s, int steps) {
    std::vector<int32_t> out;
    for (int step = 0; step < steps; ++step) {
      for (int i = 0; i < n_vocab; ++i) logits[i] = golden_logit(i, step) * 0.5f;
      out.push_back(s.sample(logits.data(), n_vocab));
      s.accept(out.back());
    }
    return out;
  };
  const SamplerParams params{.repeat_penalty = 1.1f, .seed = 77};
  Sampler a = make_sampler(params);
  Sampler b = make_sampler(params);
  const std::vector<int32_t> seq_a = run(a, 100);
  EXPECT_EQ(seq_a, run(b, 100));
  a.reset();
  EXPECT_TRUE(a.window().empty());
  EXPECT_EQ(seq_a, run(a, 100));

  SamplerParams other = params;
  other.seed = 78;
  Sampler c = make_sampler(other);
  EXPECT_NE(seq_a, run(c, 100));  // ~100 draws over ~40 tokens: equality would be a bug

  Sampler r1 = make_sampler(SamplerParams{});  // kRandomSeed
  EXPECT_EQ(r1.params().seed, kRandomSeed);
  Sampler fixed = make_sampler(SamplerParams{.seed = 5});
  EXPECT_EQ(fixed.seed(), 5u);
}

// Pearson chi-square of `counts` against `probs`.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = n * probs[i];
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

TEST(SamplerDraw, FrequenciesFollowTheSoftmaxChiSquare) {
  // Under a correct draw the statistic follows chi^2 with (categories - 1) degrees of
  // freedom; the bounds are its 0.999 quantiles (4 dof: 18.467, 1 dof: 10.828). With the
  // fixed seed the test is deterministic; a wrong distribution (e.g. p_i off by 0.01 at
  // n = 20000) gives chi^2 in the hundreds.
  const int n = 20000;
  {
    Sampler sampler = make_sampler(kPlainSoftmax);
    const std::vector<float> logits = log_of(kProbs5);
    std::vector<int> counts(5, 0);
    for (int i = 0; i < n; ++i) ++counts[sampler.sample(logits.data(), 5)];
    EXPECT_LT(chi_square(counts, kProbs5, n), 18.467) << counts[0] << " " << counts[1];
  }
  {
    // top-k 2 leaves t1 and t3, renormalised: 0.40 / 0.65 and 0.25 / 0.65.
    SamplerParams params = kPlainSoftmax;
    params.top_k = 2;
    Sampler sampler = make_sampler(params);
    const std::vector<float> logits = log_of(kProbs5);
    std::vector<int> counts(5, 0);
    for (int i = 0; i < n; ++i) ++counts[sampler.sample(logits.data(), 5)];
    EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
    EXPECT_LT(chi_square({counts[1], counts[3]}, {0.40 / 0.65, 0.25 / 0.65}, n), 10.828);
  }
}

TEST(SamplerChain, ReusesItsBuffersAcrossTokens) {
  Sampler sampler = make_sampler(SamplerParams{.seed = 9});
  std::vector<float> logits(4096);
  for (int i = 0; i < 4096; ++i) logits[i] = golden_logit(i, 0);
  sampler.sample(logits.data(), 4096);
  const Candidate* storage = sampler.candidates().data();
  for (int step = 1; step < 20; ++step) {
    for (int i = 0; i < 4096; ++i) logits[i] = golden_logit(i, step);
    sampler.accept(sampler.sample(logits.data(), 4096));
    EXPECT_EQ(sampler.candidates().data(), storage);
  }
}

TEST(SamplerChain, QwenVocabularySpeed) {
  // Not a pass/fail timing check (shared CI machines); prints the per-token CPU time at the
  // Qwen3.5/3.6 vocabulary size for the report, and checks the chain works at that size.
  // Logits: normal with sigma 3, a flatter distribution than a trained model's (the top-p
  // nucleus is ~10k tokens), so this is a pessimistic case.
  const int n_vocab = 248320;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n_vocab);
  for (float& l : logits) l = normal(gen);
  const auto thread_cpu_us = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
  };
  for (const auto& [name, params] :
       std::vector<std::pair<const char*, SamplerParams>>{
           {"llama.cpp defaults", SamplerParams{.seed = 1}},
           {"qwen thinking", [] { SamplerParams p = kQwenThinkingSampling; p.seed = 1; return p; }()},
           {"greedy", SamplerParams{.temperature = 0.0f, .seed = 1}},
           {"top-p 0.95 without top-k", SamplerParams{.top_k = 0, .seed = 1}}}) {
    Sampler sampler = make_sampler(params);
    sampler.sample(logits.data(), n_vocab);  // first call allocates
    const int reps = params.top_k > 0 ? 10 : 2;
    const double t0 = thread_cpu_us();
    for (int r = 0; r < reps; ++r) {
      const int32_t t = sampler.sample(logits.data(), n_vocab);
      ASSERT_TRUE(t >= 0 && t < n_vocab);
      sampler.accept(t);
    }
    std::printf("[ sampler  ] %s: %.0f us CPU/token at n_vocab %d (%zu candidates at the draw)\n",
                name, (thread_cpu_us() - t0) / reps, n_vocab, sampler.candidates().size());
  }
}

// ---------------------------------------------------------------------------- logprobs

TEST(SamplerLogprobs, FullSoftmaxTopNAndChosen) {
  const std::vector<float> logits = log_of(kProbs5);
  PositionLogprobs out;
  compute_logprobs(logits, 4, 3, &out);
  ASSERT_EQ(out.top.size(), 3u);
  const std::vector<int32_t> ids = {1, 3, 2};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.top[i].token, ids[i]);
    EXPECT_NEAR(out.top[i].logprob, std::log(kProbs5[ids[i]]), 1e-6);  // float logits: ~1e-7
  }
  EXPECT_EQ(out.chosen.token, 4);
  EXPECT_NEAR(out.chosen.logprob, std::log(0.05), 1e-6);

  compute_logprobs(logits, 0, 50, &out);  // capped at the vocabulary
  EXPECT_EQ(out.top.size(), 5u);
  compute_logprobs(logits, 0, 0, &out);
  EXPECT_TRUE(out.top.empty());
}

TEST(SamplerLogprobs, TiesRankByLowerIdAndShiftInvariance) {
  // Equal logits share a probability; adding a constant to every logit changes nothing.
  const std::vector<float> logits = {5.0f, 7.0f, 7.0f, 7.0f};
  PositionLogprobs out;
  compute_logprobs(logits, 0, 2, &out);
  EXPECT_EQ(out.top[0].token, 1);
  EXPECT_EQ(out.top[1].token, 2);
  const double z = std::exp(-2.0) + 3.0;  // relative to logit 7
  EXPECT_NEAR(out.top[0].logprob, -std::log(z), 1e-6);
  EXPECT_NEAR(out.chosen.logprob, -2.0 - std::log(z), 1e-6);
}

// ---------------------------------------------------------------------------- params

TEST(SamplerParamsValidation, DefaultsArePresetsAreAndBadValuesAreBadInput) {
  const SamplerParams d;
  EXPECT_EQ(d.temperature, 0.8f);
  EXPECT_EQ(d.top_k, 40);
  EXPECT_EQ(d.top_p, 0.95f);
  EXPECT_EQ(d.min_p, 0.05f);
  EXPECT_EQ(d.repeat_penalty, 1.0f);
  EXPECT_EQ(d.repeat_last_n, 64);
  EXPECT_TRUE(validate(d).is_ok());
  EXPECT_TRUE(validate(kQwenThinkingSampling).is_ok());
  EXPECT_TRUE(validate(kQwenNonThinkingSampling).is_ok());
  EXPECT_EQ(kQwenThinkingSampling.temperature, 0.6f);
  EXPECT_EQ(kQwenThinkingSampling.top_k, 20);
  EXPECT_EQ(kQwenNonThinkingSampling.top_p, 0.8f);
  EXPECT_TRUE(validate(SamplerParams{.top_k = -5}).is_ok());  // llama.cpp: <= 0 means off
  EXPECT_TRUE(validate(SamplerParams{.temperature = -1.0f}).is_ok());  // greedy

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<SamplerParams, const char*>> bad = {
      {SamplerParams{.temperature = nan}, "--temp"},
      {SamplerParams{.temperature = kInf}, "--temp"},
      {SamplerParams{.top_p = 1.5f}, "--top-p"},
      {SamplerParams{.top_p = -0.1f}, "--top-p"},
      {SamplerParams{.top_p = nan}, "--top-p"},
      {SamplerParams{.min_p = 2.0f}, "--min-p"},
      {SamplerParams{.min_p = -0.5f}, "--min-p"},
      {SamplerParams{.repeat_penalty = 0.0f}, "--repeat-penalty"},
      {SamplerParams{.repeat_penalty = -1.0f}, "--repeat-penalty"},
      {SamplerParams{.repeat_penalty = 1e-45f}, "--repeat-penalty"},  // 1/x overflows
      {SamplerParams{.repeat_last_n = -1}, "--repeat-last-n"},
      {SamplerParams{.frequency_penalty = kInf}, "--frequency-penalty"},
      {SamplerParams{.presence_penalty = nan}, "--presence-penalty"},
      {SamplerParams{.min_keep = -1}, "--min-keep"},
  };
  for (const auto& [params, flag] : bad) {
    const Status st = validate(params);
    ASSERT_FALSE(st.is_ok()) << flag;
    EXPECT_EQ(st.exit_code(), 2) << flag;
    EXPECT_NE(st.message().find(flag), std::string::npos) << st.message();
    Result<Sampler> s = Sampler::create(params);
    EXPECT_FALSE(s.is_ok());
  }
}

}  // namespace
}  // namespace moetier
