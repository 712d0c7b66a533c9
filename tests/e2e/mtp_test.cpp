// MTP drafting (--spec-type draft-mtp; model.h's MtpHead, runtime/mtp_drafter.h) on synth
// files that carry an MTP block, as the real Qwen3.5/3.6 files do:
//  * outputs with draft-mtp equal plain decoding, greedy and sampled, for draft lengths 1,
//    3 and 5, micro-batches of 512 and 2, with and without --spec-draft-p-min;
//  * the head's pairing stays exact through rejections and acceptances: a drafter that
//    runs the MTP head through every hook but proposes the true continuation (so drafts are
//    accepted, at rates 1 and 0.5) ends with a next draft whose logits are bit-identical to
//    those of a fresh head fed the whole sequence at once;
//  * the head's draft logits against llama.cpp's draft-mtp (tests/data/mtp, the bound
//    derived there);
//  * what cannot work is one clear error: no MTP block, a malformed one (only when
//    draft-mtp is asked for), an architecture without MTP;
//  * several sequences through the head in one pass (MtpHead::forward_batch, the -np slots'
//    drafts) give each one's rows bit for bit, and drafters drafting together
//    (Drafter::draft_jobs) each get the draft and logits they get alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "gguf/file_sha256.h"
#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/mtp_drafter.h"
#include "runtime/speculative.h"
#include "synth/synth_model.h"
#include "text/tokenizer.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

// The files mtp_model made, removed when the test binary exits.
struct MadeFiles {
  std::vector<std::string> paths;
  ~MadeFiles() {
    for (const std::string& p : paths) {
      std::error_code ec;
      fs::remove(p, ec);
    }
  }
};
MadeFiles& made_files() {
  static MadeFiles files;
  return files;
}

// A synth file with an MTP block (or only the MTP draft, or without MTP), made once per test
// binary run.
enum class MtpPart { kWithMtp, kMtpOnly, kNoMtp };
std::string mtp_model(const std::string& preset, synth::QuantMix mix, MtpPart part = MtpPart::kWithMtp) {
  const std::string path = (fs::temp_directory_path() / fmt::format("moetier_mtp_{}_{}_{}_{}.gguf", ::getpid(), preset,
                                                                    static_cast<int>(mix), static_cast<int>(part)))
                               .string();
  if (!fs::exists(path)) {
    auto made = synth::synthesize({.preset = preset,
                                   .mix = mix,
                                   .n_layer_mtp = part == MtpPart::kNoMtp ? 0 : 1,
                                   .mtp_only = part == MtpPart::kMtpOnly,
                                   .out_path = path,
                                   .progress = false});
    EXPECT_TRUE(made.is_ok()) << made.status().message();
    made_files().paths.push_back(path);
  }
  return path;
}

using Loaded = moetier::testing::LoadedWithTokenizer;

Loaded load(const std::string& path, int64_t n_ubatch) {
  return moetier::testing::load_with_tokenizer(path, n_ubatch);
}

constexpr KvCacheOptions kCache{.n_ctx = 256, .type_k = DType::F16, .type_v = DType::F16};

struct Outcome {
  std::vector<int32_t> tokens;
  int64_t n_past = 0;
  std::vector<float> next_logits;
  SpecStats spec;
};

Outcome run_generation(Loaded& l, SequenceState& seq, const std::vector<int32_t>& prompt, const SamplerParams& sampling,
                       int64_t n_predict, Speculator* speculator, ThreadPool& pool) {
  Outcome o;
  auto sampler = Sampler::create(sampling);
  EXPECT_TRUE(sampler.is_ok());
  auto stats = generate(*l.model, seq, *l.tokenizer, *sampler, prompt,
                        {.n_predict = n_predict, .stop_at_eog = false, .speculator = speculator}, pool,
                        [](std::string_view) {}, [&](int32_t t) { o.tokens.push_back(t); });
  EXPECT_TRUE(stats.is_ok()) << stats.status().message();
  if (!stats.is_ok()) return o;
  o.spec = stats->spec;
  o.n_past = seq.n_past();
  return o;
}

Outcome run_fresh(Loaded& l, const std::vector<int32_t>& prompt, const SamplerParams& sampling, int64_t n_predict,
                  Speculator* speculator, ThreadPool& pool) {
  auto seq = l.model->new_sequence(kCache);
  EXPECT_TRUE(seq.is_ok());
  Outcome o = run_generation(l, *seq, prompt, sampling, n_predict, speculator, pool);
  const int32_t probe = 7;
  EXPECT_TRUE(l.model->forward({&probe, 1}, *seq, {}, o.next_logits, pool).is_ok());
  return o;
}

// "tiny_f32" or "small_q4_k_m".
class MtpEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpEquivalence, DraftMtpOutputsEqualPlainDecoding) {
  ThreadPool pool(2);
  const bool tiny = GetParam() == "tiny_f32";
  const std::string path = mtp_model(tiny ? "tiny" : "small", tiny ? synth::QuantMix::kF32 : synth::QuantMix::kQ4_K_M);
  for (int64_t n_ubatch : {512, 2}) {
    Loaded l = load(path, n_ubatch);
    ASSERT_TRUE(l.model && l.tokenizer);
    const std::vector<int32_t> prompt = l.tokenizer->encode("The MTP head drafts; the target decides. 12 34", {});
    constexpr int64_t kTokens = 20;
    const SamplerParams modes[] = {{.temperature = 0.0f},
                                   {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 7}};
    for (const SamplerParams& sampling : modes) {
      const Outcome plain = run_fresh(l, prompt, sampling, kTokens, nullptr, pool);
      ASSERT_EQ(static_cast<int64_t>(plain.tokens.size()), kTokens);
      for (int32_t n_max : {1, 3, 5}) {
        for (double p_min : {0.0, 0.3}) {
          const SpecParams sp{.type = SpecType::kDraftMtp, .n_max = n_max, .adaptive = false, .p_min = p_min};
          auto drafter = MtpDrafter::create(*l.model, kCache, p_min, pool);
          ASSERT_TRUE(drafter.is_ok()) << drafter.status().message();
          Speculator spec(sp, std::move(*drafter));
          const Outcome fast = run_fresh(l, prompt, sampling, kTokens, &spec, pool);
          const std::string what = fmt::format("ubatch {} temp {} n_max {} p_min {}", n_ubatch, sampling.temperature,
                                               n_max, p_min);
          EXPECT_EQ(plain.tokens, fast.tokens) << what;
          EXPECT_EQ(plain.n_past, fast.n_past) << what;
          ASSERT_EQ(plain.next_logits.size(), fast.next_logits.size());
          EXPECT_EQ(std::memcmp(plain.next_logits.data(), fast.next_logits.data(), plain.next_logits.size() * 4), 0)
              << what;
          if (p_min == 0.0) {
            EXPECT_GT(fast.spec.n_drafted, 0) << what;  // p_min 0: every step drafts
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Synth, MtpEquivalence, ::testing::Values("tiny_f32", "small_q4_k_m"),
                         [](const auto& info) { return info.param; });

// Runs the MTP head through every hook (so its cache follows the sequence as in real use)
// but proposes the target's own continuation, corrupted at rate 1 − acceptance, so drafts
// are accepted and the head's catch-up of accepted rows is exercised.
class AcceptingMtpDrafter final : public Drafter {
 public:
  AcceptingMtpDrafter(MtpDrafter& mtp, std::unique_ptr<ReplayDrafter> replay) : mtp_(mtp), replay_(std::move(replay)) {}
  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override {
    mtp_.draft(history, max_tokens, out);
    replay_->draft(history, max_tokens, out);
  }
  bool wants_hidden() const override { return true; }
  void on_hidden(std::span<const int32_t> t, int64_t pos, const float* h) override { mtp_.on_hidden(t, pos, h); }
  void on_truncate(int64_t n_keep) override { mtp_.on_truncate(n_keep); }
  Status status() const override { return mtp_.status(); }

 private:
  MtpDrafter& mtp_;
  std::unique_ptr<ReplayDrafter> replay_;
};

// The logits a fresh head gives for the row (history.back(), h at the position before),
// fed the whole history at once with the target's hidden rows from one plain forward.
std::vector<float> fresh_head_logits(Loaded& l, const std::vector<int32_t>& history, ThreadPool& pool) {
  const int64_t d = l.model->hparams().n_embd;
  const auto n = static_cast<int64_t>(history.size()) - 1;  // fed to the target
  std::vector<float> hidden(static_cast<size_t>(d), 0.0f);  // h at position −1
  auto seq = l.model->new_sequence(kCache);
  EXPECT_TRUE(seq.is_ok());
  std::vector<float> logits;
  const HiddenSink collect = [&](std::span<const int32_t> tokens, int64_t, const float* h) {
    hidden.insert(hidden.end(), h, h + static_cast<int64_t>(tokens.size()) * d);
  };
  EXPECT_TRUE(l.model->forward(std::span<const int32_t>(history.data(), static_cast<size_t>(n)), *seq,
                               {.on_hidden = &collect}, logits, pool)
                  .is_ok());
  auto head = l.model->mtp_head();
  EXPECT_TRUE(head.is_ok());
  auto head_seq = (*head)->new_sequence(kCache);
  EXPECT_TRUE(head_seq.is_ok());
  std::vector<float> out(static_cast<size_t>(l.model->hparams().n_vocab));
  EXPECT_TRUE((*head)->forward(history, hidden.data(), *head_seq, nullptr, out.data(), pool).is_ok());
  return out;
}

TEST(MtpDrafter, HeadStaysExactThroughAcceptancesAndRollbacks) {
  ThreadPool pool(2);
  const std::string path = mtp_model("tiny", synth::QuantMix::kF32);
  for (int64_t n_ubatch : {512, 3}) {
    Loaded l = load(path, n_ubatch);
    ASSERT_TRUE(l.model && l.tokenizer);
    const std::vector<int32_t> prompt = l.tokenizer->encode("Pairing token p with the hidden state at p - 1.", {});
    const int32_t n_vocab = static_cast<int32_t>(l.model->hparams().n_vocab);
    constexpr int64_t kTokens = 24;
    const SamplerParams greedy{.temperature = 0.0f};
    const Outcome plain = run_fresh(l, prompt, greedy, kTokens, nullptr, pool);
    for (double alpha : {1.0, 0.5}) {
      auto mtp = MtpDrafter::create(*l.model, kCache, 0.0, pool);
      ASSERT_TRUE(mtp.is_ok());
      (*mtp)->set_keep_logits(true);
      auto replay = std::make_unique<ReplayDrafter>(plain.tokens, static_cast<int64_t>(prompt.size()), n_vocab, alpha, 5);
      Speculator spec({.type = SpecType::kDraftMtp, .n_max = 4, .adaptive = false},
                      std::make_unique<AcceptingMtpDrafter>(**mtp, std::move(replay)));
      auto seq = l.model->new_sequence(kCache);
      ASSERT_TRUE(seq.is_ok());
      const Outcome fast = run_generation(l, *seq, prompt, greedy, kTokens, &spec, pool);
      const std::string what = fmt::format("ubatch {} alpha {}", n_ubatch, alpha);
      ASSERT_EQ(fast.tokens, plain.tokens) << what;
      EXPECT_GT(fast.spec.n_accepted, 0) << what;
      // The head's next draft, from where generation stopped, against a fresh head.
      std::vector<int32_t> history = prompt;
      history.insert(history.end(), fast.tokens.begin(), fast.tokens.end());
      // A last token accepted in a verify batch was fed already: draft on from any next token.
      if (static_cast<int64_t>(history.size()) == seq->n_past()) history.push_back(5);
      ASSERT_EQ(static_cast<int64_t>(history.size()), seq->n_past() + 1) << what;
      std::vector<int32_t> out;
      (*mtp)->draft(history, 1, out);
      ASSERT_EQ(out.size(), 1u) << what;
      const std::vector<float>& got = (*mtp)->last_draft_logits();
      const std::vector<float> want = fresh_head_logits(l, history, pool);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
      EXPECT_EQ((*mtp)->head_positions(), seq->n_past() + 1) << what;  // only the exact row stays
    }
  }
}

// llama.cpp's draft-mtp on the same synth files (tests/data/mtp/README.md): the target's
// last prompt logits, then three draft steps of the head, chained on the head's own hidden
// state with llama.cpp's draft tokens. F32 weights and f32 KV on both sides, so the bound is
// the reference suite's F32 bound (1e-4: ../shared/ref/README.md section 6, 10x what two
// correct float32 engines differ by); the measured diffs are in the README.
class MtpVsLlamaCpp : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpVsLlamaCpp, DraftLogitsMatchLlamaCpp) {
  constexpr double kBound = 1e-4;
  const std::string case_file = std::string(MOETIER_SOURCE_DIR) + "/tests/data/mtp/" + GetParam() + ".llamacpp.json";
  std::ifstream in(case_file);
  ASSERT_TRUE(in.good()) << case_file;
  const auto ref = nlohmann::json::parse(in);
  const std::string preset = GetParam().substr(0, GetParam().find('-'));
  const std::string path = mtp_model(preset, synth::QuantMix::kF32);
  auto sha = file_sha256(path);
  ASSERT_TRUE(sha.is_ok());
  ASSERT_EQ(*sha, ref["model_sha256"].get<std::string>()) << "synth no longer writes the file llama.cpp ran";

  ThreadPool pool(2);
  auto file = gguf::ModelFile::open(path, {.mode = gguf::LoadMode::kMmap, .verbose = false});
  ASSERT_TRUE(file.is_ok());
  auto model = load_model(**file, {.n_ubatch = 512, .flash_attention = false});
  ASSERT_TRUE(model.is_ok());
  const int64_t d = (*model)->hparams().n_embd, n_vocab = (*model)->hparams().n_vocab;
  const KvCacheOptions cache{.n_ctx = 512, .type_k = DType::F32, .type_v = DType::F32};

  const auto prompt = ref["prompt"].get<std::vector<int32_t>>();
  std::vector<float> hidden(static_cast<size_t>(d), 0.0f);  // h at position −1: zeros
  const HiddenSink collect = [&](std::span<const int32_t> tokens, int64_t, const float* h) {
    hidden.insert(hidden.end(), h, h + static_cast<int64_t>(tokens.size()) * d);
  };
  auto seq = (*model)->new_sequence(cache);
  ASSERT_TRUE(seq.is_ok());
  std::vector<float> logits;
  ASSERT_TRUE((*model)->forward(prompt, *seq, {.on_hidden = &collect}, logits, pool).is_ok());
  const auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
    return m;
  };
  const auto target_ref = ref["target_last_logits"].get<std::vector<float>>();
  EXPECT_LE(max_diff(logits, target_ref), kBound) << "target logits";
  const auto next = ref["next_token"].get<int32_t>();
  EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), next);

  auto head = (*model)->mtp_head();
  ASSERT_TRUE(head.is_ok()) << head.status().message();
  auto head_seq = (*head)->new_sequence(cache);
  ASSERT_TRUE(head_seq.is_ok());
  // Catch-up rows (P[i], h_(i−1)) and the first draft row (t, h_(n−1)) in one pass.
  std::vector<int32_t> rows = prompt;
  rows.push_back(next);
  std::vector<float> out_h(rows.size() * static_cast<size_t>(d)), step_logits(static_cast<size_t>(n_vocab));
  ASSERT_TRUE((*head)->forward(rows, hidden.data(), *head_seq, out_h.data(), step_logits.data(), pool).is_ok());
  std::vector<float> h(out_h.end() - d, out_h.end());
  const auto drafts = ref["draft_tokens"].get<std::vector<int32_t>>();
  const auto& mtp_logits = ref["mtp_logits"];
  ASSERT_EQ(drafts.size(), mtp_logits.size());
  for (size_t step = 0; step < drafts.size(); ++step) {
    const auto want = mtp_logits[step].get<std::vector<float>>();
    const double diff = max_diff(step_logits, want);
    EXPECT_LE(diff, kBound) << GetParam() << " draft step " << step + 1;
    RecordProperty(fmt::format("step{}_max_abs", step + 1), fmt::format("{:.3g}", diff));
    EXPECT_EQ(std::max_element(step_logits.begin(), step_logits.end()) - step_logits.begin(), drafts[step])
        << GetParam() << " draft step " << step + 1;
    if (step + 1 == drafts.size()) break;
    std::vector<float> h_next(static_cast<size_t>(d));
    ASSERT_TRUE((*head)->forward({&drafts[step], 1}, h.data(), *head_seq, h_next.data(), step_logits.data(), pool).is_ok());
    h.swap(h_next);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, MtpVsLlamaCpp, ::testing::Values("tiny-A", "tiny-B", "small-A", "small-B"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// Three prompts' target hidden rows: prompt i fed to a fresh target sequence (all but its
// last token), the final-norm rows collected, row −1 zeros.
struct TargetRows {
  std::vector<int32_t> prompt;
  std::vector<float> hidden;  // [prompt.size()][n_embd]: h at −1, 0, ..., n − 2
};
std::vector<TargetRows> target_rows(Loaded& l, const std::vector<std::string>& texts, ThreadPool& pool) {
  const int64_t d = l.model->hparams().n_embd;
  std::vector<TargetRows> out;
  for (const std::string& text : texts) {
    TargetRows r;
    r.prompt = l.tokenizer->encode(text, {});
    r.hidden.assign(static_cast<size_t>(d), 0.0f);
    const HiddenSink collect = [&](std::span<const int32_t> tokens, int64_t, const float* h) {
      r.hidden.insert(r.hidden.end(), h, h + static_cast<int64_t>(tokens.size()) * d);
    };
    auto seq = l.model->new_sequence(kCache);
    EXPECT_TRUE(seq.is_ok());
    std::vector<float> logits;
    EXPECT_TRUE(l.model->forward(std::span<const int32_t>(r.prompt.data(), r.prompt.size() - 1), *seq,
                                 {.on_hidden = &collect}, logits, pool)
                    .is_ok());
    out.push_back(std::move(r));
  }
  return out;
}

const std::vector<std::string> kSlotTexts = {"The first slot asks about the weather in Lisbon.",
                                             "Slot two: 1 2 3 4", "A third, longer request with more tokens in it, "
                                             "so the rows of the sequences differ in number."};

TEST(MtpHead, ForwardBatchEqualsEachSequenceAlone) {
  ThreadPool pool(2);
  for (const auto& [preset, mix] : {std::pair{"tiny", synth::QuantMix::kF32}, std::pair{"small", synth::QuantMix::kQ4_K_M}}) {
    Loaded l = load(mtp_model(preset, mix), 512);
    ASSERT_TRUE(l.model && l.tokenizer);
    const int64_t d = l.model->hparams().n_embd, n_vocab = l.model->hparams().n_vocab;
    const std::vector<TargetRows> rows = target_rows(l, kSlotTexts, pool);
    auto head = l.model->mtp_head();
    auto other = l.model->mtp_head();
    ASSERT_TRUE(head.is_ok() && other.is_ok());
    ASSERT_TRUE((*head)->shares_weights_with(**other)) << "heads of one model read the same weights";
    // Alone: each sequence through its own head; together: all through `head` in one pass.
    const size_t n = rows.size();
    std::vector<SequenceState> alone_seq, together_seq;
    std::vector<std::vector<float>> alone_h(n), alone_logits(n), together_h(n), together_logits(n);
    std::vector<MtpHead::Entry> entries;
    for (size_t i = 0; i < n; ++i) {
      alone_seq.push_back(std::move(*(*other)->new_sequence(kCache)));
      together_seq.push_back(std::move(*(*head)->new_sequence(kCache)));
    }
    for (size_t i = 0; i < n; ++i) {
      const auto m = static_cast<int64_t>(rows[i].prompt.size());
      for (auto* v : {&alone_h[i], &together_h[i]}) v->resize(static_cast<size_t>(m * d));
      for (auto* v : {&alone_logits[i], &together_logits[i]}) v->resize(static_cast<size_t>(n_vocab));
      ASSERT_TRUE((*other)->forward(rows[i].prompt, rows[i].hidden.data(), alone_seq[i], alone_h[i].data(),
                                     alone_logits[i].data(), pool).is_ok());
      entries.push_back({.tokens = rows[i].prompt, .hidden = rows[i].hidden.data(), .seq = &together_seq[i],
                         .hidden_out = together_h[i].data(), .logits_last = together_logits[i].data()});
    }
    ASSERT_TRUE((*head)->forward_batch(entries, pool).is_ok());
    for (size_t i = 0; i < n; ++i) {
      const std::string what = fmt::format("{} sequence {}", preset, i);
      EXPECT_EQ(together_seq[i].n_past(), alone_seq[i].n_past()) << what;
      EXPECT_EQ(std::memcmp(together_h[i].data(), alone_h[i].data(), alone_h[i].size() * sizeof(float)), 0) << what;
      EXPECT_EQ(std::memcmp(together_logits[i].data(), alone_logits[i].data(), alone_logits[i].size() * sizeof(float)), 0)
          << what;
    }
    // A second pass of one row each, chained on the head's own output (a draft's next step).
    std::vector<std::vector<float>> alone_h2(n, std::vector<float>(static_cast<size_t>(d))), together_h2 = alone_h2;
    entries.clear();
    const int32_t next = 11;
    for (size_t i = 0; i < n; ++i) {
      const float* h = alone_h[i].data() + alone_h[i].size() - static_cast<size_t>(d);
      ASSERT_TRUE((*other)->forward({&next, 1}, h, alone_seq[i], alone_h2[i].data(), alone_logits[i].data(), pool).is_ok());
      entries.push_back({.tokens = {&next, 1}, .hidden = together_h[i].data() + together_h[i].size() - static_cast<size_t>(d),
                         .seq = &together_seq[i], .hidden_out = together_h2[i].data(),
                         .logits_last = together_logits[i].data()});
    }
    ASSERT_TRUE((*head)->forward_batch(entries, pool).is_ok());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(together_h2[i], alone_h2[i]) << preset << " step 2, sequence " << i;
      EXPECT_EQ(std::memcmp(together_logits[i].data(), alone_logits[i].data(), alone_logits[i].size() * sizeof(float)), 0)
          << preset << " step 2, sequence " << i;
    }
  }
}

TEST(MtpDrafter, SlotsDraftingTogetherGetWhatEachGetsAlone) {
  ThreadPool pool(2);
  for (const auto& [preset, mix] : {std::pair{"tiny", synth::QuantMix::kF32}, std::pair{"small", synth::QuantMix::kQ4_K_M}}) {
    Loaded l = load(mtp_model(preset, mix), 512);
    ASSERT_TRUE(l.model && l.tokenizer);
    const std::vector<TargetRows> rows = target_rows(l, kSlotTexts, pool);
    const int64_t d = l.model->hparams().n_embd;
    const size_t n = rows.size();
    // Different lengths, and one drafter whose p_min may stop it early.
    const int64_t max_tokens[] = {4, 2, 3};
    const double p_min[] = {0.0, 0.0, 0.02};
    std::vector<std::unique_ptr<MtpDrafter>> alone, together;
    for (size_t i = 0; i < n; ++i) {
      for (auto* set : {&alone, &together}) {
        auto dr = MtpDrafter::create(*l.model, kCache, p_min[i], pool);
        ASSERT_TRUE(dr.is_ok()) << dr.status().message();
        (*dr)->set_keep_logits(true);
        (*dr)->on_hidden(std::span<const int32_t>(rows[i].prompt.data(), rows[i].prompt.size() - 1), 0,
                         rows[i].hidden.data() + d);
        set->push_back(std::move(*dr));
      }
    }
    std::vector<std::vector<int32_t>> alone_out(n), together_out(n);
    std::vector<DraftJob> jobs;
    for (size_t i = 0; i < n; ++i) {
      alone[i]->draft(rows[i].prompt, max_tokens[i], alone_out[i]);
      jobs.push_back({.drafter = together[i].get(), .history = rows[i].prompt, .max_tokens = max_tokens[i],
                      .out = &together_out[i]});
    }
    together[0]->draft_jobs(jobs);
    int64_t drafted = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string what = fmt::format("{} slot {}", preset, i);
      EXPECT_TRUE(together[i]->status().is_ok()) << what;
      EXPECT_EQ(together_out[i], alone_out[i]) << what;
      EXPECT_EQ(together[i]->last_draft_logits(), alone[i]->last_draft_logits()) << what;
      EXPECT_EQ(together[i]->head_positions(), alone[i]->head_positions()) << what;
      drafted += static_cast<int64_t>(together_out[i].size());
    }
    EXPECT_EQ(static_cast<int64_t>(together_out[0].size()), max_tokens[0]) << "p_min 0: a whole draft";
    EXPECT_GT(drafted, 0);
  }
}

TEST(MtpDrafter, MissingOrMalformedMtpBlockIsAClearErrorOnlyWhenAskedFor) {
  ThreadPool pool(1);
  // No MTP block.
  auto file = gguf::ModelFile::open(std::string(moetier::testing::kRefDir) + "/models/qwen35moe-tiny-f32.gguf",
                                    {.mode = gguf::LoadMode::kMmap, .verbose = false});
  ASSERT_TRUE(file.is_ok());
  auto model = load_model(**file, {});
  ASSERT_TRUE(model.is_ok());
  auto d = MtpDrafter::create(**model, kCache, 0.0, pool);
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("no MTP block"), std::string::npos) << d.status().message();

  // An attention-only architecture has no MTP head at all.
  auto file3 = gguf::ModelFile::open(std::string(moetier::testing::kRefDir) + "/models/qwen3moe-tiny-f32.gguf",
                                     {.mode = gguf::LoadMode::kMmap, .verbose = false});
  ASSERT_TRUE(file3.is_ok());
  auto model3 = load_model(**file3, {});
  ASSERT_TRUE(model3.is_ok());
  auto d3 = MtpDrafter::create(**model3, kCache, 0.0, pool);
  ASSERT_FALSE(d3.is_ok());
  EXPECT_NE(d3.status().message().find("no MTP head"), std::string::npos) << d3.status().message();

  // CLI: the same errors, exit status 2, one line.
  const auto r = moetier::testing::run_moetier(
      fmt::format("run -m '{}/models/qwen35moe-tiny-f32.gguf' -p hi -n 2 --spec-type draft-mtp",
                  moetier::testing::kRefDir));
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("no MTP block"), std::string::npos) << r.err;
  const auto pmin = moetier::testing::run_moetier(fmt::format(
      "run -m '{}' -p hi -n 2 --spec-type ngram-simple --spec-draft-p-min 0.5", mtp_model("tiny", synth::QuantMix::kF32)));
  EXPECT_EQ(pmin.rc, 2) << pmin.err;
  EXPECT_NE(pmin.err.find("--spec-draft-p-min applies to --spec-type draft-mtp"), std::string::npos) << pmin.err;
}

// An MTP-only GGUF (-md) is the same head as the full file's MTP block: identical logits and
// hidden rows; run infers --spec-type draft-mtp from it, also for a target without an MTP
// block; mismatches and misuse are one clear error.
TEST(MtpOnlyFile, HeadEqualsTheFullFilesAndRunsAsDraft) {
  ThreadPool pool(2);
  const std::string full = mtp_model("tiny", synth::QuantMix::kF32);
  const std::string only = mtp_model("tiny", synth::QuantMix::kF32, MtpPart::kMtpOnly);
  Loaded l = load(full, 512);
  ASSERT_TRUE(l.model);
  auto head_a = l.model->mtp_head();
  ASSERT_TRUE(head_a.is_ok());
  auto file = gguf::ModelFile::open(only, {.mode = gguf::LoadMode::kMmap, .verbose = false});
  ASSERT_TRUE(file.is_ok());
  auto hp = read_hparams((*file)->header());
  ASSERT_TRUE(hp.is_ok());
  EXPECT_EQ((*file)->header().find_tensor("blk.0.attn_norm.weight"), nullptr);  // no trunk
  EXPECT_FALSE(load_model(**file, {}).is_ok());  // not runnable as a model on its own
  auto head_b = find_arch("qwen35moe")->create_mtp_head(std::shared_ptr<const gguf::ModelFile>(std::move(*file)), *hp,
                                                        {.flash_attention = true});
  ASSERT_TRUE(head_b.is_ok()) << head_b.status().message();
  const int64_t d = l.model->hparams().n_embd, n_vocab = l.model->hparams().n_vocab;
  const std::vector<int32_t> tokens = {3, 40, 41, 200, 7};
  std::vector<float> hidden(tokens.size() * static_cast<size_t>(d));
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> out_a(hidden.size()), out_b(hidden.size()), logits_a(static_cast<size_t>(n_vocab)),
      logits_b(static_cast<size_t>(n_vocab));
  auto seq_a = (*head_a)->new_sequence(kCache);
  auto seq_b = (*head_b)->new_sequence(kCache);
  ASSERT_TRUE(seq_a.is_ok() && seq_b.is_ok());
  ASSERT_TRUE((*head_a)->forward(tokens, hidden.data(), *seq_a, out_a.data(), logits_a.data(), pool).is_ok());
  ASSERT_TRUE((*head_b)->forward(tokens, hidden.data(), *seq_b, out_b.data(), logits_b.data(), pool).is_ok());
  EXPECT_EQ(std::memcmp(out_a.data(), out_b.data(), out_a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(logits_a.data(), logits_b.data(), logits_a.size() * 4), 0);

  using moetier::testing::run_moetier;
  const std::string gen = " -p 'Once upon a time' -n 16 --temp 0 -t 2 --spec-adaptive off";
  const auto in_file = run_moetier(fmt::format("run -m '{}' --spec-type draft-mtp{}", full, gen));
  const auto from_md = run_moetier(fmt::format("run -m '{}' -md '{}'{}", full, only, gen));
  ASSERT_EQ(in_file.rc, 0) << in_file.err;
  ASSERT_EQ(from_md.rc, 0) << from_md.err;
  EXPECT_EQ(in_file.out, from_md.out);
  const auto stats_line = [](const std::string& err) { return err.substr(err.find("speculative (draft-mtp)")); };
  EXPECT_EQ(stats_line(in_file.err).substr(0, 60), stats_line(from_md.err).substr(0, 60));
  // A target without an MTP block drafts with the separate file.
  const std::string plain_model = mtp_model("tiny", synth::QuantMix::kF32, MtpPart::kNoMtp);
  const auto no_block = run_moetier(fmt::format("run -m '{}' -md '{}'{}", plain_model, only, gen));
  ASSERT_EQ(no_block.rc, 0) << no_block.err;
  EXPECT_EQ(no_block.out, in_file.out);  // same weights but the MTP block: the same text
  // Errors: the MTP-only file as the model; a draft of another shape; -md with ngram-simple;
  // draft-mtp from a file without an MTP layer.
  const std::string small_only = mtp_model("small", synth::QuantMix::kF32, MtpPart::kMtpOnly);
  const std::pair<std::string, std::string> errors[] = {
      {fmt::format("run -m '{}' -p hi -n 2", only), "MTP-only GGUF"},
      {fmt::format("run -m '{}' -md '{}' -p hi -n 2", full, small_only), "differs from the model's"},
      {fmt::format("run -m '{}' -md '{}' --spec-type ngram-simple -p hi -n 2", full, only), "a draft file needs --spec-type"},
      {fmt::format("run -m '{}' -md '{}' --spec-type draft-mtp -p hi -n 2", full, plain_model), "has no MTP layer"},
  };
  for (const auto& [args, message] : errors) {
    const auto r = run_moetier(args);
    EXPECT_EQ(r.rc, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

// inspect --plan knows speculation's memory before anything is loaded: with draft-mtp the MTP
// block is placed (GPU under -ngl all) with its KV cache, and every type's rollback journal
// multiplies the DeltaNet state per sequence on a GPU by n_max + 2 (the state plus n_max + 1
// copies); on the CPU it adds one copy, the conv states and per-token records, and the text
// plan names it.
TEST(MtpCli, InspectPlanCountsSpeculationMemory) {
  const std::string path = mtp_model("tiny", synth::QuantMix::kF32);
  const auto plan_of = [&](const std::string& flags) {
    const auto r = moetier::testing::run_moetier(
        fmt::format("inspect '{}' --plan -c 512 -ngl all --vram-budget 4096 --json {}", path, flags));
    EXPECT_EQ(r.rc, 0) << flags << ": " << r.err;
    return nlohmann::json::parse(r.out, nullptr, false)["plan"];
  };
  const auto plain = plan_of(""), spec = plan_of("--spec-type draft-mtp --spec-draft-n-max 3");
  ASSERT_TRUE(plain.is_object() && spec.is_object());
  const auto& mtp_plain = plain["layers"].back();
  const auto& mtp_spec = spec["layers"].back();
  EXPECT_TRUE(mtp_spec["mtp"].get<bool>());
  EXPECT_EQ(mtp_plain["dense"], "CPU");
  EXPECT_EQ(mtp_plain["kv_bytes"], 0);
  EXPECT_EQ(mtp_spec["dense"], "GPU0");
  EXPECT_GT(mtp_spec["kv_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(spec["params"]["journal_tokens"], 4);
  EXPECT_EQ(spec["state_bytes"].get<int64_t>(), 5 * plain["state_bytes"].get<int64_t>());
  const auto cpu = plan_of("--spec-type draft-mtp --spec-draft-n-max 3 -ngl 0");
  ASSERT_TRUE(cpu.is_object());
  EXPECT_GT(cpu["state_bytes"].get<int64_t>(), 2 * plain["state_bytes"].get<int64_t>());
  EXPECT_LT(cpu["state_bytes"].get<int64_t>(), 5 * plain["state_bytes"].get<int64_t>());
  const auto text = moetier::testing::run_moetier(
      fmt::format("inspect '{}' --plan -c 512 -ngl 0 --spec-type draft-mtp --spec-draft-n-max 3", path));
  EXPECT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("of rollback journal (4 positions per sequence, speculative decoding)"), std::string::npos)
      << text.out;
  const auto bad = moetier::testing::run_moetier(fmt::format("inspect '{}' --spec-type draft-mtp", path));
  EXPECT_EQ(bad.rc, 2);  // --spec-type without --plan
}

TEST(MtpCli, RunWithDraftMtpPrintsTheSameTextAndItsStats) {
  const std::string path = mtp_model("tiny", synth::QuantMix::kF32);
  const std::string base = fmt::format("run -m '{}' -p 'Once upon a time' -n 24 --temp 0 -t 2", path);
  const auto plain = moetier::testing::run_moetier(base);
  const auto spec = moetier::testing::run_moetier(base + " --spec-type draft-mtp --draft-max 3 --draft-p-min 0");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(spec.rc, 0) << spec.err;
  EXPECT_EQ(plain.out, spec.out);
  EXPECT_NE(spec.err.find("speculative (draft-mtp)"), std::string::npos) << spec.err;
  // Drafts longer than the room left in the context are cut to it: generation runs until the
  // context is full, as without speculation.
  const std::string tight = fmt::format("run -m '{}' -p 'Once upon a time' -n 64 -c 24 --temp 0 -t 2", path);
  const auto tight_plain = moetier::testing::run_moetier(tight);
  const auto tight_spec = moetier::testing::run_moetier(tight + " --spec-type draft-mtp --draft-max 16 --spec-adaptive off");
  ASSERT_EQ(tight_plain.rc, 0) << tight_plain.err;
  ASSERT_EQ(tight_spec.rc, 0) << tight_spec.err;
  EXPECT_EQ(tight_plain.out, tight_spec.out);
}

}  // namespace
}  // namespace moetier
