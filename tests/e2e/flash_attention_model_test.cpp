// Whole models with the CPU flash attention (-fa on): a row's arithmetic depends only on its
// query and the keys it sees (cpu/flash_attention.h), never on the micro-batch it ran in,
// the rows and sequences it shared a task with, or the thread count (a deep decode with
// fewer tasks than threads is split over 1024-key parts and folded in the same order). So
// on a 1,100-token prompt (two parts) and decode steps after it, these runs give the same
// logits bit for bit:
//   * -ub 512 with 2 threads (each decode task whole);
//   * -ub 93 with 3 threads (micro-batches cut at odd places, one across the part boundary
//     at key 1024; decode split over parts);
//   * forward_batch beside a second sequence (its prompt shares the last micro-batch, then
//     both decode together).
// And the flash path stays within the F32 bound of reference_logits_test.cpp (1e-4) of the
// exact path on the F32 model at this depth. The command line: `-fa on` / `-fa off` reach the
// CPU attention (`logits` gives llama.cpp's logits within 1e-4 both ways, and not the same
// bits), bench records each -fa value, and a bad value is one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "model/model.h"

namespace moetier {
namespace {

using moetier::testing::LoadedModel;

// 1,100 tokens from the model's reference prompts (concatenated, repeated as needed).
std::vector<int32_t> long_prompt(const std::string& model) {
  std::vector<int32_t> all;
  while (all.size() < 1100) {
    for (const char* id : {"p5_long", "p4_code", "p6_digits_ws", "p3_mixed"}) {
      const auto t = moetier::testing::ref_prompt_tokens(model, id);
      all.insert(all.end(), t.begin(), t.end());
    }
  }
  all.resize(1100);
  return all;
}

constexpr int kDecode = 3;

// Prompt logits (last token), then kDecode steps feeding `next` tokens one at a time.
std::vector<std::vector<float>> run_alone(Model& model, const std::vector<int32_t>& prompt,
                                          const std::vector<int32_t>& next, ThreadPool& pool) {
  auto seq = model.new_sequence({.n_ctx = 2048, .type_k = DType::F16, .type_v = DType::F16});
  EXPECT_TRUE(seq.is_ok());
  std::vector<std::vector<float>> steps(1);
  EXPECT_TRUE(model.forward(prompt, *seq, {}, steps[0], pool).is_ok());
  for (int i = 0; i < kDecode; ++i) {
    steps.emplace_back();
    EXPECT_TRUE(model.forward({&next[static_cast<size_t>(i)], 1}, *seq, {}, steps.back(), pool).is_ok());
  }
  return steps;
}

bool same_bits(const std::vector<float>& a, const float* b, size_t n) {
  return a.size() == n && std::memcmp(a.data(), b, n * sizeof(float)) == 0;
}

class FlashModel : public ::testing::TestWithParam<std::string> {};

TEST_P(FlashModel, RowsDoNotDependOnMicroBatchesThreadsOrBatches) {
  const std::string name = GetParam();
  LoadedModel l = moetier::testing::load_ref_model(name, 512);
  ASSERT_TRUE(l.model);
  Model& model = *l.model;
  model.set_flash_attention(true);
  const auto prompt = long_prompt(name);
  const auto other = moetier::testing::ref_prompt_tokens(name, "p2_short");
  const std::vector<int32_t> next = {other[0], other[1], other[2]};
  const size_t nv = static_cast<size_t>(model.hparams().n_vocab);

  ThreadPool two(2), three(3);
  const auto base = run_alone(model, prompt, next, two);
  model.set_n_ubatch(93);
  const auto cut = run_alone(model, prompt, next, three);
  for (size_t s = 0; s < base.size(); ++s) {
    EXPECT_TRUE(same_bits(cut[s], base[s].data(), nv)) << name << ": -ub 93, 3 threads, step " << s;
  }

  // Beside a second sequence: its 11-token prompt rides in the last micro-batch of ours.
  model.set_n_ubatch(512);
  auto a = model.new_sequence({.n_ctx = 2048, .type_k = DType::F16, .type_v = DType::F16});
  auto b = model.new_sequence({.n_ctx = 2048, .type_k = DType::F16, .type_v = DType::F16});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  std::vector<float> logits;
  std::vector<BatchEntry> entries = {{.seq = &*a, .tokens = prompt}, {.seq = &*b, .tokens = other}};
  ASSERT_TRUE(model.forward_batch(entries, logits, three).is_ok());
  EXPECT_TRUE(same_bits(base[0], logits.data(), nv)) << name << ": batched prompt";
  for (int i = 0; i < kDecode; ++i) {
    entries = {{.seq = &*b, .tokens = {&next[static_cast<size_t>(i)], 1}},
               {.seq = &*a, .tokens = {&next[static_cast<size_t>(i)], 1}}};
    ASSERT_TRUE(model.forward_batch(entries, logits, three).is_ok());
    EXPECT_TRUE(same_bits(base[static_cast<size_t>(i) + 1], logits.data() + nv, nv)) << name << ": batched step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ref, FlashModel,
                         ::testing::Values("qwen35moe-tiny-f32", "qwen35moe-small-q4_k_m", "qwen3moe-small-q4_k_m"),
                         [](const auto& info) { return moetier::testing::param_name(info.param); });

// F32 model, 1,100 keys then decode: flash vs exact within the F32 reference bound (1e-4;
// both are ~1e-6 from llama.cpp on the reference prompts).
TEST(FlashModelF32, DeepPromptAndDecodeMatchExactPath) {
  for (const std::string name : {"qwen35moe-tiny-f32", "qwen3moe-tiny-f32"}) {
    LoadedModel l = moetier::testing::load_ref_model(name, 512);
    ASSERT_TRUE(l.model);
    ThreadPool pool(2);
    const auto prompt = long_prompt(name);
    const auto other = moetier::testing::ref_prompt_tokens(name, "p2_short");
    const std::vector<int32_t> next = {other[0], other[1], other[2]};
    const auto exact = run_alone(*l.model, prompt, next, pool);
    l.model->set_flash_attention(true);
    const auto flash = run_alone(*l.model, prompt, next, pool);
    for (size_t s = 0; s < exact.size(); ++s) {
      double d = 0;
      for (size_t i = 0; i < exact[s].size(); ++i) d = std::max(d, std::fabs(double{flash[s][i]} - exact[s][i]));
      EXPECT_LE(d, 1e-4) << name << " step " << s;
      if (std::getenv("MOETIER_TEST_VERBOSE")) {
        std::fprintf(stderr, "%s step %zu: flash vs exact %.3g\n", name.c_str(), s, d);
      }
    }
  }
}

TEST(FlashCli, FlagReachesTheCpuAttention) {
  const std::string ref = moetier::testing::kRefDir;
  const std::string m = "'" + ref + "/models/qwen3moe-tiny-f32.gguf'";
  const auto want = moetier::testing::read_f32_file(ref + "/expected/qwen3moe-tiny-f32/p5_long.logits.f32.bin");
  std::vector<std::vector<float>> got;
  for (const char* fa : {"on", "off"}) {
    const std::string out = moetier::testing::temp_file(std::string("logits_fa_") + fa + ".bin");
    const std::string args = "logits -m " + m + " -f '" + ref + "/prompts/p5_long.txt' -ctk f32 -ctv f32 -fa " + fa;
    const auto r = moetier::testing::run_moetier(args + " -o '" + out + "'");
    ASSERT_EQ(r.rc, 0) << r.err;
    got.push_back(moetier::testing::read_f32_file(out));
    std::filesystem::remove(out);
    ASSERT_EQ(got.back().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got.back()[i], want[i], 1e-4) << "-fa " << fa << " logit " << i;
    }
  }
  EXPECT_NE(std::memcmp(got[0].data(), got[1].data(), want.size() * sizeof(float)), 0)
      << "-fa on and -fa off gave the same bits: the flag does not reach the CPU attention";

  const auto bench = moetier::testing::run_moetier("bench -m " + m + " -p 8 -n 0 -r 1 -t 1 -fa 0,1 -o json");
  ASSERT_EQ(bench.rc, 0) << bench.err;
  const auto doc = nlohmann::json::parse(bench.out);
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0]["flash_attn"], 0);
  EXPECT_EQ(doc[1]["flash_attn"], 1);

  const auto bad = moetier::testing::run_moetier("logits -m " + m + " --tokens 1,2 -fa maybe -o /dev/null");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("-fa"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace moetier
