// Architecture descriptors: hyper-parameters and the complete tensor table of every
// reference model, the registry, and clear errors for bad metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/arch.h"
#include "platform/process.h"
#include "support/ref_data.h"

namespace moetier {
namespace {

const char* const kRefModels[] = {
    "qwen35moe-tiny-f32",    "qwen35moe-tiny-mixed",  "qwen35moe-small-q4_k_m", "qwen35moe-small-ud_mix",
    "qwen35moe-small-iq4_xs", "qwen3moe-tiny-f32",    "qwen3moe-small-q4_k_m",
};

std::string model_path(const std::string& name) { return testing::ref_model_path(name); }

TEST(ArchRegistry, KnowsBothQwenMoeArchitectures) {
  const auto names = registered_arch_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "qwen35moe"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "qwen3moe"), names.end());
  EXPECT_EQ(find_arch("llama"), nullptr);
  ASSERT_NE(find_arch("qwen35moe"), nullptr);
  EXPECT_EQ(find_arch("qwen35moe")->name, "qwen35moe");
}

TEST(ArchNames, KindsAndRoles) {
  EXPECT_EQ(layer_kind_name(LayerKind::kAttention), "attention");
  EXPECT_EQ(layer_kind_name(LayerKind::kDeltaNet), "deltanet");
  EXPECT_EQ(tensor_role_name(TensorRole::kExpertDown), "expert_down");
  EXPECT_EQ(tensor_layer_index("blk.12.ffn_up_exps.weight"), 12);
  EXPECT_EQ(tensor_layer_index("blk.0.ssm_a"), 0);
  EXPECT_EQ(tensor_layer_index("token_embd.weight"), -1);
  EXPECT_EQ(tensor_layer_index("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(tensor_layer_index("blk.7"), -1);
}

TEST(ArchRoles, ByName) {
  const ArchInfo* q35 = find_arch("qwen35moe");
  ASSERT_NE(q35, nullptr);
  EXPECT_EQ(q35->tensor_role("token_embd.weight"), TensorRole::kTokenEmbedding);
  EXPECT_EQ(q35->tensor_role("output.weight"), TensorRole::kOutput);
  EXPECT_EQ(q35->tensor_role("output_norm.weight"), TensorRole::kNorm);
  EXPECT_EQ(q35->tensor_role("blk.3.attn_q.weight"), TensorRole::kAttention);
  EXPECT_EQ(q35->tensor_role("blk.3.attn_k_norm.weight"), TensorRole::kNorm);
  EXPECT_EQ(q35->tensor_role("blk.0.attn_qkv.weight"), TensorRole::kDeltaNet);
  EXPECT_EQ(q35->tensor_role("blk.0.attn_gate.weight"), TensorRole::kDeltaNet);
  EXPECT_EQ(q35->tensor_role("blk.0.ssm_a"), TensorRole::kDeltaNet);
  EXPECT_EQ(q35->tensor_role("blk.0.ssm_norm.weight"), TensorRole::kNorm);
  EXPECT_EQ(q35->tensor_role("blk.0.ffn_gate_inp.weight"), TensorRole::kRouter);
  EXPECT_EQ(q35->tensor_role("blk.0.ffn_gate_inp_shexp.weight"), TensorRole::kRouter);
  EXPECT_EQ(q35->tensor_role("blk.0.ffn_gate_exps.weight"), TensorRole::kExpertGate);
  EXPECT_EQ(q35->tensor_role("blk.0.ffn_up_exps.weight"), TensorRole::kExpertUp);
  EXPECT_EQ(q35->tensor_role("blk.0.ffn_down_exps.weight"), TensorRole::kExpertDown);
  EXPECT_EQ(q35->tensor_role("blk.0.ffn_down_shexp.weight"), TensorRole::kSharedExpert);
  EXPECT_EQ(q35->tensor_role("something_else"), TensorRole::kOther);
  const ArchInfo* q3 = find_arch("qwen3moe");
  ASSERT_NE(q3, nullptr);
  EXPECT_EQ(q3->tensor_role("blk.1.ffn_norm.weight"), TensorRole::kNorm);
  EXPECT_EQ(q3->tensor_role("blk.1.attn_output.weight"), TensorRole::kAttention);
}

// For every reference model: hparams read, and tensor_specs() equals the file's tensor
// table exactly (same set of names, same shapes), with roles agreeing with tensor_role().
class ArchRefModel : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchRefModel, TensorSpecsMatchFile) {
  auto file = gguf::read_header(model_path(GetParam()));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto hp = read_hparams(*file);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  const ArchInfo* info = find_arch(hp->arch);
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(hp->n_layer_mtp, 0);
  EXPECT_EQ(static_cast<int64_t>(hp->layer_kinds.size()), hp->n_layer);

  std::map<std::string, std::vector<int64_t>> in_file;
  for (const auto& t : file->tensors) in_file[t.name] = std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
  std::map<std::string, std::vector<int64_t>> in_spec;
  for (const auto& s : info->tensor_specs(*hp)) {
    EXPECT_TRUE(in_spec.emplace(s.name, s.ne).second) << "duplicate spec " << s.name;
    EXPECT_EQ(info->tensor_role(s.name), s.role) << s.name;
    EXPECT_EQ(tensor_layer_index(s.name), s.layer) << s.name;
  }
  EXPECT_EQ(in_spec, in_file);
}

INSTANTIATE_TEST_SUITE_P(All, ArchRefModel, ::testing::ValuesIn(kRefModels),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(ArchQwen35Moe, SmallModelHParams) {
  auto file = gguf::read_header(model_path("qwen35moe-small-ud_mix"));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto hp = read_hparams(*file);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->arch, "qwen35moe");
  EXPECT_EQ(hp->name, "ref-qwen35moe-small-random");
  EXPECT_EQ(hp->n_layer, 8);
  EXPECT_EQ(hp->n_embd, 256);
  EXPECT_EQ(hp->n_vocab, 331);
  EXPECT_EQ(hp->n_ctx_train, 4096);
  EXPECT_EQ(hp->n_head, 4);
  EXPECT_EQ(hp->n_head_kv, 2);
  EXPECT_EQ(hp->head_dim_k, 128);
  EXPECT_EQ(hp->head_dim_v, 128);
  EXPECT_TRUE(hp->attn_output_gate);
  EXPECT_EQ(hp->n_rot, 32);
  EXPECT_FLOAT_EQ(hp->rope_base, 1e7f);
  EXPECT_EQ(hp->rope_sections, (std::array<int64_t, 4>{6, 5, 5, 0}));
  EXPECT_EQ(hp->n_expert, 16);
  EXPECT_EQ(hp->n_expert_used, 4);
  EXPECT_EQ(hp->n_expert_shared, 1);
  EXPECT_EQ(hp->n_ff_exp, 256);
  EXPECT_EQ(hp->n_ff_shexp, 256);
  EXPECT_EQ(hp->ssm_d_conv, 4);
  EXPECT_EQ(hp->ssm_d_state, 64);
  EXPECT_EQ(hp->ssm_n_group, 4);
  EXPECT_EQ(hp->ssm_dt_rank, 8);
  EXPECT_EQ(hp->ssm_d_inner, 512);
  EXPECT_NEAR(hp->rms_eps, 1e-6f, 1e-12);
  // Layers 3 and 7 are attention: (il + 1) % 4 == 0.
  EXPECT_EQ(hp->n_attention_layers(), 2);
  EXPECT_EQ(hp->n_deltanet_layers(), 6);
  EXPECT_EQ(hp->layer_kinds[3], LayerKind::kAttention);
  EXPECT_EQ(hp->layer_kinds[7], LayerKind::kAttention);
  EXPECT_EQ(hp->layer_kinds[0], LayerKind::kDeltaNet);
  // Recurrent state per sequence and DeltaNet layer, f32:
  //   conv: (4 - 1) taps * (2 * 4*64 + 512) channels = 3 * 1024 = 3072 floats
  //   ssm:  8 V heads * 64 * 64 = 32768 floats
  //   (3072 + 32768) * 4 = 143360 bytes.
  const ArchInfo* info = find_arch("qwen35moe");
  EXPECT_EQ(info->recurrent_state_bytes(*hp, LayerKind::kDeltaNet), 143360);
  EXPECT_EQ(info->recurrent_state_bytes(*hp, LayerKind::kAttention), 0);
}

TEST(ArchQwen3Moe, TinyModelHParams) {
  auto file = gguf::read_header(model_path("qwen3moe-tiny-f32"));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto hp = read_hparams(*file);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->arch, "qwen3moe");
  EXPECT_EQ(hp->n_layer, 4);
  EXPECT_EQ(hp->n_attention_layers(), 4);
  EXPECT_EQ(hp->n_rot, 64);  // defaults to the head width
  EXPECT_FALSE(hp->attn_output_gate);
  EXPECT_EQ(hp->n_expert_shared, 0);
  EXPECT_EQ(hp->n_vocab, 268);
  EXPECT_FLOAT_EQ(hp->rope_base, 1e6f);
}

// --- errors, on hand-built headers --------------------------------------------------

gguf::GgufFile tiny_qwen35moe_header() {
  gguf::GgufFile f;
  f.path = "hand-built.gguf";
  auto set = [&f](const std::string& k, gguf::Value v) { f.metadata.emplace_back(k, std::move(v)); };
  using V = gguf::Value;
  set("general.architecture", V::make_string("qwen35moe"));
  set("tokenizer.ggml.tokens", V::make_string_array(std::vector<std::string>(268, "x")));
  set("qwen35moe.context_length", V::make_u32(4096));
  set("qwen35moe.embedding_length", V::make_u32(256));
  set("qwen35moe.block_count", V::make_u32(4));
  set("qwen35moe.attention.head_count", V::make_u32(4));
  set("qwen35moe.attention.head_count_kv", V::make_u32(2));
  set("qwen35moe.attention.layer_norm_rms_epsilon", V::make_f32(1e-6f));
  set("qwen35moe.expert_count", V::make_u32(8));
  set("qwen35moe.expert_used_count", V::make_u32(2));
  set("qwen35moe.expert_feed_forward_length", V::make_u32(64));
  set("qwen35moe.attention.key_length", V::make_u32(64));
  set("qwen35moe.attention.value_length", V::make_u32(64));
  set("qwen35moe.rope.dimension_count", V::make_u32(16));
  set("qwen35moe.rope.dimension_sections", V::make_i32_array({3, 3, 2, 0}));
  set("qwen35moe.rope.freq_base", V::make_f32(1e7f));
  set("qwen35moe.expert_shared_feed_forward_length", V::make_u32(64));
  set("qwen35moe.ssm.conv_kernel", V::make_u32(4));
  set("qwen35moe.ssm.state_size", V::make_u32(32));
  set("qwen35moe.ssm.group_count", V::make_u32(2));
  set("qwen35moe.ssm.time_step_rank", V::make_u32(4));
  set("qwen35moe.ssm.inner_size", V::make_u32(128));
  set("qwen35moe.full_attention_interval", V::make_u32(4));
  f.index();
  return f;
}

void set_key(gguf::GgufFile& f, const std::string& key, gguf::Value v) {
  for (auto& [k, val] : f.metadata) {
    if (k == key) {
      val = std::move(v);
      return;
    }
  }
  f.metadata.emplace_back(key, std::move(v));
  f.index();
}

void erase_key(gguf::GgufFile& f, const std::string& key) {
  std::erase_if(f.metadata, [&](const auto& kv) { return kv.first == key; });
  f.index();
}

TEST(ArchErrors, HandBuiltHeaderIsValid) {
  auto f = tiny_qwen35moe_header();
  auto hp = read_hparams(f);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->n_layer, 4);
  EXPECT_EQ(hp->n_vocab, 268);
}

TEST(ArchErrors, MissingKeyIsNamed) {
  auto f = tiny_qwen35moe_header();
  erase_key(f, "qwen35moe.expert_count");
  auto hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_EQ(hp.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(hp.status().message().find("qwen35moe.expert_count"), std::string::npos) << hp.status().message();
}

TEST(ArchErrors, ZeroAndNegativeValuesAreNamed) {
  auto f = tiny_qwen35moe_header();
  set_key(f, "qwen35moe.embedding_length", gguf::Value::make_u32(0));
  auto hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_NE(hp.status().message().find("qwen35moe.embedding_length"), std::string::npos) << hp.status().message();

  f = tiny_qwen35moe_header();
  set_key(f, "qwen35moe.attention.head_count", gguf::Value::make_i32(-4));
  hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_NE(hp.status().message().find("qwen35moe.attention.head_count"), std::string::npos)
      << hp.status().message();

  f = tiny_qwen35moe_header();
  set_key(f, "qwen35moe.attention.layer_norm_rms_epsilon", gguf::Value::make_f32(-1.0f));
  hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_NE(hp.status().message().find("layer_norm_rms_epsilon"), std::string::npos) << hp.status().message();
}

TEST(ArchErrors, InconsistentValuesAreNamed) {
  struct Case {
    std::string key;
    gguf::Value value;
  };
  const Case cases[] = {
      {"qwen35moe.expert_used_count", gguf::Value::make_u32(9)},       // > expert_count 8
      {"qwen35moe.attention.head_count_kv", gguf::Value::make_u32(3)},  // does not divide 4
      {"qwen35moe.ssm.inner_size", gguf::Value::make_u32(100)},         // != 4 * 32
      {"qwen35moe.nextn_predict_layers", gguf::Value::make_u32(4)},     // >= block_count
      {"qwen35moe.rope.dimension_count", gguf::Value::make_u32(65)},    // > head width, odd
      {"qwen35moe.embedding_length", gguf::Value::make_u32(1u << 30)},  // absurdly large
      {"qwen35moe.expert_count", gguf::Value::make_string("eight")},    // wrong type
  };
  for (const auto& c : cases) {
    auto f = tiny_qwen35moe_header();
    set_key(f, c.key, c.value);
    auto hp = read_hparams(f);
    ASSERT_FALSE(hp.is_ok()) << c.key;
    EXPECT_EQ(hp.status().kind(), ErrorKind::kBadInput);
    EXPECT_NE(hp.status().message().find(c.key), std::string::npos) << hp.status().message();
  }
}

TEST(ArchErrors, UnknownArchitectureListsSupportedOnes) {
  auto f = tiny_qwen35moe_header();
  set_key(f, "general.architecture", gguf::Value::make_string("llama"));
  auto hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_EQ(hp.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(hp.status().message().find("'llama'"), std::string::npos);
  EXPECT_NE(hp.status().message().find("qwen35moe"), std::string::npos);
  EXPECT_NE(hp.status().message().find("qwen3moe"), std::string::npos);

  erase_key(f, "general.architecture");
  hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_NE(hp.status().message().find("general.architecture"), std::string::npos);
}

TEST(ArchErrors, VocabularySizeNeedsTokensOrEmbedding) {
  auto f = tiny_qwen35moe_header();
  erase_key(f, "tokenizer.ggml.tokens");
  auto hp = read_hparams(f);
  ASSERT_FALSE(hp.is_ok());
  EXPECT_NE(hp.status().message().find("vocabulary"), std::string::npos) << hp.status().message();
}

TEST(ArchMtp, NextnLayersReduceComputeLayersAndAddTensors) {
  auto f = tiny_qwen35moe_header();
  set_key(f, "qwen35moe.block_count", gguf::Value::make_u32(5));
  set_key(f, "qwen35moe.nextn_predict_layers", gguf::Value::make_u32(1));
  auto hp = read_hparams(f);
  ASSERT_TRUE(hp.is_ok()) << hp.status().message();
  EXPECT_EQ(hp->n_layer, 4);
  EXPECT_EQ(hp->n_layer_mtp, 1);
  EXPECT_EQ(hp->layer_kinds.size(), 4u);
  const auto specs = find_arch("qwen35moe")->tensor_specs(*hp);
  const auto has = [&](const std::string& n) {
    return std::any_of(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == n; });
  };
  EXPECT_TRUE(has("blk.4.nextn.eh_proj.weight"));
  EXPECT_TRUE(has("blk.4.attn_q.weight"));
  EXPECT_TRUE(has("blk.4.ffn_up_exps.weight"));
  EXPECT_FALSE(has("blk.5.attn_norm.weight"));
}

}  // namespace
}  // namespace moetier

namespace moetier {
namespace {

// write_hparams writes every key read_hparams needs: a header written from the hparams of
// each reference model reads back to the same hparams.
TEST(ArchWrite, HParamsRoundTripThroughAFile) {
  for (const char* model : {"qwen35moe-small-ud_mix", "qwen3moe-small-q4_k_m"}) {
    auto src = gguf::read_header(model_path(model));
    ASSERT_TRUE(src.is_ok()) << src.status().message();
    auto hp = read_hparams(*src);
    ASSERT_TRUE(hp.is_ok()) << hp.status().message();

    const std::string path = (std::filesystem::temp_directory_path() /
                              ("moetier_arch_test_" + std::to_string(platform::process_id()) + ".gguf")).string();
    auto writer = gguf::Writer::create(path);
    ASSERT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->set("general.architecture", gguf::Value::make_string(hp->arch));
    (*writer)->set("tokenizer.ggml.tokens",
                   gguf::Value::make_string_array(std::vector<std::string>(static_cast<size_t>(hp->n_vocab), "t")));
    find_arch(hp->arch)->write_hparams(*hp, **writer);
    ASSERT_TRUE((*writer)->write_header().is_ok());
    ASSERT_TRUE((*writer)->finish().is_ok());

    auto back_file = gguf::read_header(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(back_file.is_ok()) << back_file.status().message();
    // Every <arch>.* key of the reference file is written, with the same value.
    for (const auto& [key, value] : src->metadata) {
      if (key.rfind(hp->arch + ".", 0) != 0) continue;
      const gguf::Value* w = back_file->find(key);
      ASSERT_NE(w, nullptr) << model << ": " << key << " not written";
      EXPECT_EQ(w->to_display_string(), value.to_display_string()) << key;
      EXPECT_EQ(w->type, value.type) << key;
    }
    auto back = read_hparams(*back_file);
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_EQ(back->n_layer, hp->n_layer);
    EXPECT_EQ(back->layer_kinds, hp->layer_kinds);
    EXPECT_EQ(back->n_ff_shexp, hp->n_ff_shexp);
    EXPECT_EQ(back->rope_sections, hp->rope_sections);
    EXPECT_EQ(back->rope_base, hp->rope_base);
    EXPECT_EQ(back->rms_eps, hp->rms_eps);
  }
}

}  // namespace
}  // namespace moetier
