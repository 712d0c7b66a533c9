// Speculative decoding on the users' hybrid placement (every layer's dense part, DeltaNet
// included, on the GPU; routed experts on the CPU): the GPU's rollback journal records the
// DeltaNet state after each verified token and restores the last accepted one, so greedy and
// seeded-sampled outputs equal plain decoding token for token, and the sequence afterwards
// gives the same logits for a further token. The exact GPU kernels are used: the fast ones
// pick mat-vec or mat-mat by batch size, which may change the last bits between a verify
// batch and a one-token step (as in llama.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/gpu.h"
#include "support/ref_model.h"
#include "support/temp_file.h"

#include "core/thread_pool.h"
#include "runtime/generate.h"
#include "runtime/mtp_drafter.h"
#include "runtime/speculative.h"
#include "synth/synth_model.h"

namespace moetier {
namespace {

// The users' hybrid placement: every layer's dense part and the LM head on the GPU, the
// routed experts on the CPU; the exact kernels.
void place_hybrid(Model& model, bool mtp_on_gpu = false) {
  const auto n_layer = static_cast<size_t>(model.hparams().n_layer);
  GpuPlacement placement{.create_backend = create_gpu_backend, .progress = false, .exact_kernels = true};
  placement.layer_on_gpu.assign(n_layer, true);
  placement.experts_on_gpu.assign(n_layer, false);
  placement.output_on_gpu = true;
  placement.mtp_on_gpu = mtp_on_gpu;
  ASSERT_TRUE(model.place_on_gpu(placement).is_ok());
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> next_logits;
  SpecStats spec;
};

TEST(GpuSpeculative, HybridPlacementRollsBackDeltaNetStateOnTheGpu) {
  GPU_OR_SKIP(probe);
  probe.reset();
  ThreadPool pool(2);
  auto l = testing::load_with_tokenizer(std::string(testing::kRefDir) + "/models/qwen35moe-small-ud_mix.gguf");
  ASSERT_TRUE(l.model && l.tokenizer);
  place_hybrid(*l.model);
  const std::vector<int32_t> prompt = l.tokenizer->encode("Rolling back on the GPU. 1 2 3", {});
  const int32_t n_vocab = static_cast<int32_t>(l.model->hparams().n_vocab);
  constexpr int64_t kTokens = 16;

  const auto run = [&](const SamplerParams& sampling, Speculator* spec) {
    Outcome o;
    auto seq = l.model->new_sequence({.n_ctx = 128});
    EXPECT_TRUE(seq.is_ok());
    EXPECT_TRUE(seq->device_has_recurrent_state());
    if (spec) EXPECT_TRUE(seq->begin_journal(spec->params().n_max + 1).is_ok());
    seq->end_journal();
    auto sampler = Sampler::create(sampling);
    auto stats = generate(*l.model, *seq, *l.tokenizer, *sampler, prompt,
                          {.n_predict = kTokens, .stop_at_eog = false, .speculator = spec}, pool,
                          [](std::string_view) {}, [&](int32_t t) { o.tokens.push_back(t); });
    EXPECT_TRUE(stats.is_ok()) << stats.status().message();
    if (stats.is_ok()) o.spec = stats->spec;
    const int32_t probe_token = 7;
    EXPECT_TRUE(l.model->forward({&probe_token, 1}, *seq, {}, o.next_logits, pool).is_ok());
    return o;
  };
  for (const SamplerParams& sampling :
       {SamplerParams{.temperature = 0.0f}, SamplerParams{.temperature = 0.8f, .top_k = 40, .seed = 9}}) {
    const Outcome plain = run(sampling, nullptr);
    ASSERT_EQ(static_cast<int64_t>(plain.tokens.size()), kTokens);
    for (double alpha : {1.0, 0.5}) {
      Speculator spec({.type = SpecType::kReplay, .n_max = 3, .adaptive = false},
                      std::make_unique<ReplayDrafter>(plain.tokens, static_cast<int64_t>(prompt.size()), n_vocab,
                                                      alpha, 4));
      const Outcome fast = run(sampling, &spec);
      const std::string what = fmt::format("temp {} alpha {}", sampling.temperature, alpha);
      EXPECT_EQ(fast.tokens, plain.tokens) << what;
      EXPECT_GT(fast.spec.n_accepted, 0) << what;
      if (alpha < 1) EXPECT_LT(fast.spec.n_accepted, fast.spec.n_drafted) << what;
      ASSERT_EQ(fast.next_logits.size(), plain.next_logits.size());
      EXPECT_EQ(std::memcmp(fast.next_logits.data(), plain.next_logits.data(), plain.next_logits.size() * 4), 0)
          << what << ": the GPU state after the rollbacks differs";
    }
  }
}

// draft-mtp on the hybrid placement: the MTP head's LM head runs where the output layer is
// (here the GPU), and with mtp_on_gpu its block too (KV cache on the GPU, experts on the
// CPU); its logits agree with the CPU head's (the F32 tiny model: GPU and CPU sum in
// different orders, ~1e-5; bound 1e-3), and the output equals plain decoding.
class GpuDraftMtp : public ::testing::TestWithParam<bool> {};

TEST_P(GpuDraftMtp, HeadOnTheGpuMatchesTheCpuHead) {
  GPU_OR_SKIP(probe);
  probe.reset();
  ThreadPool pool(2);
  const std::string path = testing::temp_file("mtp-gpu.gguf");
  ASSERT_TRUE(synth::synthesize({.preset = "tiny", .n_layer_mtp = 1, .out_path = path, .progress = false}).is_ok());
  auto gpu = testing::load_with_tokenizer(path);
  auto cpu = testing::load_with_tokenizer(path);
  ASSERT_TRUE(gpu.model && cpu.model);
  place_hybrid(*gpu.model, /*mtp_on_gpu=*/GetParam());
  const std::vector<int32_t> prompt = gpu.tokenizer->encode("The head's logits on the GPU", {});
  const auto run = [&](testing::LoadedWithTokenizer& l, bool speculate, std::vector<float>* head_logits) {
    std::vector<int32_t> out;
    auto seq = l.model->new_sequence({.n_ctx = 128});
    EXPECT_TRUE(seq.is_ok());
    std::unique_ptr<Speculator> spec;
    MtpDrafter* mtp = nullptr;
    if (speculate) {
      auto d = MtpDrafter::create(*l.model, {.n_ctx = 128}, 0.0, pool);
      EXPECT_TRUE(d.is_ok()) << d.status().message();
      mtp = d->get();
      mtp->set_keep_logits(true);
      spec = std::make_unique<Speculator>(SpecParams{.type = SpecType::kDraftMtp, .n_max = 2, .adaptive = false},
                                          std::move(*d));
      EXPECT_TRUE(seq->begin_journal(3).is_ok());
      seq->end_journal();
    }
    auto sampler = Sampler::create({.temperature = 0.0f});
    EXPECT_TRUE(generate(*l.model, *seq, *l.tokenizer, *sampler, prompt,
                         {.n_predict = 12, .stop_at_eog = false, .speculator = spec.get()}, pool,
                         [](std::string_view) {}, [&](int32_t t) { out.push_back(t); })
                    .is_ok());
    if (head_logits && mtp) {
      std::vector<int32_t> history = prompt;
      history.insert(history.end(), out.begin(), out.end());
      if (static_cast<int64_t>(history.size()) == seq->n_past()) history.push_back(5);
      std::vector<int32_t> draft;
      mtp->draft(history, 1, draft);
      *head_logits = mtp->last_draft_logits();
    }
    return out;
  };
  std::vector<float> on_gpu, on_cpu;
  const auto plain = run(gpu, false, nullptr);
  EXPECT_EQ(run(gpu, true, &on_gpu), plain);
  EXPECT_EQ(run(cpu, true, &on_cpu), run(cpu, false, nullptr));
  ASSERT_EQ(on_gpu.size(), on_cpu.size());
  ASSERT_FALSE(on_gpu.empty());
  double worst = 0;
  for (size_t i = 0; i < on_gpu.size(); ++i) worst = std::max(worst, std::abs(double{on_gpu[i]} - on_cpu[i]));
  EXPECT_LE(worst, 1e-3);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Placement, GpuDraftMtp, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "block_on_gpu" : "lm_head_on_gpu"; });

}  // namespace
}  // namespace moetier
