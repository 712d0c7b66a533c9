// Whole models on the GPU (lavapipe in CI) against llama.cpp's reference logits and against
// moetier's own CPU path, for the placements users run:
//   all on GPU;  -ngl all -cmoe (dense on GPU, every routed expert on the CPU: the users');
//   -ngl all -ncmoe 2 (the experts of layers 0-1 on the CPU);  the output layer alone (-ngl 1).
//
// Tolerances, from ../shared/ref/README.md section 6 (as tests/e2e/reference_logits_test.cpp):
// 1e-4 on F32 models. On quantized models the GPU kernels round activations like the CPU's and
// sum integer blocks exactly, so a GPU layer differs from the CPU layer only by float
// summation order (norms, softmax, exp): ~1e-6, checked per layer below (GpuLayer). Through a
// whole model such a difference occasionally moves an 8-bit code across a rounding boundary
// and the jump propagates: the behaviour of a second correct implementation, which the README
// measures as the model's decode noise floor, 1.5 × max over the model's cases of (refaq's
// step diffs, llama.cpp's ub1 diff) — the bound used for every comparison here (prompt and
// decode steps; which case and step a flip lands in is chance). Greedy decoding is
// teacher-forced with llama.cpp's tokens; argmax must agree at every step whose llama.cpp
// top-1/top-2 margin exceeds twice the bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/gpu.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

#if MOETIER_HAVE_VULKAN
#include "core/thread_pool.h"
#include "model/model.h"

namespace moetier {
namespace {

const std::string kRef = testing::kRefDir;

struct Placement {
  std::string name;
  bool all_experts_on_cpu = false;
  int n_cpu_moe = 0;
  bool output_only = false;
  int cache_slots = 0;  // the VRAM expert cache of the layers whose experts are on the CPU
};

struct ModelCase {
  std::string model;
  double tolerance = 1e-4;
  std::vector<int32_t> prompt, greedy;
  std::vector<float> logits, steps;
  std::vector<double> margins;
  int64_t n_vocab = 0;
};

ModelCase load_case(const std::string& model, const std::string& prompt_id) {
  ModelCase k;
  k.model = model;
  const auto manifest = testing::read_json_file(kRef + "/manifest.json");
  for (const auto& c : manifest["cases"]) {
    if (c["case_id"] != model + "/" + prompt_id) continue;
    k.prompt = c["prompt_tokens"].get<std::vector<int32_t>>();
    k.greedy = c["greedy_tokens"].get<std::vector<int32_t>>();
    k.n_vocab = c["n_vocab"];
    k.logits = testing::read_f32_file(kRef + "/" + c["logits"].get<std::string>());
    k.steps = testing::read_f32_file(kRef + "/" + c["steps_logits"].get<std::string>());
    const auto cont = testing::read_json_file(kRef + "/" + c["continuation"].get<std::string>());
    for (const auto& s : cont["steps"]) k.margins.push_back(s["top1_top2_logit_margin"]);
  }
  EXPECT_FALSE(k.prompt.empty()) << model << "/" << prompt_id;
  // The model's decode noise floor (see the header).
  for (const auto& c : manifest["cases"]) {
    if (c["case_id"].get<std::string>().rfind(model + "/", 0) != 0 || c["reference_act_quant"].is_null()) continue;
    const double steps = c["reference_act_quant"]["steps_max_abs"];
    const double refaq = c["reference_act_quant"]["last_token"]["max_abs"];
    const double ub1 = c["llamacpp_self"]["ub1_vs_default"]["max_abs"];
    k.tolerance = std::max(k.tolerance, 1.5 * std::max({steps, refaq, ub1}));
  }
  return k;
}

GpuPlacement placement_for(const Placement& p, int64_t n_layer) {
  GpuPlacement g{.create_backend = create_gpu_backend, .progress = false};
  for (int64_t il = 0; il < n_layer; ++il) {
    g.layer_on_gpu.push_back(!p.output_only);
    g.experts_on_gpu.push_back(!p.output_only && !p.all_experts_on_cpu && il >= p.n_cpu_moe);
  }
  g.output_on_gpu = true;
  if (p.cache_slots > 0) g.expert_cache_slots.assign(static_cast<size_t>(n_layer), p.cache_slots);
  return g;
}

double max_abs_diff(const float* a, const float* b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(double{a[i]} - b[i]));
  return m;
}

int64_t argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

class GpuModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModel, PlacementsMatchLlamaCppAndTheCpu) {
  GPU_OR_SKIP(probe);
  probe.reset();  // the model opens its own device
  const std::string name = GetParam();
  const ModelCase k = load_case(name, "p3_mixed");
  ThreadPool pool(2);
  const KvCacheOptions kv{.n_ctx = 128, .type_k = DType::F32, .type_v = DType::F32};  // as llama.cpp's reference
  constexpr int kSteps = 6;  // teacher-forced decode steps checked per placement

  // The CPU path, for the GPU-vs-CPU comparison.
  auto cpu_model = testing::load_ref_model(name);
  ASSERT_TRUE(cpu_model.model);
  auto cpu_seq = cpu_model.model->new_sequence(kv);
  ASSERT_TRUE(cpu_seq.is_ok());
  std::vector<std::vector<float>> cpu_rows;
  std::vector<float> logits;
  ASSERT_TRUE(cpu_model.model->forward(k.prompt, *cpu_seq, {}, logits, pool).is_ok());
  cpu_rows.push_back(logits);
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_TRUE(cpu_model.model->forward({&k.greedy[static_cast<size_t>(s)], 1}, *cpu_seq, {}, logits, pool).is_ok());
    cpu_rows.push_back(logits);
  }

  for (const Placement& p : {Placement{.name = "all on GPU"}, Placement{.name = "-ngl all -cmoe", .all_experts_on_cpu = true},
                             Placement{.name = "-ngl all -ncmoe 2", .n_cpu_moe = 2},
                             // The VRAM expert cache: decode steps compute the pairs whose expert was
                             // copied (after the prompt and each step) on the GPU, the rest on the CPU.
                             Placement{.name = "-ngl all -cmoe --gpu-expert-cache", .all_experts_on_cpu = true,
                                       .cache_slots = 6},
                             Placement{.name = "-ngl 1 (output layer only)", .output_only = true}}) {
    SCOPED_TRACE(name + ", " + p.name);
    auto m = testing::load_ref_model(name);
    ASSERT_TRUE(m.model);
    const Status placed = m.model->place_on_gpu(placement_for(p, m.model->hparams().n_layer));
    ASSERT_TRUE(placed.is_ok()) << placed.message();
    ASSERT_TRUE(m.model->gpu_memory().has_value());
    EXPECT_GT(m.model->gpu_memory()->weight_bytes, 0u);
    auto seq = m.model->new_sequence(kv);
    ASSERT_TRUE(seq.is_ok()) << seq.status().message();
    std::vector<float> out;
    const Status st = m.model->forward(k.prompt, *seq, {}, out, pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(static_cast<int64_t>(out.size()), k.n_vocab);
    EXPECT_LE(max_abs_diff(out.data(), k.logits.data(), k.n_vocab), k.tolerance) << "prompt logits vs llama.cpp";
    EXPECT_LE(max_abs_diff(out.data(), cpu_rows[0].data(), k.n_vocab), k.tolerance) << "prompt logits vs CPU";
    for (int s = 0; s < kSteps; ++s) {
      ASSERT_TRUE(m.model->forward({&k.greedy[static_cast<size_t>(s)], 1}, *seq, {}, out, pool).is_ok());
      const float* ref = k.steps.data() + static_cast<int64_t>(s + 1) * k.n_vocab;
      EXPECT_LE(max_abs_diff(out.data(), cpu_rows[static_cast<size_t>(s + 1)].data(), k.n_vocab), k.tolerance)
          << "decode step " << s + 1 << " vs CPU";
      if (k.margins[static_cast<size_t>(s + 1)] > 2 * k.tolerance) {
        EXPECT_EQ(argmax(out.data(), k.n_vocab), argmax(ref, k.n_vocab)) << "greedy token at step " << s + 1;
      }
    }
    if (p.cache_slots > 0) {
      const GpuExpertCacheStats c = m.model->gpu_expert_cache_stats();
      EXPECT_GT(c.uploads, 0) << "experts were copied to the cache";
      EXPECT_GT(c.gpu_pairs, 0) << "some pairs were computed from the copies";
      EXPECT_LT(c.gpu_pairs, c.pairs) << "and some on the CPU";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ref, GpuModel,
                         ::testing::Values("qwen35moe-tiny-f32", "qwen3moe-tiny-f32", "qwen35moe-tiny-mixed",
                                           "qwen35moe-small-q4_k_m", "qwen35moe-small-ud_mix", "qwen35moe-small-iq4_xs",
                                           "qwen3moe-small-q4_k_m"),
                         [](const auto& info) { return testing::param_name(info.param); });

// One layer at a time on the same input (the CPU's residual stream before the layer, from a
// random start): the GPU layer against the CPU layer. Most rows agree to float rounding; a row may differ by
// more where an 8-bit activation code flips (README section 6: teacher-forced layers match
// to ≤ 1e-4 on almost every row, isolated rows up to 3e-2). Bound: rows within 1e-4 at least
// 80%, every row within 0.1 × the layer's RMS.
class GpuLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuLayer, EachLayerOnTheGpuMatchesTheCpuLayer) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string name = GetParam();
  const ModelCase k = load_case(name, "p3_mixed");
  ThreadPool pool(2);
  auto cpu = testing::load_ref_model(name);
  ASSERT_TRUE(cpu.model);
  const HParams& hp = cpu.model->hparams();
  const int64_t n = static_cast<int64_t>(k.prompt.size()), d = hp.n_embd;
  for (const bool experts_on_gpu : {true, false}) {
    SCOPED_TRACE(experts_on_gpu ? "experts on the GPU" : "experts on the CPU");
    auto gpu = testing::load_ref_model(name);
    ASSERT_TRUE(gpu.model);
    GpuPlacement placement{.create_backend = create_gpu_backend, .progress = false};
    placement.layer_on_gpu.assign(static_cast<size_t>(hp.n_layer), true);
    placement.experts_on_gpu.assign(static_cast<size_t>(hp.n_layer), experts_on_gpu);
    ASSERT_TRUE(gpu.model->place_on_gpu(placement).is_ok());
    // Layer inputs: the CPU's own residual stream, layer by layer, from a random start.
    std::vector<float> x(static_cast<size_t>(n * d));
    auto cseq = cpu.model->new_sequence({.n_ctx = 128});
    auto gseq = gpu.model->new_sequence({.n_ctx = 128});
    ASSERT_TRUE(cseq.is_ok() && gseq.is_ok());
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : x) v = nd(rng);
    for (int il = 0; il < hp.n_layer; ++il) {
      std::vector<float> xc = x, xg = x;
      cpu.model->forward_layer(il, xc.data(), n, *cseq, nullptr, pool);
      const Status st = gpu.model->forward_layer_placed(il, xg.data(), n, *gseq, pool);
      ASSERT_TRUE(st.is_ok()) << st.message();
      double sq = 0;
      for (float v : xc) sq += double{v} * v;
      const double rms = std::sqrt(sq / static_cast<double>(xc.size()));
      int within = 0;
      double worst = 0;
      for (int64_t r = 0; r < n; ++r) {
        const double diff = max_abs_diff(&xc[r * d], &xg[r * d], d);
        worst = std::max(worst, diff);
        within += diff <= 1e-4 ? 1 : 0;
      }
      if (std::getenv("MOETIER_VERBOSE_GPU_TEST")) std::printf("%s layer %d: %d/%lld rows within 1e-4, worst %.3g (rms %.3g)\n", name.c_str(), il, within, static_cast<long long>(n), worst, rms);
      EXPECT_GE(within, n * 8 / 10) << name << " layer " << il << ": worst " << worst;
      EXPECT_LE(worst, 0.1 * rms) << name << " layer " << il;
      x = xc;  // the next layer gets the CPU's output
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ref, GpuLayer,
                         ::testing::Values("qwen35moe-tiny-mixed", "qwen35moe-small-ud_mix", "qwen35moe-small-iq4_xs",
                                           "qwen3moe-small-q4_k_m"),
                         [](const auto& info) { return testing::param_name(info.param); });

// Prompt-time expert streaming (op offload): a GPU layer whose experts live on the CPU
// uploads them for a batch and runs them there — the same kernels on the same data as the
// all-on-GPU placement, so the logits are bit for bit the all-GPU ones.
TEST(GpuStreaming, StreamedExpertsGiveTheAllGpuLogits) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string name = "qwen35moe-small-ud_mix";
  ThreadPool pool(2);
  const auto prompt = testing::ref_prompt_tokens(name, "p3_mixed");
  std::vector<std::vector<float>> results;
  std::vector<uint64_t> scratch;
  for (const bool streamed : {false, true}) {
    auto m = testing::load_ref_model(name);
    ASSERT_TRUE(m.model);
    const int64_t n_layer = m.model->hparams().n_layer;
    GpuPlacement placement{.create_backend = create_gpu_backend, .progress = false, .op_offload = streamed, .op_offload_min_tokens = 8,
                           .op_offload_always = streamed};
    placement.layer_on_gpu.assign(static_cast<size_t>(n_layer), true);
    placement.experts_on_gpu.assign(static_cast<size_t>(n_layer), !streamed);  // streamed: experts live on the CPU
    placement.output_on_gpu = true;
    ASSERT_TRUE(m.model->place_on_gpu(placement).is_ok());
    auto seq = m.model->new_sequence({.n_ctx = 128});
    ASSERT_TRUE(seq.is_ok());
    std::vector<float> logits;
    ASSERT_TRUE(m.model->forward(prompt, *seq, {}, logits, pool).is_ok());
    results.push_back(logits);
    scratch.push_back(m.model->gpu_memory()->scratch_bytes);
  }
  EXPECT_GT(scratch[1], scratch[0]) << "the streaming area was allocated: the experts were streamed";
  ASSERT_EQ(results[0].size(), results[1].size());
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4), 0);
}

// Continuous batching on the GPU: every GPU kernel computes each token row (or expert pair)
// independently of the others in its batch, so — as on the CPU — two sequences decoded in
// one batch get bit for bit what each gets alone, experts on the GPU or on the CPU.
TEST(GpuBatch, BatchedSequencesEqualEachAloneBitForBit) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string name = "qwen35moe-small-ud_mix";
  ThreadPool pool(2);
  const auto a = testing::ref_prompt_tokens(name, "p3_mixed"), b = testing::ref_prompt_tokens(name, "p2_short");
  for (const bool experts_on_gpu : {true, false}) {
    SCOPED_TRACE(experts_on_gpu ? "experts on the GPU" : "experts on the CPU");
    auto m = testing::load_ref_model(name);
    ASSERT_TRUE(m.model);
    GpuPlacement placement{.create_backend = create_gpu_backend, .progress = false};
    placement.layer_on_gpu.assign(static_cast<size_t>(m.model->hparams().n_layer), true);
    placement.experts_on_gpu.assign(static_cast<size_t>(m.model->hparams().n_layer), experts_on_gpu);
    placement.output_on_gpu = true;
    ASSERT_TRUE(m.model->place_on_gpu(placement).is_ok());
    const KvCacheOptions kv{.n_ctx = 256};
    const int64_t nv = m.model->hparams().n_vocab;
    // Alone: prefill, then 3 decode steps each.
    auto alone = [&](const std::vector<int32_t>& p) {
      auto seq = m.model->new_sequence(kv);
      std::vector<std::vector<float>> rows;
      std::vector<float> logits;
      EXPECT_TRUE(m.model->forward(p, *seq, {}, logits, pool).is_ok());
      rows.push_back(logits);
      for (int s = 0; s < 3; ++s) {
        EXPECT_TRUE(m.model->forward({&p[static_cast<size_t>(s)], 1}, *seq, {}, logits, pool).is_ok());
        rows.push_back(logits);
      }
      return rows;
    };
    const auto ra = alone(a), rb = alone(b);
    auto sa = m.model->new_sequence(kv), sb = m.model->new_sequence(kv);
    ASSERT_TRUE(sa.is_ok() && sb.is_ok());
    std::vector<float> logits;
    std::vector<BatchEntry> prefill = {{.seq = &*sa, .tokens = a}, {.seq = &*sb, .tokens = b}};
    ASSERT_TRUE(m.model->forward_batch(prefill, logits, pool).is_ok());
    EXPECT_EQ(std::memcmp(logits.data(), ra[0].data(), nv * 4), 0) << "prefill a";
    EXPECT_EQ(std::memcmp(logits.data() + nv, rb[0].data(), nv * 4), 0) << "prefill b";
    for (int s = 0; s < 3; ++s) {
      std::vector<BatchEntry> step = {{.seq = &*sa, .tokens = {&a[static_cast<size_t>(s)], 1}},
                                      {.seq = &*sb, .tokens = {&b[static_cast<size_t>(s)], 1}}};
      ASSERT_TRUE(m.model->forward_batch(step, logits, pool).is_ok());
      EXPECT_EQ(std::memcmp(logits.data(), ra[static_cast<size_t>(s + 1)].data(), nv * 4), 0) << "step " << s << " a";
      EXPECT_EQ(std::memcmp(logits.data() + nv, rb[static_cast<size_t>(s + 1)].data(), nv * 4), 0) << "step " << s << " b";
    }
  }
}

// A slot's state read back from the GPU and written into a GPU or a CPU sequence (slot
// save/restore with the user's placement), and a context shift of GPU-held keys:
//   * restored into the GPU, decoding continues bit for bit as if nothing happened;
//   * restored into a CPU sequence (the bytes do not depend on the placement), the next
//     logits are the GPU's to the model's GPU-vs-CPU bound (k.tolerance, see the header);
//   * a shift on the GPU gives the logits a shift on the CPU gives, to the same bound (the keys
//     are re-rotated on the host the same way; only the layers' arithmetic differs).
// qwen35moe keeps DeltaNet state on the GPU too (read_recurrent / write_recurrent).
TEST(GpuSequenceState, SnapshotRestoreAndShiftFollowTheCpu) {
  GPU_OR_SKIP(probe);
  probe.reset();
  ThreadPool pool(2);
  for (const std::string name : {"qwen3moe-tiny-f32", "qwen35moe-tiny-f32"}) {
    SCOPED_TRACE(name);
    const ModelCase k = load_case(name, "p3_mixed");
    const KvCacheOptions kv{.n_ctx = 128, .type_k = DType::F32, .type_v = DType::F32};
    auto g = testing::load_ref_model(name);
    auto c = testing::load_ref_model(name);
    ASSERT_TRUE(g.model && c.model);
    ASSERT_TRUE(g.model->place_on_gpu(placement_for(Placement{.name = "all"}, g.model->hparams().n_layer)).is_ok());
    auto gs = g.model->new_sequence(kv);
    ASSERT_TRUE(gs.is_ok()) << gs.status().message();
    std::vector<float> logits, want, got;
    ASSERT_TRUE(g.model->forward(k.prompt, *gs, {}, logits, pool).is_ok());
    auto bytes = gs->snapshot();
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    // Continue the original; then the restored copies.
    const int32_t next = k.greedy[0];
    ASSERT_TRUE(g.model->forward({&next, 1}, *gs, {}, want, pool).is_ok());
    auto gr = g.model->new_sequence(kv);
    ASSERT_TRUE(gr.is_ok());
    ASSERT_TRUE(gr->restore(*bytes).is_ok());
    ASSERT_TRUE(g.model->forward({&next, 1}, *gr, {}, got, pool).is_ok());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << "GPU → GPU restore";
    auto cr = c.model->new_sequence(kv);
    ASSERT_TRUE(cr.is_ok());
    const Status restored = cr->restore(*bytes);
    ASSERT_TRUE(restored.is_ok()) << restored.message();
    ASSERT_TRUE(c.model->forward({&next, 1}, *cr, {}, got, pool).is_ok());
    EXPECT_LE(max_abs_diff(got.data(), want.data(), k.n_vocab), k.tolerance) << "GPU → CPU restore";

    if (!gs->can_shift()) continue;  // qwen35moe: recurrent state
    auto cs = c.model->new_sequence(kv);
    ASSERT_TRUE(cs.is_ok());
    ASSERT_TRUE(c.model->forward(k.prompt, *cs, {}, logits, pool).is_ok());
    ASSERT_TRUE(c.model->forward({&next, 1}, *cs, {}, logits, pool).is_ok());
    ASSERT_TRUE(gs->shift(3, 9).is_ok());
    ASSERT_TRUE(cs->shift(3, 9).is_ok());
    const int32_t after = k.greedy[1];
    ASSERT_TRUE(g.model->forward({&after, 1}, *gs, {}, got, pool).is_ok());
    ASSERT_TRUE(c.model->forward({&after, 1}, *cs, {}, want, pool).is_ok());
    EXPECT_LE(max_abs_diff(got.data(), want.data(), k.n_vocab), k.tolerance) << "shift on the GPU vs the CPU";
  }
}

}  // namespace
}  // namespace moetier
#endif
