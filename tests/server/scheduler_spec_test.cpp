// Speculative decoding in the server's engine loop (server/scheduler.h): with several slots
// decoding together (continuous batching), each slot drafting with its own speculator, every
// request's text and token count equal what the scheduler gives without speculation — greedy
// and seeded sampling, on an attention-only and a hybrid (DeltaNet, rolled back through the
// journal) model, with a repeated prompt that reuses a slot's cached prefix. The drafts come
// from an oracle that knows each request's plain continuation, corrupted at rate 1 − α, so
// drafts are accepted (α = 1, 0.6) and rejected; timings carry draft_n / draft_n_accepted.
// draft-mtp through the same loop is checked on a synth file with an MTP block.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/mtp_drafter.h"
#include "server/scheduler.h"
#include "synth/synth_model.h"
#include "text/tokenizer.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

// Proposes the continuation of whichever known sequence the history is a prefix of.
class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(std::shared_ptr<const std::vector<std::vector<int32_t>>> known, double acceptance, uint32_t seed,
                int32_t n_vocab)
      : known_(std::move(known)), acceptance_(acceptance), rng_(seed), n_vocab_(n_vocab) {}
  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override {
    out.clear();
    std::uniform_real_distribution<double> coin(0, 1);
    for (const auto& seq : *known_) {
      if (seq.size() <= history.size() || !std::equal(history.begin(), history.end(), seq.begin())) continue;
      for (size_t i = history.size(); i < seq.size() && static_cast<int64_t>(out.size()) < max_tokens; ++i) {
        int32_t t = seq[i];
        if (coin(rng_) >= acceptance_) t = (t + 1) % n_vocab_;
        out.push_back(t);
      }
      return;
    }
  }

 private:
  std::shared_ptr<const std::vector<std::vector<int32_t>>> known_;
  double acceptance_;
  std::mt19937 rng_;
  int32_t n_vocab_;
};

struct Result1 {
  std::string text;
  int64_t n_generated = 0, draft_n = 0, draft_accepted = 0;
};

std::vector<Result1> serve_all(Model& model, const text::Tokenizer& tok, ThreadPool& pool,
                               const std::vector<server::GenerationSpec>& specs,
                               std::function<Result<std::unique_ptr<Speculator>>()> make_spec) {
  server::SchedulerOptions options{.n_slots = 2, .kv = {.n_ctx = 256}, .step_tokens = 64};
  options.make_speculator = std::move(make_spec);
  auto scheduler = server::Scheduler::create(model, tok, pool, options);
  EXPECT_TRUE(scheduler.is_ok()) << scheduler.status().message();
  if (!scheduler.is_ok()) return {};
  (*scheduler)->start();
  std::vector<std::shared_ptr<server::GenerationTask>> tasks;
  for (const auto& spec : specs) {
    tasks.push_back(std::make_shared<server::GenerationTask>(spec));
    EXPECT_TRUE((*scheduler)->submit(tasks.back()).is_ok());
  }
  std::vector<Result1> out;
  for (auto& t : tasks) {
    Result1 r;
    bool done = false;
    for (int waited = 0; !done && waited < 600; ++waited) {
      std::vector<server::TaskEvent> events;
      t->wait(events, std::chrono::milliseconds(100));
      for (auto& e : events) {
        r.text += e.reasoning + e.content;
        if (e.final) {
          done = true;
          EXPECT_NE(e.finish, server::FinishReason::kError) << e.error;
          r.n_generated = e.timings.n_generated;
          r.draft_n = e.timings.draft_n;
          r.draft_accepted = e.timings.draft_n_accepted;
        }
      }
    }
    EXPECT_TRUE(done);
    out.push_back(r);
  }
  (*scheduler)->stop();
  return out;
}

using Loaded = moetier::testing::LoadedWithTokenizer;

Loaded load(const std::string& path) { return moetier::testing::load_with_tokenizer(path); }

std::vector<server::GenerationSpec> requests(const text::Tokenizer& tok, const SamplerParams& sampling) {
  std::vector<server::GenerationSpec> specs;
  for (const char* p : {"Slots decode together.", "A second request, longer than the first one.",
                        "Slots decode together."}) {  // the repeat reuses a cached prefix
    specs.push_back({.prompt = tok.encode(p, {}), .sampling = sampling, .max_tokens = 20, .ignore_eos = true});
  }
  return specs;
}

class SchedulerSpeculation : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerSpeculation, EverySlotGetsWhatItGetsWithoutSpeculation) {
  ThreadPool pool(2);
  Loaded l = load(std::string(moetier::testing::kRefDir) + "/models/" + GetParam() + ".gguf");
  ASSERT_TRUE(l.model && l.tokenizer);
  const auto n_vocab = static_cast<int32_t>(l.model->hparams().n_vocab);
  for (const SamplerParams& sampling :
       {SamplerParams{.temperature = 0.0f}, SamplerParams{.temperature = 0.8f, .top_k = 40, .seed = 3}}) {
    const auto specs = requests(*l.tokenizer, sampling);
    const std::vector<Result1> plain = serve_all(*l.model, *l.tokenizer, pool, specs, nullptr);
    ASSERT_EQ(plain.size(), specs.size());
    // Each request's plain continuation, computed alone (what the oracle proposes).
    auto known = std::make_shared<std::vector<std::vector<int32_t>>>();
    for (const auto& spec : specs) {
      auto seq = l.model->new_sequence({.n_ctx = 256});
      ASSERT_TRUE(seq.is_ok());
      auto sampler = Sampler::create(spec.sampling);
      std::vector<int32_t> full = spec.prompt;
      ASSERT_TRUE(generate(*l.model, *seq, *l.tokenizer, *sampler, spec.prompt,
                           {.n_predict = spec.max_tokens, .stop_at_eog = false}, pool, [](std::string_view) {},
                           [&](int32_t t) { full.push_back(t); })
                      .is_ok());
      known->push_back(std::move(full));
    }
    for (double alpha : {1.0, 0.6}) {
      uint32_t seed = 0;
      const auto make = [&]() -> Result<std::unique_ptr<Speculator>> {
        return std::make_unique<Speculator>(SpecParams{.n_max = 3, .adaptive = false},
                                            std::make_unique<OracleDrafter>(known, alpha, ++seed, n_vocab));
      };
      const std::vector<Result1> fast = serve_all(*l.model, *l.tokenizer, pool, specs, make);
      ASSERT_EQ(fast.size(), plain.size());
      int64_t drafted = 0, accepted = 0;
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_EQ(fast[i].text, plain[i].text) << GetParam() << " request " << i << " alpha " << alpha;
        EXPECT_EQ(fast[i].n_generated, plain[i].n_generated) << i;
        EXPECT_GE(fast[i].draft_n, fast[i].draft_accepted);
        drafted += fast[i].draft_n;
        accepted += fast[i].draft_accepted;
      }
      EXPECT_GT(accepted, 0) << GetParam() << " alpha " << alpha;
      if (alpha < 1) EXPECT_LT(accepted, drafted);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ref, SchedulerSpeculation,
                         ::testing::Values("qwen3moe-tiny-f32", "qwen35moe-small-ud_mix"));

TEST(SchedulerSpeculation, DraftMtpSlotsGiveThePlainText) {
  ThreadPool pool(2);
  const std::string path =
      (fs::temp_directory_path() / fmt::format("moetier_sched_mtp_{}.gguf", ::getpid())).string();
  ASSERT_TRUE(synth::synthesize({.preset = "tiny", .n_layer_mtp = 1, .out_path = path, .progress = false}).is_ok());
  {
    Loaded l = load(path);
    ASSERT_TRUE(l.model && l.tokenizer);
    const auto specs = requests(*l.tokenizer, SamplerParams{.temperature = 0.0f});
    const std::vector<Result1> plain = serve_all(*l.model, *l.tokenizer, pool, specs, nullptr);
    const auto make = [&]() -> Result<std::unique_ptr<Speculator>> {
      ASSIGN_OR_RETURN(auto drafter, MtpDrafter::create(*l.model, {.n_ctx = 256}, 0.0, pool));
      return std::make_unique<Speculator>(SpecParams{.type = SpecType::kDraftMtp, .n_max = 3, .adaptive = false},
                                          std::move(drafter));
    };
    const std::vector<Result1> fast = serve_all(*l.model, *l.tokenizer, pool, specs, make);
    ASSERT_EQ(fast.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(fast[i].text, plain[i].text) << i;
      EXPECT_GT(fast[i].draft_n, 0) << i;
    }
  }
  fs::remove(path);
}

}  // namespace
}  // namespace moetier
