// Context shift on a whole model (qwen3moe, every layer softmax attention with NEOX rotary),
// with the rotary the architecture file declares (LayerStateSpec: n_rot, rope_base).
//
// A shift is an approximation by design (llama.cpp's too): the kept tokens' states in layers
// above the first were computed while attending to the dropped ones, so no fresh run equals
// the shifted sequence. What is exact is the first layer: its K/V rows depend only on the
// token and its position. So after dropping [n_keep, n_keep + n_discard), layer 0 of the
// shifted cache must equal layer 0 of a fresh sequence fed only the kept tokens: V rows bit
// for bit, K rows within the per-element bound derived in tests/unit/sequence_state_test.cpp
// (11u of the rotary pair's norm on an f32 cache, the pair norm taken from the fresh row,
// which has the same norm up to rounding). Then decoding goes on from the shifted state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "support/ref_data.h"
#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "model/model.h"

namespace moetier {
namespace {

TEST(ContextShiftModel, FirstLayerRowsAreThoseOfTheKeptTokens) {
  auto l = testing::load_ref_model("qwen3moe-tiny-f32");
  ASSERT_TRUE(l.model);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = testing::ref_prompt_tokens("qwen3moe-tiny-f32", "p4_code");
  ASSERT_GE(prompt.size(), 40u);
  const int64_t n_keep = 5, n_discard = 17;
  const KvCacheOptions kv{.n_ctx = 256, .type_k = DType::F32, .type_v = DType::F32};

  auto shifted = l.model->new_sequence(kv);
  ASSERT_TRUE(shifted.is_ok());
  std::vector<float> logits;
  ASSERT_TRUE(l.model->forward(prompt, *shifted, {}, logits, pool).is_ok());
  ASSERT_TRUE(shifted->can_shift());
  const Status st = shifted->shift(n_keep, n_discard);
  ASSERT_TRUE(st.is_ok()) << st.message();

  std::vector<int32_t> kept(prompt.begin(), prompt.begin() + n_keep);
  kept.insert(kept.end(), prompt.begin() + n_keep + n_discard, prompt.end());
  auto fresh = l.model->new_sequence(kv);
  ASSERT_TRUE(fresh.is_ok());
  std::vector<float> want;
  ASSERT_TRUE(l.model->forward(kept, *fresh, {}, want, pool).is_ok());
  EXPECT_EQ(shifted->n_past(), fresh->n_past());

  // Layer 0: V bit for bit, K within the bound.
  const HParams& hp = l.model->hparams();
  const int64_t width = hp.n_head_kv * hp.head_dim_k, hd = hp.head_dim_k, half = hp.n_rot / 2;
  constexpr double u = 1.0 / (1 << 24);
  for (int64_t p = 0; p < fresh->n_past(); ++p) {
    const auto* got = reinterpret_cast<const float*>(shifted->k_row(0, p));
    const auto* ref = reinterpret_cast<const float*>(fresh->k_row(0, p));
    for (int64_t e = 0; e < width; ++e) {
      const int64_t i = e % hd;
      double r = std::fabs(ref[e]);
      if (i < hp.n_rot) r = std::hypot(double{ref[e]}, double{ref[i < half ? e + half : e - half]});
      ASSERT_LE(std::fabs(double{got[e]} - ref[e]), 11 * u * r * (1 + 1e-6)) << "position " << p << " element " << e;
    }
    EXPECT_EQ(0, std::memcmp(shifted->v_row(0, p), fresh->v_row(0, p), static_cast<size_t>(width) * 4)) << p;
  }
  // Generation goes on from the shifted state, positions continuing after the kept tokens.
  const int32_t next = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
  std::vector<float> got;
  ASSERT_TRUE(l.model->forward({&next, 1}, *shifted, {}, got, pool).is_ok());
  EXPECT_EQ(shifted->n_past(), static_cast<int64_t>(kept.size()) + 1);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); }));
}

TEST(ContextShiftModel, HybridModelsCannotShift) {
  auto l = testing::load_ref_model("qwen35moe-tiny-f32");
  ASSERT_TRUE(l.model);
  auto seq = l.model->new_sequence({.n_ctx = 64});
  ASSERT_TRUE(seq.is_ok());
  EXPECT_FALSE(seq->can_shift());
}

}  // namespace
}  // namespace moetier
