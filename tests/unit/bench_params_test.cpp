// `moetier bench` parameters: lists, llama-bench's ranges, defaults, the cartesian product's
// order, test names, statistics, and bad values rejected as bad input (exit status 2).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_params.h"
#include "bench/report.h"

namespace moetier::bench {
namespace {

// Parses a command line given as words (the command name is added).
Result<BenchParams> parse(std::vector<std::string> words, int64_t default_threads = 2) {
  std::vector<std::string> storage = {"bench"};
  storage.insert(storage.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  bool help = false;
  return parse_bench_args(static_cast<int>(argv.size()), argv.data(), default_threads, &help, nullptr);
}

std::vector<int64_t> ints(std::string_view text, bool allow_negative = false) {
  auto r = parse_int_list(text, "-x", allow_negative);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : std::vector<int64_t>{};
}

TEST(BenchParams, IntListsAndRanges) {
  EXPECT_EQ(ints("512"), (std::vector<int64_t>{512}));
  EXPECT_EQ(ints("1,2,4"), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(ints("1-4"), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(ints("0-512+128"), (std::vector<int64_t>{0, 128, 256, 384, 512}));
  EXPECT_EQ(ints("0-500+128"), (std::vector<int64_t>{0, 128, 256, 384}));  // last is an upper bound
  EXPECT_EQ(ints("16-512*2"), (std::vector<int64_t>{16, 32, 64, 128, 256, 512}));
  EXPECT_EQ(ints("1,8-10,64"), (std::vector<int64_t>{1, 8, 9, 10, 64}));
  EXPECT_EQ(ints("7-7"), (std::vector<int64_t>{7}));
  EXPECT_EQ(ints("-1,0,99", true), (std::vector<int64_t>{-1, 0, 99}));
  EXPECT_EQ(ints("-2-1", true), (std::vector<int64_t>{-2, -1, 0, 1}));
}

TEST(BenchParams, BadListsAreBadInput) {
  for (const char* bad : {"", "abc", "1,", ",1", "1,,2", "-1", "4-2", "1-4+0", "1-4*1", "0-8*2", "1-4+", "1-x",
                          "1.5", "1-2-3", "1-100000000", "99999999999999999999"}) {
    auto r = parse_int_list(bad, "-p");
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
    EXPECT_NE(r.status().message().find("'-p'"), std::string::npos) << r.status().message();
  }
}

TEST(BenchParams, CpuMaskSetsTheCpusAndTheDefaultThreadCount) {
  std::vector<std::string> storage = {"bench", "-m", "a.gguf", "--cpu-mask", "0xf0", "--cpu-strict", "1"};
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  bool help = false;
  // The default -t is computed from the parsed flags (the command counts the mask's cores).
  auto p = parse_bench_args(static_cast<int>(argv.size()), argv.data(),
                            [](const BenchParams& b) -> int64_t { return b.cpu_mask ? static_cast<int64_t>(b.cpu_mask->size()) : 1; },
                            &help, nullptr);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->cpu_mask, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(p->cpu_strict);
  EXPECT_EQ(p->n_threads, (std::vector<int64_t>{4}));
  // -t given: the list as given.
  auto q = parse({"-m", "a.gguf", "-Cr", "2-3", "-t", "1"});
  ASSERT_TRUE(q.is_ok()) << q.status().message();
  EXPECT_EQ(q->cpu_mask, (std::vector<int>{2, 3}));
  EXPECT_FALSE(q->cpu_strict);
  EXPECT_EQ(q->n_threads, (std::vector<int64_t>{1}));
  EXPECT_FALSE(parse({"-m", "a.gguf", "--cpu-mask", "xyz"}).is_ok());
}

TEST(BenchParams, DefaultsAreLlamaBenchs) {
  auto p = parse({"-m", "a.gguf"}, /*default_threads=*/3);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->n_prompt, (std::vector<int64_t>{512}));
  EXPECT_EQ(p->n_gen, (std::vector<int64_t>{128}));
  EXPECT_TRUE(p->prompt_gen.empty());
  EXPECT_EQ(p->n_depth, (std::vector<int64_t>{0}));
  EXPECT_EQ(p->n_batch, (std::vector<int64_t>{2048}));
  EXPECT_EQ(p->n_ubatch, (std::vector<int64_t>{512}));
  EXPECT_EQ(p->n_threads, (std::vector<int64_t>{3}));
  EXPECT_EQ(p->type_k, (std::vector<DType>{DType::F16}));
  EXPECT_EQ(p->n_gpu_layers, (std::vector<int64_t>{-1}));
  EXPECT_EQ(p->flash_attn, (std::vector<int>{-1}));
  EXPECT_EQ(p->use_mmap, (std::vector<bool>{true}));
  EXPECT_EQ(p->repetitions, 5);
  EXPECT_EQ(p->output, OutputFormat::kMarkdown);
  EXPECT_FALSE(p->no_warmup);
  const auto tests = expand_tests(*p);
  ASSERT_EQ(tests.size(), 2u);
  EXPECT_EQ(test_name(tests[0]), "pp512");
  EXPECT_EQ(test_name(tests[1]), "tg128");
}

TEST(BenchParams, RepeatedFlagsAndCommaListsAccumulate) {
  auto p = parse({"-m", "a.gguf,b.gguf", "-m", "c.gguf", "-t", "1", "-t", "2,4", "-ctk", "f32,f16", "-fa", "on,0,auto",
                  "-mmp", "0,1", "-ngl", "-1,99", "-o", "jsonl", "-r", "3", "--no-warmup", "--profile"});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->models, (std::vector<std::string>{"a.gguf", "b.gguf", "c.gguf"}));
  EXPECT_EQ(p->n_threads, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(p->type_k, (std::vector<DType>{DType::F32, DType::F16}));
  EXPECT_EQ(p->flash_attn, (std::vector<int>{1, 0, -1}));
  EXPECT_EQ(p->use_mmap, (std::vector<bool>{false, true}));
  EXPECT_EQ(p->n_gpu_layers, (std::vector<int64_t>{-1, 99}));
  EXPECT_EQ(p->output, OutputFormat::kJsonl);
  EXPECT_EQ(p->repetitions, 3);
  EXPECT_TRUE(p->no_warmup);
  EXPECT_TRUE(p->profile);
}

TEST(BenchParams, CartesianProductInLlamaBenchOrder) {
  // Outer loops: model, ..., n_threads, n_depth; inside: pp list, tg list, pg pairs.
  auto p = parse({"-m", "a,b", "-t", "1,2", "-d", "0,8", "-p", "16,0,32", "-n", "0,4", "-pg", "8,2", "-pg", "0,0"});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const auto tests = expand_tests(*p);
  std::vector<std::string> got;
  for (const auto& t : tests) got.push_back(fmt::format("{} t{} {}", t.model, t.n_threads, test_name(t)));
  std::vector<std::string> want;
  for (const char* m : {"a", "b"}) {
    for (int t : {1, 2}) {
      for (const char* d : {"", " @ d8"}) {
        for (const char* name : {"pp16", "pp32", "tg4", "pp8+tg2"}) want.push_back(fmt::format("{} t{} {}{}", m, t, name, d));
      }
    }
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(tests[3].n_prompt, 8);
  EXPECT_EQ(tests[3].n_gen, 2);
  EXPECT_EQ(tests[4].n_depth, 8);
}

TEST(BenchParams, ParameterLoopsNestModelOutermostDepthInnermost) {
  auto p = parse({"-m", "m", "-b", "64,128", "-ub", "32", "-ctv", "f32,f16", "-p", "8", "-n", "0", "-d", "0,4"});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const auto tests = expand_tests(*p);
  ASSERT_EQ(tests.size(), 8u);
  // n_batch varies slowest, then type_v, then depth.
  const std::vector<std::tuple<int64_t, DType, int64_t>> want = {
      {64, DType::F32, 0}, {64, DType::F32, 4}, {64, DType::F16, 0}, {64, DType::F16, 4},
      {128, DType::F32, 0}, {128, DType::F32, 4}, {128, DType::F16, 0}, {128, DType::F16, 4}};
  for (size_t i = 0; i < tests.size(); ++i) {
    EXPECT_EQ(std::make_tuple(tests[i].n_batch, tests[i].type_v, tests[i].n_depth), want[i]) << i;
    EXPECT_EQ(tests[i].n_ubatch, 32);
  }
}

TEST(BenchParams, ZeroCountsSkipTests) {
  auto p = parse({"-m", "a", "-p", "0", "-n", "8"});
  ASSERT_TRUE(p.is_ok());
  const auto tests = expand_tests(*p);
  ASSERT_EQ(tests.size(), 1u);
  EXPECT_EQ(test_name(tests[0]), "tg8");
  auto none = parse({"-m", "a", "-p", "0", "-n", "0"});
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().kind(), ErrorKind::kBadInput);
}

TEST(BenchParams, NoMmapAndOverrides) {
  auto p = parse({"-m", "a", "--no-mmap", "-ot", "exps=CPU;attn=CPU,", "-ncmoe", "0-2"});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->use_mmap, (std::vector<bool>{false}));
  EXPECT_EQ(p->tensor_overrides, (std::vector<std::string>{"exps=CPU;attn=CPU", ""}));
  EXPECT_EQ(p->n_cpu_moe, (std::vector<int64_t>{0, 1, 2}));
}

TEST(BenchParams, BadValuesAreOneClearError) {
  const std::vector<std::vector<std::string>> cases = {
      {"-m", "a", "-p", "x"},        {"-m", "a", "-n", "-3"},      {"-m", "a", "-t", "0"},
      {"-m", "a", "-b", "0"},        {"-m", "a", "-ub", "1-0"},    {"-m", "a", "-r", "0"},
      {"-m", "a", "-ctk", "q9_9"},   {"-m", "a", "-fa", "maybe"},  {"-m", "a", "-mmp", "2"},
      {"-m", "a", "-o", "sql"},      {"-m", "a", "-pg", "8"},      {"-m", "a", "-pg", "8,x"},
      {"-m", "a", "-ot", "noequal"}, {"-m", "a", "--bogus"},       {"-m", "a", "-p"},
      {"-p", "8"},                   {"-m", "", "-p", "8"},        {"-m", "a", "-t", "5000"},
  };
  for (const auto& words : cases) {
    auto r = parse(words);
    std::string line;
    for (const auto& w : words) line += w + " ";
    ASSERT_FALSE(r.is_ok()) << line << "was accepted";
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput) << line;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
}

// --step: one step test per size after the point's other tests; alone it runs no default pp or
// tg test; sizes outside [1, 512] are refused.
TEST(BenchParams, StepTests) {
  auto alone = parse({"-m", "a", "--step", "1,2-4*2", "-d", "16"});
  ASSERT_TRUE(alone.is_ok()) << alone.status().message();
  const auto tests = expand_tests(*alone);
  ASSERT_EQ(tests.size(), 3u);
  EXPECT_EQ(test_name(tests[0]), "step1 @ d16");
  EXPECT_EQ(test_name(tests[2]), "step4 @ d16");
  EXPECT_EQ(tests[2].n_step, 4);
  EXPECT_EQ(tests[2].n_gen, kStepsPerRepetition);
  EXPECT_EQ(test_tokens(tests[2]), 4 * kStepsPerRepetition);
  auto mixed = parse({"-m", "a", "-p", "8", "-n", "0", "--step", "2"});
  ASSERT_TRUE(mixed.is_ok());
  const auto both = expand_tests(*mixed);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(test_name(both[0]), "pp8");
  EXPECT_EQ(test_name(both[1]), "step2");
  for (const char* bad : {"0", "513", "x"}) {
    auto r = parse({"-m", "a", "--step", bad});
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  }
}

// --step-seqs: each step size once per sequence count, S sequences of N tokens each; only
// with --step; counts outside [1, 64] are refused.
TEST(BenchParams, StepSequences) {
  auto p = parse({"-m", "a", "--step", "1,4", "--step-seqs", "1,4"});
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const auto tests = expand_tests(*p);
  ASSERT_EQ(tests.size(), 4u);
  EXPECT_EQ(test_name(tests[0]), "step1");
  EXPECT_EQ(test_name(tests[1]), "step1 x4 seqs");
  EXPECT_EQ(test_name(tests[3]), "step4 x4 seqs");
  EXPECT_EQ(tests[1].n_step_seqs, 4);
  EXPECT_EQ(test_tokens(tests[1]), 4 * kStepsPerRepetition);
  EXPECT_EQ(test_tokens(tests[3]), 16 * kStepsPerRepetition);
  auto plain = parse({"-m", "a", "--step", "2"});
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(expand_tests(*plain).front().n_step_seqs, 1);
  auto alone = parse({"-m", "a", "--step-seqs", "4"});
  ASSERT_FALSE(alone.is_ok());
  EXPECT_NE(alone.status().message().find("--step"), std::string::npos) << alone.status().message();
  for (const char* bad : {"0", "65", "x"}) {
    auto r = parse({"-m", "a", "--step", "1", "--step-seqs", bad});
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  }
}

TEST(BenchParams, TestNames) {
  EXPECT_EQ(test_name({.n_depth = 0, .n_prompt = 512}), "pp512");
  EXPECT_EQ(test_name({.n_depth = 4096, .n_gen = 128}), "tg128 @ d4096");
  EXPECT_EQ(test_name({.n_prompt = 512, .n_gen = 128}), "pp512+tg128");
  EXPECT_EQ(test_name({.n_depth = 8, .n_prompt = 0, .n_gen = 0}), "pp0+tg0 @ d8");
}

TEST(BenchStats, MeanAndSampleStddevLikeLlamaBench) {
  TestResult r;
  r.spec.n_prompt = 100;
  r.spec.n_gen = 0;
  r.samples_ns = {1'000'000'000, 2'000'000'000, 4'000'000'000};
  EXPECT_EQ(r.avg_ns(), 2'333'333'333);
  // sample stddev of {1, 2, 4} s = sqrt(((4/3)^2 + (1/3)^2 + (5/3)^2) / 2) = sqrt(7/3) s
  EXPECT_NEAR(static_cast<double>(r.stddev_ns()), std::sqrt(7.0 / 3.0) * 1e9, 1.0);
  // t/s per sample: 100, 50, 25 -> mean 58.333, stddev sqrt(((41.67)^2 + (8.33)^2 + (33.33)^2) / 2)
  const auto ts = r.samples_ts();
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_DOUBLE_EQ(ts[0], 100.0);
  EXPECT_DOUBLE_EQ(ts[2], 25.0);
  EXPECT_NEAR(r.avg_ts(), 175.0 / 3.0, 1e-9);
  const double m = 175.0 / 3.0;
  EXPECT_NEAR(r.stddev_ts(), std::sqrt(((100 - m) * (100 - m) + (50 - m) * (50 - m) + (25 - m) * (25 - m)) / 2), 1e-9);
  EXPECT_FALSE(r.achieved_gbps().has_value());  // pp test

  TestResult tg;
  tg.spec.n_gen = 10;
  tg.model.weight_bytes_per_token = 2'000'000'000;
  tg.samples_ns = {1'000'000'000};  // 10 t/s x 2 GB = 20 GB/s
  EXPECT_EQ(tg.stddev_ns(), 0);
  EXPECT_EQ(tg.stddev_ts(), 0.0);
  ASSERT_TRUE(tg.achieved_gbps().has_value());
  EXPECT_NEAR(*tg.achieved_gbps(), 20.0, 1e-9);

  // A one-token step test is a decode step; several tokens or several sequences in one step
  // read the dense weights once for all of them, so tokens x bytes per token is not a rate.
  TestResult step = tg;
  step.spec.n_step = 1;
  ASSERT_TRUE(step.achieved_gbps().has_value());
  step.spec.n_step = 4;
  EXPECT_FALSE(step.achieved_gbps().has_value());
  step.spec.n_step = 1;
  step.spec.n_step_seqs = 4;
  EXPECT_FALSE(step.achieved_gbps().has_value());
}

}  // namespace
}  // namespace moetier::bench
