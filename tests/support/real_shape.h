// The real-shape test model (tests/data/real_shape): a 2-layer Qwen3.6-35B-A3B-shaped
// qwen35moe file (the real model's dimensions: n_embd 2048, 16/2 attention heads of 256,
// DeltaNet 16 K / 32 V heads × 128; 16 experts and a 4096-token vocabulary to keep it small;
// layer 0 Gated DeltaNet, layer 1 gated attention), Q4_K_M, rebuilt with `moetier synth`
// (deterministic: the manifest holds its SHA-256) and cached in the build directory, plus
// llama.cpp's logits for five prompts of 1 to 1113 tokens (manifest.json, README.md there).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/file_sha256.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "support/ref_data.h"
#include "support/ref_model.h"
#include "synth/synth_model.h"

namespace moetier::testing {

inline const std::string kRealShapeDir = std::string(MOETIER_SOURCE_DIR) + "/tests/data/real_shape";

struct RealShapeCase {
  std::string name;                  // "t300"
  std::vector<int32_t> tokens;       // llama.cpp's tokenization of the prompt
  std::vector<float> logits;         // llama.cpp's last-token logits (default -ub)
  double ub1_vs_default = 0;         // llama.cpp's own -ub 1 vs default max |Δlogit|
};

struct RealShapeData {
  std::string model_path;
  int64_t n_vocab = 0;
  std::vector<RealShapeCase> cases;
  // The bound every engine/placement/-ub is held to: 1.5 × llama.cpp's own largest -ub 1
  // vs default difference over the cases (the file's noise floor: an 8-bit activation code
  // that flips under float reordering, amplified by the layers after it; see
  // ../shared/ref/README.md section 6), with a floor of 1e-4.
  double tolerance = 1e-4;
  const RealShapeCase& get(const std::string& name) const {
    for (const auto& c : cases) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "no real-shape case " << name;
    return cases.front();
  }
};

// The model file (synthesized on first use into the build tree's test-models/, checked
// against the manifest's SHA-256) and the cases. Failures are test failures.
inline RealShapeData load_real_shape() {
  RealShapeData d;
  const auto manifest = read_json_file(kRealShapeDir + "/manifest.json");
  const std::string sha = manifest["model"]["sha256"];
  d.n_vocab = manifest["model"]["n_vocab"];
  const std::filesystem::path dir = std::filesystem::path(MOETIER_TEST_MODEL_DIR);
  std::filesystem::create_directories(dir);
  d.model_path = (dir / "real-shape-2l-q4_k_m.gguf").string();
  auto have = std::filesystem::exists(d.model_path) ? file_sha256(d.model_path, {.progress = false}) : Result<std::string>(std::string());
  if (!have || *have != sha) {
    // Written under a temporary name and renamed, so parallel tests never read half a file.
    const std::string tmp = d.model_path + ".tmp" + std::to_string(::getpid());
    auto s = synth::synthesize({.preset = "qwen3.6-35b-a3b", .n_layer = 2, .mix = synth::QuantMix::kQ4_K_M, .seed = 0,
                                .n_expert = 16, .n_vocab = 4096, .full_attention_interval = 2, .n_layer_mtp = 0,
                                .out_path = tmp,
                                .progress = false});
    EXPECT_TRUE(s.is_ok()) << s.status().message();
    std::filesystem::rename(tmp, d.model_path);
    have = file_sha256(d.model_path, {.progress = false});
    EXPECT_TRUE(have.is_ok() && *have == sha) << "the synthesized real-shape model differs from the manifest's ("
                                              << (have ? *have : have.status().message()) << ")";
  }
  double worst_ub1 = 0;
  for (const auto& c : manifest["cases"]) {
    RealShapeCase k;
    k.name = c["prompt"].get<std::string>().substr(0, c["prompt"].get<std::string>().find('.'));
    k.tokens = c["prompt_tokens"].get<std::vector<int32_t>>();
    k.logits = read_f32_file(kRealShapeDir + "/" + c["logits"].get<std::string>());
    k.ub1_vs_default = c["ub1_vs_default_max_abs"];
    worst_ub1 = std::max(worst_ub1, k.ub1_vs_default);
    EXPECT_EQ(static_cast<int64_t>(k.logits.size()), d.n_vocab) << k.name;
    d.cases.push_back(std::move(k));
  }
  d.tolerance = std::max(1e-4, 1.5 * worst_ub1);
  return d;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(double{a[i]} - b[i]));
  return m;
}

// Checks logits against llama.cpp's: max |Δ| within the bound, and the same argmax when
// llama.cpp's top-1/top-2 margin is wider than twice the bound.
inline void expect_real_shape_logits(const std::vector<float>& got, const RealShapeCase& c, double tolerance) {
  ASSERT_EQ(got.size(), c.logits.size());
  EXPECT_LE(max_abs_diff(got, c.logits), tolerance) << c.name << " (" << c.tokens.size() << " tokens)";
  std::vector<float> sorted = c.logits;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  if (sorted[0] - sorted[1] > 2 * tolerance) {
    EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(),
              std::max_element(c.logits.begin(), c.logits.end()) - c.logits.begin())
        << c.name;
  }
}

inline LoadedModel load_real_shape_model(const RealShapeData& d, int64_t n_ubatch = 512) {
  return load_model_file(d.model_path, n_ubatch);
}

}  // namespace moetier::testing
