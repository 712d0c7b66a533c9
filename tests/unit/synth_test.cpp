// `moetier synth`: presets and depth cuts, the per-tensor quant rules against the reference
// files llama-quantize made, deterministic weights, the synthetic vocabulary, the written
// file (parsed back and checked against the architecture's tensor table) and CLI errors.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/file_sha256.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "synth/locality.h"
#include "synth/presets.h"
#include "synth/quant_mix.h"
#include "synth/synth_model.h"
#include "synth/vocab.h"
#include "synth/weights.h"

namespace moetier::synth {
namespace {

namespace fs = std::filesystem;

std::string ref_path(const std::string& rel) { return std::string(MOETIER_REF_DIR) + "/" + rel; }

// A scratch folder for this test process, removed at the end of each test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("moetier_synth_test_" + std::to_string(getpid()) + "_" +
                                         std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string shape_key(const TensorSpec& t) {
  std::string key = t.name;
  for (int64_t d : t.ne) key += "," + std::to_string(d);
  return key;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

SynthPlan plan_or_die(const SynthOptions& options) {
  auto plan = plan_synth(options);
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  return plan.is_ok() ? *plan : SynthPlan{};
}

// ---------------------------------------------------------------------------------------
// Presets and depth

TEST(SynthPresets, RealShapes) {
  auto q36 = find_preset("qwen3.6-35b-a3b");
  ASSERT_TRUE(q36.is_ok());
  const HParams& hp = (*q36)->hparams;
  EXPECT_EQ(hp.arch, "qwen35moe");
  EXPECT_EQ(hp.n_layer, 40);
  EXPECT_EQ(hp.n_attention_layers(), 10);
  EXPECT_EQ(hp.n_deltanet_layers(), 30);
  EXPECT_EQ(hp.ssm_d_inner, 4096);
  EXPECT_EQ(hp.n_vocab, 248320);
  auto q3 = find_preset("qwen3-30b-a3b");
  ASSERT_TRUE(q3.is_ok());
  EXPECT_EQ((*q3)->hparams.n_layer, 48);
  EXPECT_EQ((*q3)->hparams.n_attention_layers(), 48);
  EXPECT_EQ((*q3)->hparams.n_rot, 128);

  auto bad = find_preset("llama-7b");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().exit_code(), 2);
  EXPECT_NE(bad.status().message().find("qwen3.6-35b-a3b"), std::string::npos);  // lists the known ones
}

TEST(SynthPresets, LayersCutKeepsThePattern) {
  const HParams full = (*find_preset("qwen3.6-35b-a3b"))->hparams;
  const ArchInfo* arch = find_arch("qwen35moe");
  ASSERT_NE(arch, nullptr);
  const std::vector<TensorSpec> full_specs = arch->tensor_specs(full);
  for (int64_t n : {1, 4, 6, 8}) {
    HParams cut = full;
    ASSERT_TRUE(set_depth(cut, n).is_ok());
    ASSERT_EQ(cut.layer_kinds.size(), static_cast<size_t>(n));
    for (int64_t il = 0; il < n; ++il) {
      EXPECT_EQ(cut.layer_kinds[il], full.layer_kinds[il]) << "layer " << il;
    }
    // The cut model holds exactly the full model's tensors of layers < n (plus the global
    // ones), and the MTP block after its last layer, as blk.<n>.
    ASSERT_EQ(full.n_layer_mtp, 1);  // the real files carry one
    std::set<std::string> expected, got;
    const std::string full_mtp = fmt::format("blk.{}.", full.n_layer), cut_mtp = fmt::format("blk.{}.", n);
    for (const auto& t : full_specs) {
      if (t.layer < n) expected.insert(shape_key(t));
      if (t.layer == full.n_layer) expected.insert(cut_mtp + shape_key(t).substr(full_mtp.size()));
    }
    for (const auto& t : arch->tensor_specs(cut)) got.insert(shape_key(t));
    EXPECT_EQ(got, expected) << n << " layers";
  }
  HParams h8 = full;
  ASSERT_TRUE(set_depth(h8, 8).is_ok());
  EXPECT_EQ(h8.n_attention_layers(), 2);  // layers 3 and 7
  EXPECT_EQ(h8.layer_kinds[3], LayerKind::kAttention);
  EXPECT_EQ(h8.layer_kinds[7], LayerKind::kAttention);
  HParams h0 = full;
  EXPECT_EQ(set_depth(h0, 0).exit_code(), 2);
  EXPECT_EQ(set_depth(h0, -3).exit_code(), 2);
}

// ---------------------------------------------------------------------------------------
// Quant mixes against the files llama-quantize wrote (../shared/ref/models)

struct RefMix {
  const char* preset;
  QuantMix mix;
  const char* ref_model;
};

constexpr RefMix kRefMixes[] = {
    {"small", QuantMix::kQ4_K_M, "qwen35moe-small-q4_k_m"},
    {"small", QuantMix::kUdQ4_K_XL, "qwen35moe-small-ud_mix"},
    {"small", QuantMix::kIQ4_XS, "qwen35moe-small-iq4_xs"},
    {"qwen3moe-small", QuantMix::kQ4_K_M, "qwen3moe-small-q4_k_m"},
    {"tiny", QuantMix::kF32, "qwen35moe-tiny-f32"},
    {"qwen3moe-tiny", QuantMix::kF32, "qwen3moe-tiny-f32"},
};

TEST(SynthQuantMix, TypesEqualTheReferenceFilesTensorByTensor) {
  for (const auto& ref : kRefMixes) {
    SCOPED_TRACE(ref.ref_model);
    const SynthPlan plan = plan_or_die(SynthOptions{.preset = ref.preset, .mix = ref.mix});
    auto file = gguf::read_header(ref_path(std::string("models/") + ref.ref_model + ".gguf"));
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    ASSERT_EQ(plan.tensors.size(), file->tensors.size());
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      const gguf::TensorInfo* info = file->find_tensor(plan.tensors[i].name);
      ASSERT_NE(info, nullptr) << plan.tensors[i].name;
      EXPECT_EQ(dtype_name(plan.types[i]), dtype_name(info->type)) << plan.tensors[i].name;
      for (size_t d = 0; d < plan.tensors[i].ne.size(); ++d) EXPECT_EQ(plan.tensors[i].ne[d], info->ne[d]);
    }
    // The declared file type too.
    EXPECT_EQ(quant_mix_file_type(ref.mix), static_cast<uint32_t>(file->get_int_or("general.file_type", -1)));
  }
}

TEST(SynthQuantMix, TypesEqualTheManifestTypesByTensor) {
  // manifest.json: models.<name>.types_by_tensor = {"<name without blk.N.>": [types...]}.
  std::ifstream in(ref_path("manifest.json"));
  ASSERT_TRUE(in.good());
  const nlohmann::json manifest = nlohmann::json::parse(in);
  for (const auto& ref : kRefMixes) {
    SCOPED_TRACE(ref.ref_model);
    const auto& expected_json = manifest.at("models").at(ref.ref_model).at("types_by_tensor");
    std::map<std::string, std::set<std::string>> expected, got;
    for (const auto& [suffix, types] : expected_json.items()) {
      for (const auto& t : types) expected[suffix].insert(t.get<std::string>());
    }
    const SynthPlan plan = plan_or_die(SynthOptions{.preset = ref.preset, .mix = ref.mix});
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      std::string suffix = plan.tensors[i].name;
      if (suffix.rfind("blk.", 0) == 0) suffix = suffix.substr(suffix.find('.', 4) + 1);
      got[suffix].insert(std::string(dtype_name(plan.types[i])));
    }
    EXPECT_EQ(got, expected);
  }
}

TEST(SynthQuantMix, Q4KMUseMoreBitsLayersOfTheSmallModel) {
  // README section 2: Q6_K for output, ffn_down_exps/_shexp of layers 0, 3, 6, 7, attn_qkv of
  // layers 0, 6 and attn_v of layers 3, 7; everything else quantized is Q4_K.
  const SynthPlan plan = plan_or_die(SynthOptions{.preset = "small", .mix = QuantMix::kQ4_K_M});
  std::set<std::string> q6k;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    if (plan.types[i] == DType::Q6_K) q6k.insert(plan.tensors[i].name);
  }
  const std::set<std::string> expected = {
      "output.weight",
      "blk.0.ffn_down_exps.weight", "blk.0.ffn_down_shexp.weight", "blk.3.ffn_down_exps.weight",
      "blk.3.ffn_down_shexp.weight", "blk.6.ffn_down_exps.weight", "blk.6.ffn_down_shexp.weight",
      "blk.7.ffn_down_exps.weight", "blk.7.ffn_down_shexp.weight",
      "blk.0.attn_qkv.weight", "blk.6.attn_qkv.weight", "blk.3.attn_v.weight", "blk.7.attn_v.weight"};
  EXPECT_EQ(q6k, expected);
}

TEST(SynthQuantMix, FallbackForRowsThatDoNotFitTheBlock) {
  EXPECT_EQ(fallback_for_row(DType::Q4_K, 512), DType::Q4_K);
  EXPECT_EQ(fallback_for_row(DType::Q4_K, 64), DType::Q4_0);
  EXPECT_EQ(fallback_for_row(DType::IQ4_XS, 96), DType::Q4_0);
  EXPECT_EQ(fallback_for_row(DType::Q5_K, 64), DType::Q8_0);
  EXPECT_EQ(fallback_for_row(DType::Q6_K, 64), DType::Q8_0);
  EXPECT_EQ(fallback_for_row(DType::Q4_K, 48), DType::F16);
  EXPECT_EQ(fallback_for_row(DType::Q8_0, 48), DType::F16);
  // The tiny model's expert down rows (64) cannot take K-quants; nothing may be left
  // with a row that is not a multiple of its block.
  for (QuantMix mix : {QuantMix::kQ4_K_M, QuantMix::kUdQ4_K_XL, QuantMix::kIQ4_XS, QuantMix::kQ8_0}) {
    const SynthPlan plan = plan_or_die(SynthOptions{.preset = "tiny", .mix = mix});
    for (size_t i = 0; i < plan.tensors.size(); ++i) {
      EXPECT_EQ(plan.tensors[i].ne[0] % dtype_traits(plan.types[i]).block_elems, 0)
          << plan.tensors[i].name << " " << dtype_name(plan.types[i]);
    }
  }
}

TEST(SynthQuantMix, NamesAndFileTypes) {
  EXPECT_EQ(*parse_quant_mix("Q4_K_M"), QuantMix::kQ4_K_M);
  EXPECT_EQ(*parse_quant_mix("ud-q4_k_xl"), QuantMix::kUdQ4_K_XL);
  EXPECT_EQ(parse_quant_mix("q3_k").status().exit_code(), 2);
  EXPECT_EQ(quant_mix_file_type(QuantMix::kF32), 0u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::kF16), 1u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::kQ8_0), 7u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::kQ4_K_M), 15u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::kUdQ4_K_XL), 15u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::kIQ4_XS), 30u);
}

TEST(SynthQuantMix, UdMixOfTheFullModel) {
  // 40 layers: routed down Q6_K in the first and last 40/16 = 2 layers, Q5_K elsewhere.
  const SynthPlan plan = plan_or_die(SynthOptions{.preset = "qwen3.6-35b-a3b", .mix = QuantMix::kUdQ4_K_XL});
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorSpec& t = plan.tensors[i];
    if (t.name.find("ffn_down_exps") != std::string::npos) {
      const bool edge = t.layer < 2 || t.layer >= 38;
      EXPECT_EQ(plan.types[i], edge ? DType::Q6_K : DType::Q5_K) << t.name;
    }
    if (t.name.find("ffn_gate_inp") != std::string::npos || t.name.find("ssm_alpha") != std::string::npos) {
      EXPECT_EQ(plan.types[i], DType::F32) << t.name;
    }
    if (t.name.find("attn_qkv") != std::string::npos || t.name.find("_shexp.weight") != std::string::npos) {
      if (t.name.find("ffn_gate_inp_shexp") == std::string::npos) {
        EXPECT_EQ(plan.types[i], DType::Q8_0) << t.name;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Weights

TEST(SynthWeights, RowsAreIndependentOfHowTheyAreChunked) {
  const TensorSpec spec{.name = "blk.0.ffn_up_exps.weight", .ne = {256, 64, 8}, .role = TensorRole::kExpertUp, .layer = 0};
  const HParams hp = (*find_preset("tiny"))->hparams;
  const TensorInit init = tensor_init(spec, hp, 7);
  std::vector<float> all(256 * 10), one(256);
  fill_rows(init, 0, 10, all.data());
  fill_rows(init, 5, 1, one.data());
  EXPECT_EQ(std::vector<float>(all.begin() + 5 * 256, all.begin() + 6 * 256), one);
  // Different seed or different name: different values.
  std::vector<float> other(256);
  fill_rows(tensor_init(spec, hp, 8), 5, 1, other.data());
  EXPECT_NE(one, other);
  TensorSpec renamed = spec;
  renamed.name = "blk.1.ffn_up_exps.weight";
  fill_rows(tensor_init(renamed, hp, 7), 5, 1, other.data());
  EXPECT_NE(one, other);
}

TEST(SynthWeights, GaussianScaleAndSpecialInits) {
  const HParams hp = (*find_preset("small"))->hparams;
  // Input projection: std 1/sqrt(fan_in). Over n = 2^20 values the sample mean has std
  // sigma/1024 and the sample std a relative std of ~1/sqrt(2n) = 0.07%; allow 5 of each.
  const TensorSpec up{.name = "blk.0.ffn_up_exps.weight", .ne = {256, 256, 16}, .role = TensorRole::kExpertUp, .layer = 0};
  const TensorInit init = tensor_init(up, hp, 0);
  const int64_t rows = 4096;
  std::vector<float> v(static_cast<size_t>(rows * 256));
  fill_rows(init, 0, rows, v.data());
  double sum = 0, sum2 = 0, max_abs = 0;
  for (float x : v) {
    sum += x;
    sum2 += double(x) * x;
    max_abs = std::max(max_abs, double(std::fabs(x)));
  }
  const double n = static_cast<double>(v.size());
  const double sigma = 1.0 / 16.0;
  EXPECT_LT(std::fabs(sum / n), 5 * sigma / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(sum2 / n), sigma, 5 * sigma / std::sqrt(2 * n));
  EXPECT_LE(max_abs, sigma * std::sqrt(12.0) + 1e-6);  // sum of four uniforms: |z| <= sqrt(12)

  // ssm_a = -A with A in [1, 16); ssm_dt.bias = softplus^-1(dt) with dt in [1e-3, 1e-1].
  const TensorSpec a{.name = "blk.0.ssm_a", .ne = {8}, .role = TensorRole::kDeltaNet, .layer = 0};
  const TensorSpec dt{.name = "blk.0.ssm_dt.bias", .ne = {8}, .role = TensorRole::kDeltaNet, .layer = 0};
  std::vector<float> av(8), dtv(8);
  fill_rows(tensor_init(a, hp, 0), 0, 1, av.data());
  fill_rows(tensor_init(dt, hp, 0), 0, 1, dtv.data());
  for (int h = 0; h < 8; ++h) {
    EXPECT_LE(av[h], -1.0f);
    EXPECT_GT(av[h], -16.0f);
    const double softplus = std::log1p(std::exp(double(dtv[h])));
    EXPECT_GE(softplus, 1e-3 * (1 - 1e-4));
    EXPECT_LE(softplus, 1e-1 * (1 + 1e-4));
  }
  // Norm weights near 1.
  const TensorSpec norm{.name = "blk.0.attn_norm.weight", .ne = {256}, .role = TensorRole::kNorm, .layer = 0};
  std::vector<float> nv(256);
  fill_rows(tensor_init(norm, hp, 0), 0, 1, nv.data());
  for (float x : nv) {
    EXPECT_GT(x, 0.8f);
    EXPECT_LT(x, 1.2f);
  }
}

// ---------------------------------------------------------------------------------------
// Vocabulary

TEST(SynthVocab, ByteLevelBpeOfExactSize) {
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_to_unicode('a'), "a");
  EXPECT_EQ(byte_to_unicode(0x00), "\xC4\x80");  // Ā
  EXPECT_EQ(make_synthetic_vocab(100).status().exit_code(), 2);

  for (int64_t n_vocab : {268, 331, 248320}) {
    SCOPED_TRACE(n_vocab);
    auto v = make_synthetic_vocab(n_vocab);
    ASSERT_TRUE(v.is_ok());
    ASSERT_EQ(static_cast<int64_t>(v->tokens.size()), n_vocab);
    ASSERT_EQ(v->token_types.size(), v->tokens.size());
    ASSERT_EQ(static_cast<int64_t>(v->merges.size()), n_vocab - 261);
    std::unordered_set<std::string> unique(v->tokens.begin(), v->tokens.end());
    EXPECT_EQ(unique.size(), v->tokens.size());
    // Merge of rank r joins two existing tokens into token 256 + r.
    for (size_t r = 0; r < v->merges.size(); ++r) {
      const std::string& m = v->merges[r];
      const size_t space = m.find(' ');
      ASSERT_NE(space, std::string::npos);
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      ASSERT_EQ(left + right, v->tokens[256 + r]) << m;
      ASSERT_TRUE(unique.count(left) && unique.count(right)) << m;
    }
    EXPECT_EQ(v->tokens[v->bos_id], "<|endoftext|>");
    EXPECT_EQ(v->tokens[v->eos_id], "<|im_end|>");
    EXPECT_EQ(v->tokens.back(), "</think>");
    EXPECT_EQ(v->token_types.back(), 3);
    EXPECT_EQ(v->token_types[256], 1);  // the first merge
  }
}

TEST(SynthVocab, CopiedFromAVocabGguf) {
  const std::string vocab = ref_path("tokenizer/qwen3-vocab.gguf");
  const SynthPlan plan = plan_or_die(SynthOptions{.preset = "qwen3moe-tiny", .vocab_path = vocab});
  EXPECT_EQ(plan.hparams.n_vocab, 151936);
  ASSERT_EQ(plan.notes.size(), 1u);  // the preset's 268 differs
  std::set<std::string> keys;
  for (const auto& [k, v] : plan.metadata) keys.insert(k);
  for (const char* k : {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.chat_template"}) {
    EXPECT_TRUE(keys.count(k)) << k;
  }
  for (const auto& t : plan.tensors) {
    if (t.name == "token_embd.weight" || t.name == "output.weight") {
      EXPECT_EQ(t.ne[1], 151936);
    }
  }
  // A GGUF without a token list is rejected as bad input.
  auto bad = plan_synth(SynthOptions{.preset = "tiny", .vocab_path = ref_path("models/nonexistent.gguf")});
  EXPECT_FALSE(bad.is_ok());
}

// ---------------------------------------------------------------------------------------
// Written files

TEST(SynthFile, TinyParsesBackAndMatchesTheArchitecture) {
  TempDir dir;
  const std::string out = dir.file("tiny-q4km.gguf");
  auto summary = synthesize(SynthOptions{.preset = "tiny", .mix = QuantMix::kQ4_K_M, .out_path = out, .progress = false});
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_EQ(summary->file_bytes, fs::file_size(out));

  auto file = gguf::read_header(out);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto hp = read_hparams(*file);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  const HParams& preset = (*find_preset("tiny"))->hparams;
  EXPECT_EQ(hp->n_layer, preset.n_layer);
  EXPECT_EQ(hp->n_embd, preset.n_embd);
  EXPECT_EQ(hp->n_vocab, preset.n_vocab);
  EXPECT_EQ(hp->n_expert, preset.n_expert);
  EXPECT_EQ(hp->ssm_d_inner, preset.ssm_d_inner);
  EXPECT_EQ(hp->rope_sections, preset.rope_sections);
  EXPECT_EQ(hp->layer_kinds, preset.layer_kinds);
  EXPECT_EQ(file->get_int_or("general.file_type", -1), 15);
  EXPECT_EQ(file->get_int_or("general.quantization_version", -1), 2);
  EXPECT_EQ(file->get_string_or("tokenizer.ggml.pre", ""), "qwen35");
  ASSERT_NE(file->find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(static_cast<int64_t>(file->find("tokenizer.ggml.tokens")->array_size()), preset.n_vocab);

  const std::vector<TensorSpec> specs = find_arch("qwen35moe")->tensor_specs(*hp);
  ASSERT_EQ(specs.size(), file->tensors.size());
  const SynthPlan plan = plan_or_die(SynthOptions{.preset = "tiny", .mix = QuantMix::kQ4_K_M});
  for (size_t i = 0; i < specs.size(); ++i) {
    const gguf::TensorInfo& info = file->tensors[i];
    EXPECT_EQ(info.name, specs[i].name);
    for (size_t d = 0; d < specs[i].ne.size(); ++d) EXPECT_EQ(info.ne[d], specs[i].ne[d]) << info.name;
    EXPECT_EQ(info.type, plan.types[i]) << info.name;
  }
}

TEST(SynthFile, SameSeedSameBytesWhateverTheThreads) {
  TempDir dir;
  const std::string a = dir.file("a.gguf"), b = dir.file("b.gguf"), c = dir.file("c.gguf");
  const SynthOptions base{.preset = "tiny", .mix = QuantMix::kQ8_0, .seed = 5, .progress = false};
  SynthOptions oa = base, ob = base, oc = base;
  oa.out_path = a;
  oa.n_threads = 1;
  ob.out_path = b;
  ob.n_threads = 3;
  oc.out_path = c;
  oc.seed = 6;
  ASSERT_TRUE(synthesize(oa).is_ok());
  ASSERT_TRUE(synthesize(ob).is_ok());
  ASSERT_TRUE(synthesize(oc).is_ok());
  const std::string ba = read_bytes(a), bb = read_bytes(b), bc = read_bytes(c);
  ASSERT_GT(ba.size(), 1000000u);
  EXPECT_TRUE(ba == bb) << "same seed, 1 vs 3 threads";
  EXPECT_EQ(ba.size(), bc.size());
  EXPECT_FALSE(ba == bc) << "different seeds";
}

// ---------------------------------------------------------------------------------------
// --routing locality (synth/locality.h)

// One tensor's rows [first, first + n) as synth writes them (locality applied when asked).
std::vector<float> rows_of_tensor(const HParams& hp, const std::string& name, int64_t first, int64_t n,
                                  bool locality, uint64_t seed = 1) {
  for (const TensorSpec& spec : find_arch(hp.arch)->tensor_specs(hp)) {
    if (spec.name != name) continue;
    TensorInit init = tensor_init(spec, hp, seed);
    if (locality) apply_locality(spec, hp, LocalityParams{}, seed, init);
    std::vector<float> out(static_cast<size_t>(n * init.row_elems));
    fill_rows(init, first, n, out.data());
    return out;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

TEST(SynthLocality, StructuredRows) {
  // small: n_embd 256 = 32 constant + 96 state + 64 token + 64 output coordinates; DeltaNet
  // d_state 64, 4 K heads (key_dim 256), 8 V heads (value_dim 512).
  const HParams hp = (*find_preset("small"))->hparams;
  ASSERT_TRUE(check_locality(hp, LocalityParams{}).is_ok());
  const int64_t d = hp.n_embd, n_const = 32, state_end = 128, token_end = 192, key_dim = 256, dv = 64;
  auto zero_in = [&](const std::vector<float>& row, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (row[static_cast<size_t>(i)] != 0.0f) return false;
    }
    return true;
  };

  // Token embeddings: the same constant part, no state or output part, different token parts.
  const auto embd = rows_of_tensor(hp, "token_embd.weight", 10, 2, true);
  const std::vector<float> e0(embd.begin(), embd.begin() + d), e1(embd.begin() + d, embd.end());
  for (int64_t i = 0; i < n_const; ++i) {
    EXPECT_EQ(e0[i], e1[i]);
    EXPECT_NEAR(std::fabs(e0[i]), 0.7f, 1e-6f);
  }
  EXPECT_TRUE(zero_in(e0, n_const, state_end));
  EXPECT_TRUE(zero_in(e0, token_end, d));
  EXPECT_NE(e0[150], e1[150]);

  // DeltaNet qkv: k rows equal the q rows and read only the constant part; value channel
  // c + d_v/2 of a head is the negation of channel c and reads only the token part.
  const auto qkv = rows_of_tensor(hp, "blk.1.attn_qkv.weight", 0, 2 * key_dim + 2 * dv, true);
  auto row = [&](const std::vector<float>& all, int64_t r) {
    return std::vector<float>(all.begin() + r * d, all.begin() + (r + 1) * d);
  };
  for (int64_t r : {int64_t{0}, int64_t{5}, key_dim - 1}) {
    EXPECT_EQ(row(qkv, r), row(qkv, r + key_dim)) << r;
    EXPECT_TRUE(zero_in(row(qkv, r), n_const, d)) << r;
    EXPECT_FALSE(zero_in(row(qkv, r), 0, n_const)) << r;
  }
  for (int64_t c : {int64_t{0}, int64_t{7}, dv / 2 - 1, dv + 3}) {
    const auto a = row(qkv, 2 * key_dim + c), b = row(qkv, 2 * key_dim + c + dv / 2);
    EXPECT_TRUE(zero_in(a, 0, state_end)) << c;
    EXPECT_FALSE(zero_in(a, state_end, token_end)) << c;
    EXPECT_TRUE(zero_in(a, token_end, d)) << c;
    for (int64_t i = 0; i < d; ++i) EXPECT_EQ(a[i], -b[i]) << c << " " << i;
  }

  // ssm_out writes only the state part, pairs negated.
  const auto out = rows_of_tensor(hp, "blk.0.ssm_out.weight", 0, d, true);
  const int64_t value_dim = hp.ssm_d_inner;
  for (int64_t r = 0; r < d; ++r) {
    const std::vector<float> w(out.begin() + r * value_dim, out.begin() + (r + 1) * value_dim);
    if (r < n_const || r >= state_end) {
      EXPECT_TRUE(zero_in(w, 0, value_dim)) << r;
      continue;
    }
    EXPECT_NE(w[0], 0.0f) << r;
    for (int64_t c = 0; c < dv / 2; ++c) EXPECT_EQ(w[dv + c], -w[dv + c + dv / 2]) << r;
  }

  // Expert outputs: the default rows in the output part, zero elsewhere; expert inputs untouched.
  const auto down_loc = rows_of_tensor(hp, "blk.2.ffn_down_exps.weight", d, d, true);  // expert 1
  const auto down_def = rows_of_tensor(hp, "blk.2.ffn_down_exps.weight", d, d, false);
  const int64_t n_ff = hp.n_ff_exp;
  for (int64_t r = 0; r < d; ++r) {
    const std::vector<float> a(down_loc.begin() + r * n_ff, down_loc.begin() + (r + 1) * n_ff);
    const std::vector<float> b(down_def.begin() + r * n_ff, down_def.begin() + (r + 1) * n_ff);
    if (r < token_end) {
      EXPECT_TRUE(zero_in(a, 0, n_ff)) << r;
    } else {
      EXPECT_EQ(a, b) << r;
    }
  }
  EXPECT_EQ(rows_of_tensor(hp, "blk.2.ffn_up_exps.weight", 0, 64, true),
            rows_of_tensor(hp, "blk.2.ffn_up_exps.weight", 0, 64, false));
  EXPECT_NE(rows_of_tensor(hp, "blk.2.ffn_gate_inp.weight", 0, 4, true),
            rows_of_tensor(hp, "blk.2.ffn_gate_inp.weight", 0, 4, false));
}

TEST(SynthLocality, RejectsWhatCannotCarryTheState) {
  EXPECT_EQ(check_locality((*find_preset("qwen3moe-tiny"))->hparams, {}).exit_code(), 2);
  HParams all_attention = (*find_preset("tiny"))->hparams;
  all_attention.full_attention_interval = 1;
  all_attention.layer_kinds = layer_pattern(all_attention, all_attention.n_layer);
  EXPECT_EQ(check_locality(all_attention, {}).exit_code(), 2);
  const HParams tiny = (*find_preset("tiny"))->hparams;
  EXPECT_EQ(check_locality(tiny, {.memory = 1}).exit_code(), 2);
  EXPECT_EQ(check_locality(tiny, {.token = -1}).exit_code(), 2);
  EXPECT_EQ(check_locality(tiny, {.state = std::nan("")}).exit_code(), 2);
  EXPECT_TRUE(check_locality(tiny, {.skew = 0}).is_ok());
}

TEST(SynthLocality, DefaultBytesUnchangedLocalityDeterministicAndRecorded) {
  TempDir dir;
  const std::string uniform = dir.file("u.gguf"), a = dir.file("a.gguf"), b = dir.file("b.gguf");
  // The default (uniform) file of this shape, pinned: locality must not change it.
  SynthOptions ou{.preset = "tiny", .mix = QuantMix::kQ4_K_M, .seed = 3, .out_path = uniform, .progress = false};
  ASSERT_TRUE(synthesize(ou).is_ok());
  auto sha = file_sha256(uniform, {.progress = false});
  ASSERT_TRUE(sha.is_ok());
  EXPECT_EQ(*sha, "87dc9cf2ebf0bbc0a18366a9b784725428f1ef41d44c1ca03f08968b02a453bc");

  SynthOptions oa = ou, ob = ou;
  oa.routing = ob.routing = SynthOptions::Routing::kLocality;
  oa.out_path = a;
  oa.n_threads = 1;
  ob.out_path = b;
  ob.n_threads = 3;
  ASSERT_TRUE(synthesize(oa).is_ok());
  ASSERT_TRUE(synthesize(ob).is_ok());
  const std::string bu = read_bytes(uniform), ba = read_bytes(a), bb = read_bytes(b);
  EXPECT_TRUE(ba == bb) << "same seed, 1 vs 3 threads";
  EXPECT_FALSE(ba == bu);
  EXPECT_GT(ba.size(), bu.size());  // the same tensors, plus the moetier.synth.* keys

  auto fa = gguf::read_header(a);
  ASSERT_TRUE(fa.is_ok());
  EXPECT_EQ(fa->get_string_or("moetier.synth.routing", ""), "locality");
  const LocalityParams defaults;
  EXPECT_NEAR(fa->get_float_or("moetier.synth.locality.state", -1), defaults.state, 1e-6);
  EXPECT_NEAR(fa->get_float_or("moetier.synth.locality.token", -1), defaults.token, 1e-6);
  EXPECT_NEAR(fa->get_float_or("moetier.synth.locality.skew", -1), defaults.skew, 1e-6);
  EXPECT_NEAR(fa->get_float_or("moetier.synth.locality.memory", -1), defaults.memory, 1e-6);
  auto fu = gguf::read_header(uniform);
  ASSERT_TRUE(fu.is_ok());
  EXPECT_EQ(fu->find("moetier.synth.routing"), nullptr);
  ASSERT_EQ(fa->tensors.size(), fu->tensors.size());
  for (size_t i = 0; i < fa->tensors.size(); ++i) EXPECT_EQ(fa->tensors[i].type, fu->tensors[i].type);
}

// ---------------------------------------------------------------------------------------
// Command line

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

CliRun run_cli(const std::string& args) {
  TempDir dir;
  const std::string log = dir.file("log.txt");
  const std::string cmd = std::string(MOETIER_BINARY) + " synth " + args + " > " + log + " 2>&1";
  const int status = std::system(cmd.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.output = read_bytes(log);
  return run;
}

TEST(SynthCli, ErrorsAreOneLineWithTheRightExitStatus) {
  TempDir dir;
  const std::string out = dir.file("x.gguf");
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const Case cases[] = {
      {"--preset nope -o " + out, 2, "unknown preset 'nope'"},
      {"--preset tiny --quant q3_k -o " + out, 2, "unknown quant mix 'q3_k'"},
      {"--preset tiny --layers 0 -o " + out, 2, "--layers must be at least 1"},
      {"--preset tiny --layers -2 -o " + out, 2, "--layers must be at least 1"},
      {"--preset tiny --layers x -o " + out, 2, "not an integer"},
      {"--preset tiny", 2, "missing -o"},
      {"-o " + out, 2, "missing --preset"},
      {"--preset tiny --bogus -o " + out, 2, "unknown flag '--bogus'"},
      {"--preset tiny --routing zipf -o " + out, 2, "--routing must be uniform or locality"},
      {"--preset tiny --locality-skew 0.3 -o " + out, 2, "--locality-skew needs --routing locality"},
      {"--preset qwen3moe-tiny --routing locality -o " + out, 2, "needs the DeltaNet layers"},
      {"--preset tiny --routing locality --locality-memory 1 -o " + out, 2, "--locality-memory must be in 2..2000"},
      {"--preset tiny -o /nonexistent-dir/sub/x.gguf", 1, "/nonexistent-dir/sub/x.gguf"},
  };
  for (const auto& c : cases) {
    const CliRun run = run_cli(c.args);
    EXPECT_EQ(run.exit_code, c.exit_code) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find("moetier: error: "), std::string::npos) << c.args;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(SynthCli, WritesAFileAndReportsIt) {
  TempDir dir;
  const std::string out = dir.file("t.gguf");
  const CliRun run = run_cli("--preset qwen3moe-tiny --layers 2 --quant f16 --seed 3 -q -o " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("wrote " + out), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("tensors"), std::string::npos) << run.output;
  auto file = gguf::read_header(out);
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  EXPECT_EQ(file->get_int_or("qwen3moe.block_count", -1), 2);
  EXPECT_EQ(file->get_int_or("general.file_type", -1), 1);
  const std::string help = run_cli("--help").output;
  for (const auto& p : presets()) EXPECT_NE(help.find(std::string(p.name)), std::string::npos) << p.name;
  EXPECT_NE(help.find("--routing"), std::string::npos);
  EXPECT_NE(help.find("not to predict a real model"), std::string::npos);

  const std::string loc = dir.file("loc.gguf");
  const CliRun with_locality = run_cli("--preset tiny --routing locality --locality-skew 0.25 -q -o " + loc);
  ASSERT_EQ(with_locality.exit_code, 0) << with_locality.output;
  EXPECT_NE(with_locality.output.find("routing locality: state 1.4, token 0.35, skew 0.25, memory 100 tokens"),
            std::string::npos)
      << with_locality.output;
}

}  // namespace
}  // namespace moetier::synth
