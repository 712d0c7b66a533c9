// qwen35moe (Qwen3.5 / Qwen3.6 MoE): a hybrid stack where block il is gated softmax
// attention when (il + 1) % full_attention_interval == 0 and Gated DeltaNet otherwise;
// every block ends in a routed MoE plus one sigmoid-gated shared expert. Optional trailing
// MTP ("nextn") blocks are full-attention blocks with a few extra tensors.
#include <string>

#include "gguf/writer.h"
#include "model/arch.h"
#include "model/hparams_keys.h"
#include "model/model.h"
#include "state/sequence_state.h"

namespace moetier {

// The forward pass (in qwen35moe_model.cpp).
Result<std::unique_ptr<Model>> create_qwen35moe_model(const gguf::ModelFile& file, const HParams& hp,
                                                  const ModelOptions& options);
Result<std::unique_ptr<MtpHead>> create_qwen35moe_mtp_head(std::shared_ptr<const gguf::ModelFile> file,
                                                          const HParams& hp, const ModelOptions& options);
namespace {

constexpr std::string_view kArch = "qwen35moe";

Result<HParams> read(const gguf::GgufFile& file) {
  const arch_keys::KeyReader k(file, kArch);
  HParams hp;
  hp.arch = std::string(kArch);
  hp.name = arch_keys::read_general_name(file);

  ASSIGN_OR_RETURN(const int64_t block_count, k.positive("block_count", 4096));
  ASSIGN_OR_RETURN(hp.n_layer_mtp, k.non_negative_or("nextn_predict_layers", 0, 4096));
  if (hp.n_layer_mtp >= block_count) {
    return k.error("nextn_predict_layers",
                   fmt::format("({}) must be smaller than {} ({})", hp.n_layer_mtp, k.key("block_count"), block_count));
  }
  hp.n_layer = block_count - hp.n_layer_mtp;

  RETURN_IF_ERROR(arch_keys::read_trunk(k, file, hp));
  // Gated attention.
  RETURN_IF_ERROR(arch_keys::read_attention_heads(k, hp));
  hp.attn_output_gate = true;
  ASSIGN_OR_RETURN(hp.n_rot, k.positive_or("rope.dimension_count", hp.head_dim_k));
  if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0) {
    return k.error("rope.dimension_count",
                   fmt::format("({}) must be even and at most the head width {}", hp.n_rot, hp.head_dim_k));
  }
  ASSIGN_OR_RETURN(hp.rope_base, k.positive_float_or("rope.freq_base", 10000.0f));
  ASSIGN_OR_RETURN(const std::vector<int64_t> sections, k.int_array("rope.dimension_sections", 4));
  int64_t section_sum = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    hp.rope_sections[i] = sections[i];
    section_sum += sections[i];
  }
  if (section_sum < 1 || section_sum > hp.n_rot / 2) {
    // Sections partition the n_rot/2 rotary pairs among the position components.
    return k.error("rope.dimension_sections",
                   fmt::format("must sum to between 1 and n_rot/2 = {} (got {})", hp.n_rot / 2, section_sum));
  }

  // MoE with one shared expert.
  ASSIGN_OR_RETURN(hp.n_expert, k.positive("expert_count"));
  ASSIGN_OR_RETURN(hp.n_expert_used, k.positive("expert_used_count"));
  if (hp.n_expert_used > hp.n_expert) {
    return k.error("expert_used_count",
                   fmt::format("({}) exceeds {} ({})", hp.n_expert_used, k.key("expert_count"), hp.n_expert));
  }
  ASSIGN_OR_RETURN(hp.n_ff_exp, k.positive("expert_feed_forward_length"));
  ASSIGN_OR_RETURN(hp.n_ff_shexp, k.positive("expert_shared_feed_forward_length"));
  hp.n_expert_shared = 1;

  // Gated DeltaNet.
  ASSIGN_OR_RETURN(hp.ssm_d_conv, k.positive("ssm.conv_kernel", 64));
  ASSIGN_OR_RETURN(hp.ssm_d_state, k.positive("ssm.state_size", 4096));
  ASSIGN_OR_RETURN(hp.ssm_n_group, k.positive("ssm.group_count"));
  ASSIGN_OR_RETURN(hp.ssm_dt_rank, k.positive("ssm.time_step_rank"));
  ASSIGN_OR_RETURN(hp.ssm_d_inner, k.positive("ssm.inner_size"));
  if (hp.ssm_d_inner != hp.ssm_dt_rank * hp.ssm_d_state) {
    return k.error("ssm.inner_size", fmt::format("({}) must equal time_step_rank * state_size = {} * {}",
                                                 hp.ssm_d_inner, hp.ssm_dt_rank, hp.ssm_d_state));
  }
  if (hp.ssm_dt_rank % hp.ssm_n_group != 0) {
    // V heads share Q/K heads by a tiled mapping that needs a whole number of V heads per K head.
    return k.error("ssm.time_step_rank", fmt::format("({}) must be a multiple of {} ({})", hp.ssm_dt_rank,
                                                     k.key("ssm.group_count"), hp.ssm_n_group));
  }
  // llama.cpp defaults the interval to 4 when the key is absent; so do we.
  ASSIGN_OR_RETURN(hp.full_attention_interval, k.positive_or("full_attention_interval", 4, 4096));

  hp.layer_kinds.resize(static_cast<size_t>(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    hp.layer_kinds[il] = (il + 1) % hp.full_attention_interval == 0 ? LayerKind::kAttention : LayerKind::kDeltaNet;
  }
  return hp;
}

// Appends "blk.<il>.<suffix>" with its shape and role.
struct SpecList {
  std::vector<TensorSpec> specs;
  void add(std::string name, std::vector<int64_t> ne, TensorRole role, int layer = -1) {
    specs.push_back({.name = std::move(name), .ne = std::move(ne), .role = role, .layer = layer});
  }
  void blk(int il, std::string_view suffix, std::vector<int64_t> ne, TensorRole role, bool optional = false) {
    add(fmt::format("blk.{}.{}", il, suffix), std::move(ne), role, il);
    specs.back().optional = optional;
  }
};

void add_attention(SpecList& s, const HParams& hp, int il) {
  const int64_t q_out = 2 * hp.n_head * hp.head_dim_k;  // per head: [query | gate]
  s.blk(il, "attn_q.weight", {hp.n_embd, q_out}, TensorRole::kAttention);
  s.blk(il, "attn_k.weight", {hp.n_embd, hp.n_head_kv * hp.head_dim_k}, TensorRole::kAttention);
  s.blk(il, "attn_v.weight", {hp.n_embd, hp.n_head_kv * hp.head_dim_v}, TensorRole::kAttention);
  s.blk(il, "attn_output.weight", {hp.n_head * hp.head_dim_v, hp.n_embd}, TensorRole::kAttention);
  s.blk(il, "attn_q_norm.weight", {hp.head_dim_k}, TensorRole::kNorm);
  s.blk(il, "attn_k_norm.weight", {hp.head_dim_k}, TensorRole::kNorm);
}

void add_deltanet(SpecList& s, const HParams& hp, int il) {
  const int64_t key_dim = hp.ssm_n_group * hp.ssm_d_state;
  const int64_t value_dim = hp.ssm_d_inner;
  const int64_t conv_channels = 2 * key_dim + value_dim;  // q | k | v
  s.blk(il, "attn_qkv.weight", {hp.n_embd, conv_channels}, TensorRole::kDeltaNet);
  s.blk(il, "attn_gate.weight", {hp.n_embd, value_dim}, TensorRole::kDeltaNet);
  s.blk(il, "ssm_conv1d.weight", {hp.ssm_d_conv, conv_channels}, TensorRole::kDeltaNet);
  s.blk(il, "ssm_dt.bias", {hp.ssm_dt_rank}, TensorRole::kDeltaNet);
  s.blk(il, "ssm_a", {hp.ssm_dt_rank}, TensorRole::kDeltaNet);
  s.blk(il, "ssm_beta.weight", {hp.n_embd, hp.ssm_dt_rank}, TensorRole::kDeltaNet);
  s.blk(il, "ssm_alpha.weight", {hp.n_embd, hp.ssm_dt_rank}, TensorRole::kDeltaNet);
  s.blk(il, "ssm_norm.weight", {hp.ssm_d_state}, TensorRole::kNorm);
  s.blk(il, "ssm_out.weight", {value_dim, hp.n_embd}, TensorRole::kDeltaNet);
}

void add_moe(SpecList& s, const HParams& hp, int il) {
  s.blk(il, "ffn_gate_inp.weight", {hp.n_embd, hp.n_expert}, TensorRole::kRouter);
  s.blk(il, "ffn_gate_exps.weight", {hp.n_embd, hp.n_ff_exp, hp.n_expert}, TensorRole::kExpertGate);
  s.blk(il, "ffn_up_exps.weight", {hp.n_embd, hp.n_ff_exp, hp.n_expert}, TensorRole::kExpertUp);
  s.blk(il, "ffn_down_exps.weight", {hp.n_ff_exp, hp.n_embd, hp.n_expert}, TensorRole::kExpertDown);
  s.blk(il, "ffn_gate_inp_shexp.weight", {hp.n_embd}, TensorRole::kRouter);
  s.blk(il, "ffn_gate_shexp.weight", {hp.n_embd, hp.n_ff_shexp}, TensorRole::kSharedExpert);
  s.blk(il, "ffn_up_shexp.weight", {hp.n_embd, hp.n_ff_shexp}, TensorRole::kSharedExpert);
  s.blk(il, "ffn_down_shexp.weight", {hp.n_ff_shexp, hp.n_embd}, TensorRole::kSharedExpert);
}

// In the order llama.cpp's converter writes them (the reference F32 files follow it).
std::vector<TensorSpec> specs(const HParams& hp) {
  SpecList s;
  s.add("token_embd.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kTokenEmbedding);
  s.add("output_norm.weight", {hp.n_embd}, TensorRole::kNorm);
  s.add("output.weight", {hp.n_embd, hp.n_vocab}, TensorRole::kOutput);
  for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
    s.blk(il, "attn_norm.weight", {hp.n_embd}, TensorRole::kNorm);
    s.blk(il, "post_attention_norm.weight", {hp.n_embd}, TensorRole::kNorm);
    if (hp.layer_kinds[il] == LayerKind::kAttention) {
      add_attention(s, hp, il);
    } else {
      add_deltanet(s, hp, il);
    }
    add_moe(s, hp, il);
  }
  // MTP blocks: a full-attention block plus the projection that mixes the previous hidden
  // state with the next token's embedding ({2*n_embd, n_embd}), its two norms, and the
  // head's own final norm (the converter writes the checkpoint's mtp.norm there; llama.cpp
  // falls back to output_norm when it is absent, and so do we).
  for (int il = static_cast<int>(hp.n_layer); il < static_cast<int>(hp.n_layer + hp.n_layer_mtp); ++il) {
    s.blk(il, "attn_norm.weight", {hp.n_embd}, TensorRole::kNorm);
    s.blk(il, "post_attention_norm.weight", {hp.n_embd}, TensorRole::kNorm);
    add_attention(s, hp, il);
    add_moe(s, hp, il);
    s.blk(il, "nextn.eh_proj.weight", {2 * hp.n_embd, hp.n_embd}, TensorRole::kOther);
    s.blk(il, "nextn.enorm.weight", {hp.n_embd}, TensorRole::kNorm);
    s.blk(il, "nextn.hnorm.weight", {hp.n_embd}, TensorRole::kNorm);
    s.blk(il, "nextn.shared_head_norm.weight", {hp.n_embd}, TensorRole::kNorm, /*optional=*/true);
  }
  return std::move(s.specs);
}

TensorRole role(std::string_view name) {
  const std::string_view n = arch_keys::strip_block_prefix(name);
  // In this architecture the fused qkv projection and the z gate exist only in DeltaNet blocks.
  if (n == "attn_qkv.weight" || n == "attn_gate.weight") return TensorRole::kDeltaNet;
  return arch_keys::common_tensor_role(name);
}

void write(const HParams& hp, gguf::Writer& w) {
  const auto key = [](std::string_view suffix) { return fmt::format("{}.{}", kArch, suffix); };
  const auto u32 = [](int64_t v) { return gguf::Value::make_u32(static_cast<uint32_t>(v)); };
  w.set(key("context_length"), u32(hp.n_ctx_train));
  w.set(key("embedding_length"), u32(hp.n_embd));
  w.set(key("block_count"), u32(hp.n_layer + hp.n_layer_mtp));
  w.set(key("attention.head_count"), u32(hp.n_head));
  w.set(key("attention.head_count_kv"), u32(hp.n_head_kv));
  w.set(key("attention.layer_norm_rms_epsilon"), gguf::Value::make_f32(hp.rms_eps));
  w.set(key("expert_count"), u32(hp.n_expert));
  w.set(key("expert_used_count"), u32(hp.n_expert_used));
  w.set(key("expert_feed_forward_length"), u32(hp.n_ff_exp));
  w.set(key("attention.key_length"), u32(hp.head_dim_k));
  w.set(key("attention.value_length"), u32(hp.head_dim_v));
  w.set(key("rope.dimension_count"), u32(hp.n_rot));
  std::vector<int32_t> sections;
  for (int64_t s : hp.rope_sections) sections.push_back(static_cast<int32_t>(s));
  w.set(key("rope.dimension_sections"), gguf::Value::make_i32_array(sections));
  w.set(key("rope.freq_base"), gguf::Value::make_f32(hp.rope_base));
  w.set(key("expert_shared_feed_forward_length"), u32(hp.n_ff_shexp));
  w.set(key("ssm.conv_kernel"), u32(hp.ssm_d_conv));
  w.set(key("ssm.state_size"), u32(hp.ssm_d_state));
  w.set(key("ssm.group_count"), u32(hp.ssm_n_group));
  w.set(key("ssm.time_step_rank"), u32(hp.ssm_dt_rank));
  w.set(key("ssm.inner_size"), u32(hp.ssm_d_inner));
  w.set(key("full_attention_interval"), u32(hp.full_attention_interval));
  if (hp.n_layer_mtp > 0) w.set(key("nextn_predict_layers"), u32(hp.n_layer_mtp));
}

// Per sequence and DeltaNet layer, f32: the conv carries the last (d_conv - 1) inputs of
// every qkv channel; the recurrence carries one d_state x d_state matrix per V head.
int64_t state_bytes(const HParams& hp, LayerKind kind) {
  if (kind != LayerKind::kDeltaNet) return 0;
  const int64_t conv_channels = 2 * hp.ssm_n_group * hp.ssm_d_state + hp.ssm_d_inner;
  const int64_t conv = (hp.ssm_d_conv - 1) * conv_channels;
  const int64_t ssm = hp.ssm_dt_rank * hp.ssm_d_state * hp.ssm_d_state;
  return (conv + ssm) * static_cast<int64_t>(sizeof(float));
}

// The CPU journal of a DeltaNet layer: its conv state per position, one more SSM state and
// the delta rule's per-token records (SequenceState).
int64_t cpu_journal_bytes(const HParams& hp, LayerKind kind, int64_t tokens) {
  if (kind != LayerKind::kDeltaNet) return 0;
  const int64_t conv_channels = 2 * hp.ssm_n_group * hp.ssm_d_state + hp.ssm_d_inner;
  return static_cast<int64_t>(SequenceState::layer_journal_bytes(
      {.conv_state_elems = (hp.ssm_d_conv - 1) * conv_channels,
       .ssm_state_elems = hp.ssm_dt_rank * hp.ssm_d_state * hp.ssm_d_state,
       .ssm_heads = hp.ssm_dt_rank,
       .ssm_d_k = hp.ssm_d_state,
       .ssm_d_v = hp.ssm_d_state},
      tokens));
}

const ArchInfo kInfo = {
    .name = kArch,
    .read_hparams = read,
    .tensor_specs = specs,
    .tensor_role = role,
    .write_hparams = write,
    .recurrent_state_bytes = state_bytes,
    .cpu_journal_bytes = cpu_journal_bytes,
    .create_model = create_qwen35moe_model,
    .create_mtp_head = create_qwen35moe_mtp_head,
};

}  // namespace

const ArchInfo& qwen35moe_arch() { return kInfo; }
}  // namespace moetier
