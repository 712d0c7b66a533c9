// --spec-type draft-simple (runtime/draft_model_drafter.h): a separate draft model of the
// same vocabulary. Output equals plain decoding, greedy and sampled, with the target itself as
// the draft (every draft accepted) and with another quantization of it (about half accepted),
// hybrid (DeltaNet, the draft's chain rolled back through its journal) and attention-only,
// draft lengths 1/3/5, micro-batches 512 and 2; a speculator reused across generations
// (a chat's next turn, and an unrelated prompt that forces the draft to start over) stays
// exact; the CLI infers draft-simple from -md and refuses what it cannot honour.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "runtime/draft_model_drafter.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"

namespace moetier {
namespace {

const std::string kModels = std::string(moetier::testing::kRefDir) + "/models/";
constexpr KvCacheOptions kCache{.n_ctx = 256, .type_k = DType::F16, .type_v = DType::F16};

// `earlier`: the tokens already in `seq` (a chat's earlier turns), for the drafter's history.
std::vector<int32_t> generate_tokens(testing::LoadedWithTokenizer& l, SequenceState& seq,
                                     const std::vector<int32_t>& prompt, const SamplerParams& sampling,
                                     Speculator* spec, ThreadPool& pool, SpecStats* stats = nullptr,
                                     std::span<const int32_t> earlier = {}) {
  std::vector<int32_t> out;
  auto sampler = Sampler::create(sampling);
  auto r = generate(*l.model, seq, *l.tokenizer, *sampler, prompt,
                    {.n_predict = 20, .stop_at_eog = false, .speculator = spec, .earlier_tokens = earlier}, pool,
                    [](std::string_view) {}, [&](int32_t t) { out.push_back(t); });
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  if (r.is_ok() && stats) *stats = r->spec;
  return out;
}

struct Pair {
  const char* target;
  const char* draft;
  bool all_accepted;  // the draft is the target itself
};

class DraftSimple : public ::testing::TestWithParam<Pair> {};

TEST_P(DraftSimple, OutputEqualsPlainDecoding) {
  ThreadPool pool(2);
  const Pair pair = GetParam();
  for (int64_t n_ubatch : {512, 2}) {
    auto target = testing::load_with_tokenizer(kModels + pair.target + ".gguf", n_ubatch);
    auto draft_loaded = testing::load_with_tokenizer(kModels + pair.draft + ".gguf", n_ubatch);
    ASSERT_TRUE(target.model && draft_loaded.model);
    std::shared_ptr<Model> draft = std::move(draft_loaded.model);
    const std::vector<int32_t> prompt = target.tokenizer->encode("A draft model proposes; the target decides.", {});
    for (const SamplerParams& sampling :
         {SamplerParams{.temperature = 0.0f}, SamplerParams{.temperature = 0.8f, .top_k = 40, .seed = 5}}) {
      auto plain_seq = target.model->new_sequence(kCache);
      ASSERT_TRUE(plain_seq.is_ok());
      const auto plain = generate_tokens(target, *plain_seq, prompt, sampling, nullptr, pool);
      for (int32_t n_max : {1, 3, 5}) {
        auto drafter = DraftModelDrafter::create(draft, kCache, 0.0, 1, pool);
        ASSERT_TRUE(drafter.is_ok()) << drafter.status().message();
        Speculator spec({.type = SpecType::kDraftSimple, .n_max = n_max, .adaptive = false}, std::move(*drafter));
        auto seq = target.model->new_sequence(kCache);
        ASSERT_TRUE(seq.is_ok());
        SpecStats stats;
        const auto fast = generate_tokens(target, *seq, prompt, sampling, &spec, pool, &stats);
        const std::string what = fmt::format("{} <- {} ub {} temp {} n_max {}", pair.target, pair.draft, n_ubatch,
                                             sampling.temperature, n_max);
        EXPECT_EQ(fast, plain) << what;
        EXPECT_GT(stats.n_drafted, 0) << what;
        if (pair.all_accepted && sampling.temperature == 0.0f) {
          EXPECT_EQ(stats.n_accepted, stats.n_drafted) << what;
        }
        // The same speculator on: the next turn of this sequence (its history continues), then
        // an unrelated prompt on a fresh sequence (the draft must cut back or start over).
        const std::vector<int32_t> turn2 = target.tokenizer->encode(" And then?", {});
        std::vector<int32_t> history = prompt;
        history.insert(history.end(), fast.begin(), fast.end());
        history.resize(static_cast<size_t>(seq->n_past()));  // a last token accepted in a verify was fed
        auto plain2_seq = target.model->new_sequence(kCache);
        ASSERT_TRUE(plain2_seq.is_ok());
        std::vector<float> ignored;
        ASSERT_TRUE(target.model->forward(history, *plain2_seq, {}, ignored, pool).is_ok());
        const auto plain2 = generate_tokens(target, *plain2_seq, turn2, sampling, nullptr, pool);
        EXPECT_EQ(generate_tokens(target, *seq, turn2, sampling, &spec, pool, nullptr, history), plain2) << what;
        const auto other = target.tokenizer->encode("Something else entirely.", {});
        auto other_seq = target.model->new_sequence(kCache);
        auto plain_other_seq = target.model->new_sequence(kCache);
        ASSERT_TRUE(other_seq.is_ok() && plain_other_seq.is_ok());
        const auto plain_other = generate_tokens(target, *plain_other_seq, other, sampling, nullptr, pool);
        EXPECT_EQ(generate_tokens(target, *other_seq, other, sampling, &spec, pool), plain_other) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ref, DraftSimple,
                         ::testing::Values(Pair{"qwen35moe-tiny-f32", "qwen35moe-tiny-f32", true},
                                           Pair{"qwen35moe-tiny-f32", "qwen35moe-tiny-mixed", false},
                                           Pair{"qwen3moe-small-q4_k_m", "qwen3moe-small-q4_k_m", true}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.target) + "_" + info.param.draft;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(DraftSimpleCli, InfersTheTypeRefusesWhatItCannotHonourAndNotesWhatHasNothingToActOn) {
  using moetier::testing::run_moetier;
  const std::string target = kModels + "qwen35moe-tiny-f32.gguf", draft = kModels + "qwen35moe-tiny-mixed.gguf";
  const std::string gen = " -p 'Once upon a time' -n 16 --temp 0 -t 2";
  const auto plain = run_moetier(fmt::format("run -m '{}'{}", target, gen));
  const auto spec = run_moetier(fmt::format("run -m '{}' -md '{}' --draft-max 3{}", target, draft, gen));
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(spec.rc, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_NE(spec.err.find("speculative (draft-simple)"), std::string::npos) << spec.err;
  const std::pair<std::string, std::string> errors[] = {
      {fmt::format("run -m '{}' -md '{}' -p hi -n 2", target, kModels + "qwen35moe-small-q4_k_m.gguf"),
       "vocabulary size"},
      {fmt::format("run -m '{}' --spec-type draft-simple -p hi -n 2", target), "needs a draft model"},
      {fmt::format("run -m '{}' -md '{}' --spec-type draft-mtp -p hi -n 2", target, draft), "has no MTP layer"},
  };
  for (const auto& [args, message] : errors) {
    const auto r = run_moetier(args);
    EXPECT_EQ(r.rc, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
  // -ngld with nothing to act on is a note, as -ngl is, and the run goes on (llama-server's
  // command lines pass it whether or not there is a GPU or a draft model).
  const std::pair<std::string, std::string> notes[] = {
      {fmt::format("run -m '{}' -md '{}' --draft-max 3 -ngl 0 -ngld 99{}", target, draft, gen), "draft model runs on the CPU too"},
      {fmt::format("run -m '{}' --spec-type ngram-simple -ngld 3{}", target, gen), "nothing to act on"},
  };
  for (const auto& [args, message] : notes) {
    const auto r = run_moetier(args);
    EXPECT_EQ(r.rc, 0) << args << ": " << r.err;
    EXPECT_EQ(r.out, plain.out) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("-ngld", r.err.find("-ngld") + 1), std::string::npos) << "one line: " << r.err;
  }
}

}  // namespace
}  // namespace moetier
