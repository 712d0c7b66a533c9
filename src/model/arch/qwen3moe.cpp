// qwen3moe (Qwen3 MoE, e.g. Qwen3-30B-A3B): every block is plain softmax attention with
// per-head q/k RMSNorm and full-width NEOX rotary, followed by a routed MoE without a
// shared expert.
#include <string>

#include "gguf/writer.h"
#include "model/arch.h"
#include "model/hparams_keys.h"
#include "model/model.h"

namespace moetier {

// The forward pass (in qwen3moe_model.cpp).
Result<std::unique_ptr<Model>> create_qwen3moe_model(const gguf::ModelFile& file, const HParams& hp,
                                                  const ModelOptions& options);
namespace {

constexpr std::string_view kArch = "qwen3moe";

Result<HParams> read(const gguf::GgufFile& file) {
  const arch_keys::KeyReader k(file, kArch);
  HParams hp;
  hp.arch = std::string(kArch);
  hp.name = arch_keys::read_general_name(file);

  ASSIGN_OR_RETURN(hp.n_layer, k.positive("block_count", 4096));
  RETURN_IF_ERROR(arch_keys::read_trunk(k, file, hp));
  RETURN_IF_ERROR(arch_keys::read_attention_heads(k, hp));
  // Rotary covers the whole head (llama.cpp asserts n_rot == head width for this arch).
  ASSIGN_OR_RETURN(hp.n_rot, k.positive_or("rope.dimension_count", hp.head_dim_k));
  if (hp.n_rot != hp.head_dim_k) {
    return k.error("rope.dimension_count",
                   fmt::format("({}) must equal the head width {} in {}", hp.n_rot, hp.head_dim_k, kArch));
  }
  ASSIGN_OR_RETURN(hp.rope_base, k.positive_float_or("rope.freq_base", 10000.0f));

  ASSIGN_OR_RETURN(hp.n_expert, k.positive("expert_count"));
  ASSIGN_OR_RETURN(hp.n_expert_used, k.positive("expert_used_count"));
  if (hp.n_expert_used > hp.n_expert) {
    return k.error("expert_used_count",
                   fmt::format("({}) exceeds {} ({})", hp.n_expert_used, k.key("expert_count"), hp.n_expert));
  }
  ASSIGN_OR_RETURN(hp.n_ff_exp, k.positive("expert_feed_forward_length"));

  hp.layer_kinds.assign(static_cast<size_t>(hp.n_layer), LayerKind::kAttention);
  return hp;
}

std::vector<TensorSpec> specs(const HParams& hp) {
  std::vector<TensorSpec> s;
  const auto add = [&s](std::string name, std::vector<int64_t> ne, TensorRole role, int layer) {
    s.push_back({.name = std::move(name), .ne = std::move(ne), .role = role, .layer = layer});
  };
  add("token_embd.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kTokenEmbedding, -1);
  add("output_norm.weight", {hp.n_embd}, TensorRole::kNorm, -1);
  add("output.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kOutput, -1);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    const auto blk = [&](std::string_view suffix, std::vector<int64_t> ne, TensorRole role) {
      add(fmt::format("blk.{}.{}", il, suffix), std::move(ne), role, il);
    };
    blk("attn_norm.weight", {hp.n_embd}, TensorRole::kNorm);
    blk("attn_q.weight", {hp.n_embd, hp.n_head * hp.head_dim_k}, TensorRole::kAttention);
    blk("attn_k.weight", {hp.n_embd, hp.n_head_kv * hp.head_dim_k}, TensorRole::kAttention);
    blk("attn_v.weight", {hp.n_embd, hp.n_head_kv * hp.head_dim_v}, TensorRole::kAttention);
    blk("attn_output.weight", {hp.n_head * hp.head_dim_v, hp.n_embd}, TensorRole::kAttention);
    blk("attn_q_norm.weight", {hp.head_dim_k}, TensorRole::kNorm);
    blk("attn_k_norm.weight", {hp.head_dim_k}, TensorRole::kNorm);
    blk("ffn_norm.weight", {hp.n_embd}, TensorRole::kNorm);
    blk("ffn_gate_inp.weight", {hp.n_embd, hp.n_expert}, TensorRole::kRouter);
    blk("ffn_gate_exps.weight", {hp.n_embd, hp.n_ff_exp, hp.n_expert}, TensorRole::kExpertGate);
    blk("ffn_up_exps.weight", {hp.n_embd, hp.n_ff_exp, hp.n_expert}, TensorRole::kExpertUp);
    blk("ffn_down_exps.weight", {hp.n_ff_exp, hp.n_embd, hp.n_expert}, TensorRole::kExpertDown);
  }
  return s;
}

TensorRole role(std::string_view name) { return arch_keys::common_tensor_role(name); }

void write(const HParams& hp, gguf::Writer& w) {
  const auto key = [](std::string_view suffix) { return fmt::format("{}.{}", kArch, suffix); };
  const auto u32 = [](int64_t v) { return gguf::Value::make_u32(static_cast<uint32_t>(v)); };
  w.set(key("context_length"), u32(hp.n_ctx_train));
  w.set(key("embedding_length"), u32(hp.n_embd));
  w.set(key("block_count"), u32(hp.n_layer));
  w.set(key("attention.head_count"), u32(hp.n_head));
  w.set(key("attention.head_count_kv"), u32(hp.n_head_kv));
  w.set(key("attention.layer_norm_rms_epsilon"), gguf::Value::make_f32(hp.rms_eps));
  w.set(key("expert_count"), u32(hp.n_expert));
  w.set(key("expert_used_count"), u32(hp.n_expert_used));
  w.set(key("expert_feed_forward_length"), u32(hp.n_ff_exp));
  w.set(key("attention.key_length"), u32(hp.head_dim_k));
  w.set(key("attention.value_length"), u32(hp.head_dim_v));
  w.set(key("rope.freq_base"), gguf::Value::make_f32(hp.rope_base));
}

int64_t state_bytes(const HParams&, LayerKind) { return 0; }  // attention only: KV cache, no recurrent state

const ArchInfo kInfo = {
    .name = kArch,
    .read_hparams = read,
    .tensor_specs = specs,
    .tensor_role = role,
    .write_hparams = write,
    .recurrent_state_bytes = state_bytes,
    .create_model = create_qwen3moe_model,
};

}  // namespace

const ArchInfo& qwen3moe_arch() { return kInfo; }
}  // namespace moetier
