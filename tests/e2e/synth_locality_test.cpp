// `moetier synth --routing locality` through the engine: on random token ids (what bench
// feeds), consecutive tokens of a locality file pick overlapping experts in every layer,
// those of the uniform file of the same shape about as often as chance; both stay finite.
// The routers' choices are recomputed from the residual stream the engine hands back
// after each layer's mixer (Model::forward_layer), as the MoE block computes them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/ref_model.h"

#include "core/thread_pool.h"
#include "cpu/ops.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "synth/synth_model.h"
#include "tensor/type_ops.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

struct Overlap {
  double within1 = 0;  // mean over layers and tokens: share of a token's experts the previous token also used
  bool finite = true;
};

// Runs `n` random token ids (fixed LCG) through every layer of `path` as one sequence.
Overlap consecutive_overlap(const std::string& path, int64_t n) {
  Overlap result;
  auto l = moetier::testing::load_model_file(path);
  if (!l.model) return result;
  const HParams& hp = l.model->hparams();
  const int64_t d = hp.n_embd;
  const gguf::ModelFile& file = *l.file;

  std::vector<int32_t> tokens(static_cast<size_t>(n));
  uint64_t lcg = 12345;
  for (auto& t : tokens) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((lcg >> 33) % static_cast<uint64_t>(hp.n_vocab - 5));
  }
  const auto* embd = file.header().find_tensor("token_embd.weight");
  EXPECT_NE(embd, nullptr);
  if (embd == nullptr) return result;
  std::vector<float> x(static_cast<size_t>(n * d)), after_mixer(x.size()), u(static_cast<size_t>(d));
  const int64_t embd_row = dtype_row_bytes(embd->type, d);
  for (int64_t t = 0; t < n; ++t) {
    type_ops(embd->type)->dequantize_row(file.tensor_data(*embd) + tokens[t] * embd_row, &x[t * d], d);
  }

  ThreadPool pool(2);
  auto seq = l.model->new_sequence({.n_ctx = 512, .type_k = DType::F32, .type_v = DType::F32});
  EXPECT_TRUE(seq.is_ok());
  if (!seq.is_ok()) return result;
  const int64_t k = hp.n_expert_used, warmup = 16;
  double shared = 0, count = 0;
  for (int il = 0; il < hp.n_layer; ++il) {
    l.model->forward_layer(il, x.data(), n, *seq, after_mixer.data(), pool);
    const auto* norm = file.header().find_tensor(fmt::format("blk.{}.post_attention_norm.weight", il));
    const auto* router = file.header().find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", il));
    EXPECT_TRUE(norm != nullptr && router != nullptr && norm->type == DType::F32 && router->type == DType::F32);
    if (norm == nullptr || router == nullptr) return result;
    const auto* w_norm = reinterpret_cast<const float*>(file.tensor_data(*norm));
    const auto* w_router = reinterpret_cast<const float*>(file.tensor_data(*router));
    std::vector<int32_t> previous, current;
    std::vector<float> logits(static_cast<size_t>(hp.n_expert));
    std::vector<int32_t> order(static_cast<size_t>(hp.n_expert));
    for (int64_t t = 0; t < n; ++t) {
      cpu::rms_norm(&after_mixer[t * d], w_norm, d, hp.rms_eps, u.data());
      for (int64_t e = 0; e < hp.n_expert; ++e) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double{w_router[e * d + i]} * u[i];
        logits[e] = static_cast<float>(dot);
      }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      current.assign(order.begin(), order.begin() + k);
      if (t >= warmup) {
        for (int32_t e : current) shared += std::find(previous.begin(), previous.end(), e) != previous.end();
        count += static_cast<double>(k);
      }
      previous = current;
    }
  }
  for (float v : x) result.finite = result.finite && std::isfinite(v);
  result.within1 = count > 0 ? shared / count : 0;
  return result;
}

TEST(SynthLocality, ConsecutiveRandomTokensShareExperts) {
  const fs::path dir = fs::temp_directory_path() / ("moetier_synth_locality_" + std::to_string(getpid()));
  fs::create_directories(dir);
  Overlap got[2];
  for (int locality = 0; locality < 2; ++locality) {
    const std::string path = (dir / (locality ? "locality.gguf" : "uniform.gguf")).string();
    // small: 16 experts, 4 used per token (chance overlap 4/16), layers 0-2 DeltaNet, 3 attention.
    auto made = synth::synthesize({.preset = "small",
                                   .n_layer = 4,
                                   .routing = locality ? synth::SynthOptions::Routing::kLocality
                                                       : synth::SynthOptions::Routing::kUniform,
                                   .out_path = path,
                                   .progress = false});
    ASSERT_TRUE(made.is_ok()) << made.status().message();
    got[locality] = consecutive_overlap(path, 160);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  EXPECT_TRUE(got[0].finite);
  EXPECT_TRUE(got[1].finite);
  if (std::getenv("MOETIER_TEST_VERBOSE")) {
    std::fprintf(stderr, "consecutive overlap: uniform %.3f, locality %.3f\n", got[0].within1, got[1].within1);
  }
  // Measured: uniform about 0.25, locality about 0.8.
  EXPECT_LT(got[0].within1, 0.4) << "uniform";
  EXPECT_GT(got[1].within1, got[0].within1 + 0.3) << "locality " << got[1].within1 << " vs uniform " << got[0].within1;
}

}  // namespace
}  // namespace moetier
