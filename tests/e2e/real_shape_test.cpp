// The CPU path on the real model's dimensions (tests/data/real_shape, support/real_shape.h):
// prompt logits of 1 to 1113 tokens against llama.cpp's, within llama.cpp's own -ub noise on
// this file (the bound is derived in real_shape.h), at the default micro-batch and at -ub 1
// and 7 (micro-batches that cut the prompt at every token / at odd places). Both CPU
// attention paths: exact (-fa off) and flash (-fa on: head dim 256, 16 query heads on 2 KV
// heads, so GQA groups of 8; the 1113-token prompt spans two 1024-key parts).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "core/thread_pool.h"
#include "support/real_shape.h"

namespace moetier {
namespace {

void check_prompts(bool flash) {
  const auto data = testing::load_real_shape();
  ThreadPool pool(2);
  auto m = testing::load_real_shape_model(data);
  ASSERT_TRUE(m.model);
  m.model->set_flash_attention(flash);
  for (const auto& c : data.cases) {
    auto seq = m.model->new_sequence({.n_ctx = 2048, .type_k = DType::F32, .type_v = DType::F32});
    ASSERT_TRUE(seq.is_ok());
    std::vector<float> logits;
    ASSERT_TRUE(m.model->forward(c.tokens, *seq, {}, logits, pool).is_ok());
    testing::expect_real_shape_logits(logits, c, data.tolerance);
    if (std::getenv("MOETIER_TEST_VERBOSE")) {
      std::fprintf(stderr, "real shape %s %s: max|dlogit| %.3g (bound %.3g)\n", flash ? "flash" : "exact",
                   c.name.c_str(), testing::max_abs_diff(logits, c.logits), data.tolerance);
    }
  }
  for (const int64_t ub : {1, 7}) {
    SCOPED_TRACE(::testing::Message() << "-ub " << ub);
    m.model->set_n_ubatch(ub);
    const auto& c = data.get("t100");
    auto seq = m.model->new_sequence({.n_ctx = 2048, .type_k = DType::F32, .type_v = DType::F32});
    ASSERT_TRUE(seq.is_ok());
    std::vector<float> logits;
    ASSERT_TRUE(m.model->forward(c.tokens, *seq, {}, logits, pool).is_ok());
    testing::expect_real_shape_logits(logits, c, data.tolerance);
  }
}

TEST(RealShapeCpu, PromptLogitsMatchLlamaCpp) { check_prompts(false); }
TEST(RealShapeCpu, FlashPromptLogitsMatchLlamaCpp) { check_prompts(true); }

}  // namespace
}  // namespace moetier
