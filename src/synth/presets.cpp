#include "synth/presets.h"

#include <fmt/format.h>

namespace moetier::synth {
namespace {

// qwen35moe: Gated DeltaNet layers with every full_attention_interval-th layer full
// (gated) attention; routed experts plus one shared expert per layer.
HParams qwen35moe_shape(const HParams& base, int64_t n_layer_mtp = 0) {
  HParams hp = base;
  hp.n_layer_mtp = n_layer_mtp;  // the real Qwen3.5/3.6 files carry one MTP block
  hp.arch = "qwen35moe";
  hp.attn_output_gate = true;
  hp.n_expert_shared = 1;
  hp.ssm_d_conv = 4;
  hp.full_attention_interval = 4;
  hp.ssm_d_inner = hp.ssm_dt_rank * hp.ssm_d_state;  // V heads * d_v
  hp.head_dim_v = hp.head_dim_k;
  hp.layer_kinds = layer_pattern(hp, hp.n_layer);
  return hp;
}

// qwen3moe: all layers plain softmax attention, full rotary, routed experts only.
HParams qwen3moe_shape(const HParams& base) {
  HParams hp = base;
  hp.arch = "qwen3moe";
  hp.n_rot = hp.head_dim_k;
  hp.head_dim_v = hp.head_dim_k;
  hp.layer_kinds = layer_pattern(hp, hp.n_layer);
  return hp;
}

std::vector<Preset> make_presets() {
  std::vector<Preset> list;
  list.push_back(Preset{
      .name = "qwen3.6-35b-a3b",
      .description = "Qwen3.6-35B-A3B shape (qwen35moe, 40 layers + 1 MTP layer, 256 experts, ~20 GB at q4_k_m)",
      .hparams = qwen35moe_shape(HParams{
          .name = "qwen3.6-35b-a3b-synth", .n_layer = 40, .n_embd = 2048, .n_vocab = 248320,
          .n_ctx_train = 262144, .rms_eps = 1e-6f, .n_head = 16, .n_head_kv = 2, .head_dim_k = 256,
          .n_rot = 64, .rope_base = 1e7f, .rope_sections = {11, 11, 10, 0}, .n_expert = 256,
          .n_expert_used = 8, .n_ff_exp = 512, .n_ff_shexp = 512, .ssm_d_state = 128, .ssm_n_group = 16,
          .ssm_dt_rank = 32}, /*n_layer_mtp=*/1),
      .default_mix = QuantMix::kQ4_K_M});
  list.push_back(Preset{
      .name = "qwen3-30b-a3b",
      .description = "Qwen3-30B-A3B shape (qwen3moe, 48 layers, 128 experts)",
      .hparams = qwen3moe_shape(HParams{
          .name = "qwen3-30b-a3b-synth", .n_layer = 48, .n_embd = 2048, .n_vocab = 151936, .n_ctx_train = 40960,
          .rms_eps = 1e-6f, .n_head = 32, .n_head_kv = 4, .head_dim_k = 128, .rope_base = 1e6f, .n_expert = 128,
          .n_expert_used = 8, .n_ff_exp = 768}),
      .default_mix = QuantMix::kQ4_K_M});
  // The shapes of ../shared/ref/models (README section 2).
  list.push_back(Preset{
      .name = "tiny",
      .description = "tiny qwen35moe (n_embd 256, 4 layers, 8 experts; shape of ref qwen35moe-tiny)",
      .hparams = qwen35moe_shape(HParams{
          .name = "tiny-qwen35moe-synth", .n_layer = 4, .n_embd = 256, .n_vocab = 268, .n_ctx_train = 4096,
          .rms_eps = 1e-6f, .n_head = 4, .n_head_kv = 2, .head_dim_k = 64, .n_rot = 16, .rope_base = 1e7f,
          .rope_sections = {3, 3, 2, 0}, .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 64, .n_ff_shexp = 64,
          .ssm_d_state = 32, .ssm_n_group = 2, .ssm_dt_rank = 4}),
      .default_mix = QuantMix::kF32});
  list.push_back(Preset{
      .name = "small",
      .description = "small qwen35moe (n_embd 256, 8 layers, 16 experts; shape of ref qwen35moe-small)",
      .hparams = qwen35moe_shape(HParams{
          .name = "small-qwen35moe-synth", .n_layer = 8, .n_embd = 256, .n_vocab = 331, .n_ctx_train = 4096,
          .rms_eps = 1e-6f, .n_head = 4, .n_head_kv = 2, .head_dim_k = 128, .n_rot = 32, .rope_base = 1e7f,
          .rope_sections = {6, 5, 5, 0}, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256,
          .n_ff_shexp = 256, .ssm_d_state = 64, .ssm_n_group = 4, .ssm_dt_rank = 8}),
      .default_mix = QuantMix::kF32});
  list.push_back(Preset{
      .name = "qwen3moe-tiny",
      .description = "tiny qwen3moe (n_embd 256, 4 layers, 8 experts; shape of ref qwen3moe-tiny)",
      .hparams = qwen3moe_shape(HParams{
          .name = "tiny-qwen3moe-synth", .n_layer = 4, .n_embd = 256, .n_vocab = 268, .n_ctx_train = 4096,
          .rms_eps = 1e-6f, .n_head = 4, .n_head_kv = 2, .head_dim_k = 64, .rope_base = 1e6f, .n_expert = 8,
          .n_expert_used = 2, .n_ff_exp = 64}),
      .default_mix = QuantMix::kF32});
  list.push_back(Preset{
      .name = "qwen3moe-small",
      .description = "small qwen3moe (n_embd 256, 8 layers, 16 experts; shape of ref qwen3moe-small)",
      .hparams = qwen3moe_shape(HParams{
          .name = "small-qwen3moe-synth", .n_layer = 8, .n_embd = 256, .n_vocab = 331, .n_ctx_train = 4096,
          .rms_eps = 1e-6f, .n_head = 4, .n_head_kv = 2, .head_dim_k = 128, .rope_base = 1e6f, .n_expert = 16,
          .n_expert_used = 4, .n_ff_exp = 256}),
      .default_mix = QuantMix::kF32});
  return list;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = make_presets();  // immutable table, built once
  return kPresets;
}

Result<const Preset*> find_preset(std::string_view name) {
  std::string known;
  for (const auto& p : presets()) {
    if (p.name == name) return &p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  return Status::bad_input(fmt::format("unknown preset '{}' (known: {})", name, known));
}

std::vector<LayerKind> layer_pattern(const HParams& hp, int64_t n_layer) {
  std::vector<LayerKind> kinds(static_cast<size_t>(std::max<int64_t>(n_layer, 0)), LayerKind::kAttention);
  if (hp.arch == "qwen35moe") {
    const int64_t interval = hp.full_attention_interval > 0 ? hp.full_attention_interval : 4;
    for (int64_t il = 0; il < n_layer; ++il) {
      kinds[static_cast<size_t>(il)] = (il + 1) % interval == 0 ? LayerKind::kAttention : LayerKind::kDeltaNet;
    }
  }
  return kinds;
}

Status set_depth(HParams& hp, int64_t n_layer) {
  if (n_layer < 1) return Status::bad_input(fmt::format("--layers must be at least 1, got {}", n_layer));
  // 4096 layers is far beyond any real model; it keeps the GGUF layer ids and sizes sane.
  if (n_layer > 4096) return Status::bad_input(fmt::format("--layers {} is too large (at most 4096)", n_layer));
  hp.n_layer = n_layer;
  hp.layer_kinds = layer_pattern(hp, n_layer);
  return Status::ok();
}

}  // namespace moetier::synth
