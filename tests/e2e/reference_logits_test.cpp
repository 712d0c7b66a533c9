// End-to-end check against llama.cpp on every (model, prompt) case of ../shared/ref:
// prompt logits, and the 32-step greedy continuation with the logits of every step.
//
// Tolerances come from ../shared/ref/README.md section 6:
//  * F32 models: llama.cpp is within 3e-6 of a float64 reference and 1e-5 is what a
//    correct float32 engine lands at; 1e-4 leaves a 10x margin. All 32 greedy tokens must
//    match (the smallest top-1/top-2 margin in any continuation is 1.4e-3 >> 1e-4).
//  * Quantized models: activations are rounded to 8 bits like ggml does; a float-level
//    difference can flip one int8 code and that jump propagates, so the bound is
//    1.5 × max(refaq diff, llama.cpp's own ub1-vs-default diff) with a 1e-4 floor, and
//    greedy tokens must agree up to the first step whose top-1/top-2 margin is below it.
//  * Decode steps of quantized models: an 8-bit rounding flip ("event") in any step moves
//    later logits by a quantization step, so single-case prompt diffs say nothing about
//    them. The bound is the model's decode noise floor measured between two correct
//    implementations: 1.5 × max over the model's cases of (refaq's step diffs, ub1), the
//    README's "steps" column. llama.cpp's greedy tokens are fed back (teacher forcing), so
//    every one of the 32 steps is compared even after an argmax disagreement; argmax must
//    agree until the first step whose llama.cpp margin is below the bound.
// Both CPU attention paths are held to these bounds: ReferenceLogits runs the exact one
// (-fa off), ReferenceLogitsFlash the flash kernels (-fa on; cpu/flash_attention.h).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/ref_data.h"

#include "core/thread_pool.h"
#include "gguf/model_file.h"
#include "model/model.h"

namespace moetier {
namespace {

const std::string kRef = moetier::testing::kRefDir;
using moetier::testing::read_f32_file;
using moetier::testing::read_json_file;

struct Case {
  std::string id, model, prompt_id;
  std::vector<int32_t> prompt_tokens, greedy_tokens;
  std::string logits_file, steps_file, continuation_file;
  int64_t n_vocab = 0;
  double tolerance = 1e-4;       // prompt logits
  double step_tolerance = 1e-4;  // decode steps
  bool quantized = false;
};
// ctest lists a case by its id rather than gtest's byte dump of the struct.
void PrintTo(const Case& c, std::ostream* os) { *os << c.id; }

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  const auto manifest = read_json_file(kRef + "/manifest.json");
  for (const auto& c : manifest["cases"]) {
    Case k;
    k.id = c["case_id"];
    k.model = c["model"];
    k.prompt_id = c["prompt_id"];
    k.prompt_tokens = c["prompt_tokens"].get<std::vector<int32_t>>();
    k.greedy_tokens = c["greedy_tokens"].get<std::vector<int32_t>>();
    k.logits_file = c["logits"];
    k.steps_file = c["steps_logits"];
    k.continuation_file = c["continuation"];
    k.n_vocab = c["n_vocab"];
    k.quantized = !c["reference_act_quant"].is_null();
    if (k.quantized) {
      const double refaq = c["reference_act_quant"]["last_token"]["max_abs"];
      const double ub1 = c["llamacpp_self"]["ub1_vs_default"]["max_abs"];
      k.tolerance = std::max(1e-4, 1.5 * std::max(refaq, ub1));
    }
    cases.push_back(std::move(k));
  }
  // Per-model decode noise floor (see the header comment).
  std::map<std::string, double> floor_by_model;
  for (const auto& c : manifest["cases"]) {
    if (c["reference_act_quant"].is_null()) continue;
    const double steps = c["reference_act_quant"]["steps_max_abs"];
    const double ub1 = c["llamacpp_self"]["ub1_vs_default"]["max_abs"];
    double& f = floor_by_model[c["model"].get<std::string>()];
    f = std::max({f, steps, ub1});
  }
  for (auto& k : cases) {
    if (k.quantized) k.step_tolerance = std::max(k.tolerance, 1.5 * floor_by_model[k.model]);
  }
  return cases;
}

void check_case(const Case& c, bool flash) {
  auto file = gguf::ModelFile::open(kRef + "/" + c.model, {.mode = gguf::LoadMode::kMmap, .verbose = false});
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto model = load_model(**file, {.n_ubatch = 512, .flash_attention = flash});
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  auto seq = (*model)->new_sequence({.n_ctx = 4096, .type_k = DType::F32, .type_v = DType::F32});
  ASSERT_TRUE(seq.is_ok()) << seq.status().message();
  ThreadPool pool(2);

  std::vector<float> logits;
  ASSERT_TRUE((*model)->forward(c.prompt_tokens, *seq, {}, logits, pool).is_ok());
  ASSERT_EQ(static_cast<int64_t>(logits.size()), c.n_vocab);
  const auto expected = read_f32_file(kRef + "/" + c.logits_file);
  double max_diff = 0;
  for (int64_t i = 0; i < c.n_vocab; ++i) max_diff = std::max(max_diff, std::fabs(double{logits[i]} - expected[i]));
  EXPECT_LE(max_diff, c.tolerance) << c.id << ": prompt logits";
  if (std::getenv("MOETIER_TEST_VERBOSE")) {
    std::fprintf(stderr, "%s%s prompt: max|dlogit| %.3g (bound %.3g)\n", c.id.c_str(), flash ? " flash" : "", max_diff,
                 c.tolerance);
  }

  // Greedy continuation with teacher forcing: llama.cpp's tokens are fed back, so every
  // step's logits are compared against llama.cpp's row for that step.
  const auto steps = read_f32_file(kRef + "/" + c.steps_file);
  const auto continuation = read_json_file(kRef + "/" + c.continuation_file);
  bool may_diverge = false;
  for (size_t s = 0; s < c.greedy_tokens.size(); ++s) {
    const double margin = continuation["steps"][s]["top1_top2_logit_margin"];
    if (margin < c.step_tolerance) may_diverge = true;  // paths may legitimately differ from here on
    int32_t argmax = 0;
    for (int64_t i = 1; i < c.n_vocab; ++i) {
      if (logits[i] > logits[argmax]) argmax = static_cast<int32_t>(i);
    }
    if (!may_diverge) {
      EXPECT_EQ(argmax, c.greedy_tokens[s]) << c.id << ": greedy step " << s;
    }
    double step_diff = 0;
    for (int64_t i = 0; i < c.n_vocab; ++i) {
      step_diff = std::max(step_diff, std::fabs(double{logits[i]} - steps[s * c.n_vocab + i]));
    }
    EXPECT_LE(step_diff, c.step_tolerance) << c.id << ": step " << s << " logits";
    if (std::getenv("MOETIER_TEST_VERBOSE")) {
      std::fprintf(stderr, "%s%s step %zu: max|dlogit| %.3g, llama.cpp margin %.3g\n", c.id.c_str(),
                   flash ? " flash" : "", s, step_diff, margin);
    }
    if (s + 1 == c.greedy_tokens.size()) break;
    const int32_t next = c.greedy_tokens[s];
    ASSERT_TRUE((*model)->forward({&next, 1}, *seq, {}, logits, pool).is_ok());
  }
}

class ReferenceLogits : public ::testing::TestWithParam<Case> {};
class ReferenceLogitsFlash : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceLogits, PromptLogitsAndGreedyContinuation) { check_case(GetParam(), false); }
TEST_P(ReferenceLogitsFlash, PromptLogitsAndGreedyContinuation) { check_case(GetParam(), true); }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.id;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Ref, ReferenceLogits, ::testing::ValuesIn(load_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Ref, ReferenceLogitsFlash, ::testing::ValuesIn(load_cases()), case_name);

}  // namespace
}  // namespace moetier
