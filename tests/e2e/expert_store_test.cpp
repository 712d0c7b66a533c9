// Routed experts read from the file on demand (engine/expert_store.h, a model bigger than
// RAM): a store whose slots hold only part of each layer's experts gives the in-memory
// logits bit for bit, for prompt batches that route to more experts than fit (waves) and
// for decode (reads ahead of the next layer), with both eviction policies, repacked on
// arrival or not, from a mapped or a --no-mmap load; its counters add up; the commands say
// how the experts were split and refuse a budget that cannot hold a cache.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/expert_streaming.h"
#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;

// All positions' logits of a prompt, then 6 decoded tokens one at a time (each step's
// logits), with `source` serving the experts when given.
std::vector<float> prompt_and_decode_logits(gguf::ModelFile& file, const std::vector<int32_t>& tokens,
                                            ExpertStore* source) {
  auto model = load_model(file, {.n_ubatch = 512});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (!model) return {};
  if (source != nullptr) (*model)->attach_experts(*source);
  auto seq = (*model)->new_sequence({.n_ctx = static_cast<int64_t>(tokens.size()) + 8});
  EXPECT_TRUE(seq.is_ok());
  ThreadPool pool(2);
  std::vector<float> all, step;
  const Status st = (*model)->forward(tokens, *seq, {.all_logits = true}, all, pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  for (size_t i = 0; i < 6 && i < tokens.size(); ++i) {
    const int32_t token[] = {tokens[tokens.size() - 1 - i]};
    EXPECT_TRUE((*model)->forward(token, *seq, {}, step, pool).is_ok());
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

// Every compute layer's experts streamed, each layer keeping `capacity` of them.
ExpertStreamingPlan stream_all(const gguf::GgufFile& header, const HParams& hp, int capacity) {
  ExpertStreamingPlan plan;
  plan.tiers.stream = true;
  for (const std::string& name : routed_expert_tensors(header, hp)) {
    if (tensor_layer_index(name) < hp.n_layer) plan.streamed_tensors.push_back(name);
  }
  for (int il = 0; il < hp.n_layer; ++il) {
    plan.layers.push_back(il);
    plan.tiers.capacity.push_back(capacity);
  }
  return plan;
}

struct StreamCase {
  const char* model;
  ExpertCachePolicy policy;
  bool repack;
  gguf::LoadMode mode;
};

class StreamedExperts : public ::testing::TestWithParam<StreamCase> {};

TEST_P(StreamedExperts, GiveTheInMemoryLogitsBitForBit) {
  const StreamCase& c = GetParam();
  const std::string path = moetier::testing::ref_model_path(c.model);
  const std::vector<int32_t> tokens = moetier::testing::ref_prompt_tokens(c.model, "p5_long");
  ASSERT_FALSE(tokens.empty());
  auto plain = gguf::ModelFile::open(path, {.mode = gguf::LoadMode::kRead, .progress = false, .verbose = false});
  ASSERT_TRUE(plain.is_ok()) << plain.status().message();
  const auto expected = prompt_and_decode_logits(**plain, tokens, nullptr);

  auto header = gguf::read_header(path);
  ASSERT_TRUE(header.is_ok());
  auto hp = read_hparams(*header);
  ASSERT_TRUE(hp.is_ok());
  // The smallest cache the tier plan allows (3 · n_expert_used): a long prompt routes to
  // every expert of a layer, so the MoE block goes in waves; decode misses often.
  const int capacity = static_cast<int>(std::min(hp->n_expert, 3 * hp->n_expert_used));
  ASSERT_LT(capacity, hp->n_expert) << "the model must have more experts than the cache holds";
  const ExpertStreamingPlan plan = stream_all(*header, *hp, capacity);
  auto file = gguf::ModelFile::open(
      path, {.mode = c.mode, .progress = false, .verbose = false, .streamed_tensors = plan.streamed_tensors});
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto store = open_expert_store(**file, *hp, plan, {.policy = c.policy, .repack = c.repack, .progress = false});
  ASSERT_TRUE(store.is_ok()) << store.status().message();
  EXPECT_EQ((*store)->experts_in_memory(), capacity * hp->n_layer);
  EXPECT_EQ((*store)->experts_total(), hp->n_expert * hp->n_layer);

  const auto got = prompt_and_decode_logits(**file, tokens, store->get());
  ASSERT_EQ(expected.size(), got.size());
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(0, std::memcmp(expected.data(), got.data(), got.size() * sizeof(float)));

  const ExpertStoreStats s = (*store)->stats();
  EXPECT_TRUE((*store)->status().is_ok());
  EXPECT_GT(s.requests, 0);
  EXPECT_EQ(s.requests, s.hits + s.read_ahead_hits + s.misses);
  EXPECT_GT(s.misses, 0);           // the cache is smaller than the experts used
  EXPECT_GT(s.predicted, 0);        // decode steps read the next layer's experts ahead
  EXPECT_GT(s.used_after_prediction, 0);
  EXPECT_LE(s.predicted_used, s.used_after_prediction);
  EXPECT_GE(s.reads, s.misses);     // on demand, plus ahead
  EXPECT_GT(s.bytes_read, 0u);
  EXPECT_GT(s.read_busy_seconds, 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, StreamedExperts,
    ::testing::Values(StreamCase{"qwen35moe-small-q4_k_m", ExpertCachePolicy::kLru, true, gguf::LoadMode::kMmap},
                      StreamCase{"qwen35moe-small-q4_k_m", ExpertCachePolicy::kLfu, false, gguf::LoadMode::kRead},
                      StreamCase{"qwen3moe-small-q4_k_m", ExpertCachePolicy::kLru, true, gguf::LoadMode::kRead},
                      StreamCase{"qwen35moe-small-ud_mix", ExpertCachePolicy::kLfu, true, gguf::LoadMode::kMmap},
                      StreamCase{"qwen35moe-small-iq4_xs", ExpertCachePolicy::kLru, true, gguf::LoadMode::kMmap},
                      StreamCase{"qwen35moe-tiny-f32", ExpertCachePolicy::kLru, true, gguf::LoadMode::kMmap}),
    [](const ::testing::TestParamInfo<StreamCase>& info) {
      return moetier::testing::param_name(std::string(info.param.model) + "_" +
                                          std::string(expert_cache_policy_name(info.param.policy)) +
                                          (info.param.repack ? "_repack" : "_rows") +
                                          (info.param.mode == gguf::LoadMode::kRead ? "_nommap" : "_mmap"));
    });

// The commands: a budget that keeps part of the experts in the file prints the split and
// generates what the in-RAM run generates; one too small for a cache is refused, as is an
// unknown policy.
TEST(StreamedExpertsCli, RunSaysHowTheExpertsWereSplitAndGeneratesTheSameText) {
  const std::string model = moetier::testing::ref_model_path("qwen35moe-small-q4_k_m");
  const std::string common = "run -m " + model + " -p \"The quick brown fox\" -n 24 --temp 0 -t 2";
  const auto in_ram = run_moetier(common);
  ASSERT_EQ(in_ram.rc, 0) << in_ram.err;
  EXPECT_EQ(in_ram.err.find("read from the file on demand"), std::string::npos) << in_ram.err;
  const auto streamed = run_moetier(common + " --ram-budget 36 --expert-cache-policy lfu");
  ASSERT_EQ(streamed.rc, 0) << streamed.err;
  EXPECT_NE(streamed.err.find("routed experts: "), std::string::npos) << streamed.err;
  EXPECT_NE(streamed.err.find("the rest read from the file on demand"), std::string::npos) << streamed.err;
  EXPECT_NE(streamed.err.find("lfu eviction"), std::string::npos) << streamed.err;
  EXPECT_EQ(in_ram.out, streamed.out);

  const auto too_small = run_moetier(common + " --ram-budget 8");
  EXPECT_EQ(too_small.rc, 2) << too_small.err;
  EXPECT_NE(too_small.err.find("need at least"), std::string::npos) << too_small.err;
  EXPECT_NE(too_small.err.find("--ram-budget"), std::string::npos) << too_small.err;

  const auto bad_policy = run_moetier(common + " --expert-cache-policy mru");
  EXPECT_EQ(bad_policy.rc, 2) << bad_policy.err;
  EXPECT_NE(bad_policy.err.find("--expert-cache-policy"), std::string::npos) << bad_policy.err;
}

TEST(StreamedExpertsCli, BenchReportsTheExpertCache) {
  const std::string model = moetier::testing::ref_model_path("qwen35moe-small-q4_k_m");
  const auto r = run_moetier("bench -m " + model + " -p 16 -n 8 -r 1 -t 2 --ram-budget 29 --diskbw -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("(--diskbw)"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("\"disk_read_gbps\": null"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"expert_hit_rate\": 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"expert_bytes_read_per_token\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"expert_prediction_accuracy\": "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace moetier
