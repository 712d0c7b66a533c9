// Model::forward_batch (the server's continuous batching): several sequences in one pass
// give, bit for bit, the logits each sequence gets alone — in prefill, in decode, and when
// one sequence's prefill shares a micro-batch with others' decode steps or straddles two
// micro-batches. This is what lets concurrent greedy requests return exactly what each
// returns alone.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "gguf/model_file.h"
#include "model/model.h"

namespace moetier {
namespace {

const std::string kRef = moetier::testing::kRefDir;

using Loaded = moetier::testing::LoadedModel;
Loaded load(const std::string& name, int64_t n_ubatch = 512) { return moetier::testing::load_ref_model(name, n_ubatch); }
std::vector<int32_t> prompt_tokens(const std::string& model, const std::string& prompt_id) {
  return moetier::testing::ref_prompt_tokens(model, prompt_id);
}

// A sequence's schedule: its prompt goes in as `chunks` (token counts), then `decode`
// further tokens one per step.
struct Script {
  std::vector<int32_t> tokens;
  std::vector<size_t> chunks;
};

// Logits after each step of `script` run alone (one forward() per chunk / token).
std::vector<std::vector<float>> run_alone(Model& model, const Script& script, ThreadPool& pool) {
  auto seq = model.new_sequence({.n_ctx = 1024, .type_k = DType::F16, .type_v = DType::F16});
  EXPECT_TRUE(seq.is_ok());
  std::vector<std::vector<float>> steps;
  size_t at = 0;
  for (size_t c : script.chunks) {
    std::vector<float> logits;
    EXPECT_TRUE(model.forward({script.tokens.data() + at, c}, *seq, {}, logits, pool).is_ok());
    at += c;
    steps.push_back(logits);
  }
  return steps;
}

class BatchedSequences : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedSequences, EqualEachSequenceAloneBitForBit) {
  const std::string name = GetParam();
  // -ub 40: the 46-token prefill of sequence 1 shares a micro-batch with the others' decode
  // tokens and spills into the next one.
  Loaded l = load(name, 40);
  ASSERT_TRUE(l.model);
  ThreadPool pool(2);
  const auto p1 = prompt_tokens(name, "p3_mixed"), p2 = prompt_tokens(name, "p2_short"),
             p3 = prompt_tokens(name, "p4_code");
  ASSERT_GE(p1.size(), 30u);
  ASSERT_GE(p3.size(), 46u);
  // Steps (all sequences advance together; 0 = idle in that step):
  //   seq 0: prefill 20, then 1 token per step
  //   seq 1: idle, idle, prefill 40, 1, 1, ...
  //   seq 2: prefill p2_short, 1, 1, ...
  std::vector<std::vector<size_t>> plan = {
      {20, 1, 1, 1, 1, 1, 1},
      {0, 0, 46, 1, 1, 1, 1},
      {p2.size(), 1, 1, 1, 1, 1, 1},
  };
  std::vector<Script> scripts = {{p1, {}}, {p3, {}}, {p2, {}}};
  // Decode tokens: continue each sequence with tokens from another prompt (what matters
  // is that they are fed one at a time).
  scripts[2].tokens.insert(scripts[2].tokens.end(), p1.begin(), p1.begin() + 10);
  for (size_t s = 0; s < plan.size(); ++s) {
    for (size_t c : plan[s]) {
      if (c) scripts[s].chunks.push_back(c);
    }
  }

  std::vector<std::vector<std::vector<float>>> alone;
  for (const Script& s : scripts) alone.push_back(run_alone(*l.model, s, pool));

  std::vector<SequenceState> seqs;
  for (size_t s = 0; s < scripts.size(); ++s) {
    auto seq = l.model->new_sequence({.n_ctx = 1024, .type_k = DType::F16, .type_v = DType::F16});
    ASSERT_TRUE(seq.is_ok());
    seqs.push_back(std::move(seq).value());
  }
  std::vector<size_t> at(scripts.size(), 0), step_of(scripts.size(), 0);
  const int64_t nv = l.model->hparams().n_vocab;
  for (size_t step = 0; step < plan[0].size(); ++step) {
    std::vector<BatchEntry> entries;
    std::vector<size_t> who;
    for (size_t s = 0; s < scripts.size(); ++s) {
      const size_t c = plan[s][step];
      if (!c) continue;
      entries.push_back({.seq = &seqs[s], .tokens = {scripts[s].tokens.data() + at[s], c}});
      at[s] += c;
      who.push_back(s);
    }
    std::vector<float> logits;
    ASSERT_TRUE(l.model->forward_batch(entries, logits, pool).is_ok());
    ASSERT_EQ(logits.size(), who.size() * static_cast<size_t>(nv));
    for (size_t i = 0; i < who.size(); ++i) {
      const size_t s = who[i];
      const auto& expected = alone[s][step_of[s]++];
      EXPECT_EQ(std::memcmp(logits.data() + i * nv, expected.data(), nv * sizeof(float)), 0)
          << name << ": sequence " << s << " at step " << step;
    }
  }
  for (size_t s = 0; s < scripts.size(); ++s) EXPECT_EQ(seqs[s].n_past(), static_cast<int64_t>(at[s]));
}

INSTANTIATE_TEST_SUITE_P(Ref, BatchedSequences,
                         ::testing::Values("qwen35moe-small-ud_mix", "qwen35moe-tiny-mixed", "qwen3moe-small-q4_k_m"),
                         [](const auto& info) { return testing::param_name(info.param); });

TEST(BatchedSequencesErrors, BadBatchesAreClearErrors) {
  Loaded l = load("qwen35moe-tiny-f32", 512);
  ASSERT_TRUE(l.model);
  ThreadPool pool(1);
  auto a = l.model->new_sequence({.n_ctx = 8});
  auto b = l.model->new_sequence({.n_ctx = 8});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const std::vector<int32_t> three = {1, 2, 3}, nine(9, 1), bad = {1, 100000};
  std::vector<float> logits;
  EXPECT_FALSE(l.model->forward_batch({}, logits, pool).is_ok());
  std::vector<BatchEntry> twice = {{.seq = &*a, .tokens = three}, {.seq = &*a, .tokens = three}};
  EXPECT_NE(l.model->forward_batch(twice, logits, pool).message().find("twice"), std::string::npos);
  std::vector<BatchEntry> too_long = {{.seq = &*a, .tokens = three}, {.seq = &*b, .tokens = nine}};
  EXPECT_NE(l.model->forward_batch(too_long, logits, pool).message().find("context"), std::string::npos);
  std::vector<BatchEntry> bad_id = {{.seq = &*b, .tokens = bad}};
  EXPECT_NE(l.model->forward_batch(bad_id, logits, pool).message().find("out of range"), std::string::npos);
  // Nothing was computed by the failed calls.
  EXPECT_EQ(a->n_past(), 0);
  EXPECT_EQ(b->n_past(), 0);
}

}  // namespace
}  // namespace moetier
