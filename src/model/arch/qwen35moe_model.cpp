// Qwen3.5/3.6 MoE (GGUF arch "qwen35moe"): the forward pass. Every
// full_attention_interval-th layer is gated softmax attention, the others Gated DeltaNet;
// every layer ends in a routed MoE with a sigmoid-gated shared expert.
//
//   h  = rmsnorm(x) * attn_norm
//   x  = x + (GatedAttention(h) or GatedDeltaNet(h))
//   h2 = rmsnorm(x) * post_attention_norm
//   x  = x + MoE(h2) + sigmoid(shexp_gate · h2) * SharedExpert(h2)
//   logits = output · (rmsnorm(x) * output_norm)
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/blocks/attention.h"
#include "model/blocks/delta_net.h"
#include "model/blocks/moe.h"
#include "model/decoder_model.h"
#include "model/layer_exec.h"

namespace moetier {

namespace {

struct Layer {
  LayerKind kind;
  const float* attn_norm;
  const float* post_attention_norm;
  AttentionWeights attention;  // kind == kAttention
  DeltaNetWeights delta_net;   // kind == kDeltaNet
  MoeWeights moe;
};

class Qwen35MoeModel final : public DecoderModel {
 public:
  static Result<std::unique_ptr<Model>> create(const gguf::ModelFile& file, const HParams& hp,
                                               const std::vector<TensorSpec>& specs) {
    auto m = std::unique_ptr<Qwen35MoeModel>(new Qwen35MoeModel());
    m->hp_ = hp;
    WeightBinder b(file, specs, m->converted_);
    m->bind_embeddings(b);
    for (int il = 0; il < hp.n_layer; ++il) {
      const std::string p = fmt::format("blk.{}.", il);
      Layer l{.kind = hp.layer_kinds[static_cast<size_t>(il)]};
      l.attn_norm = b.f32(p + "attn_norm.weight");
      l.post_attention_norm = b.f32(p + "post_attention_norm.weight");
      if (l.kind == LayerKind::kAttention) {
        l.attention = AttentionWeights{.q = b.matrix(p + "attn_q.weight"),
                                       .k = b.matrix(p + "attn_k.weight"),
                                       .v = b.matrix(p + "attn_v.weight"),
                                       .out = b.matrix(p + "attn_output.weight"),
                                       .q_norm = b.f32(p + "attn_q_norm.weight"),
                                       .k_norm = b.f32(p + "attn_k_norm.weight")};
      } else {
        l.delta_net = DeltaNetWeights{.qkv = b.matrix(p + "attn_qkv.weight"),
                                      .gate = b.matrix(p + "attn_gate.weight"),
                                      .beta = b.matrix(p + "ssm_beta.weight"),
                                      .alpha = b.matrix(p + "ssm_alpha.weight"),
                                      .out = b.matrix(p + "ssm_out.weight"),
                                      .conv = b.f32(p + "ssm_conv1d.weight"),
                                      .dt_bias = b.f32(p + "ssm_dt.bias"),
                                      .a = b.f32(p + "ssm_a"),
                                      .norm = b.f32(p + "ssm_norm.weight")};
      }
      l.moe = MoeWeights{.router = b.matrix(p + "ffn_gate_inp.weight"),
                         .gate_exps = b.matrix(p + "ffn_gate_exps.weight"),
                         .up_exps = b.matrix(p + "ffn_up_exps.weight"),
                         .down_exps = b.matrix(p + "ffn_down_exps.weight"),
                         .has_shared = true,
                         .shared_gate_inp = b.matrix(p + "ffn_gate_inp_shexp.weight"),
                         .gate_shexp = b.matrix(p + "ffn_gate_shexp.weight"),
                         .up_shexp = b.matrix(p + "ffn_up_shexp.weight"),
                         .down_shexp = b.matrix(p + "ffn_down_shexp.weight")};
      m->layers_.push_back(l);
    }
    if (!b.status().is_ok()) return b.status();
    m->attention_shape_ = AttentionShape{.n_embd = hp.n_embd,
                                         .n_head = hp.n_head,
                                         .n_head_kv = hp.n_head_kv,
                                         .head_dim = hp.head_dim_k,
                                         .n_rot = hp.n_rot,
                                         .rope_base = hp.rope_base,
                                         .rms_eps = hp.rms_eps,
                                         .output_gate = true};
    m->delta_net_shape_ = DeltaNetShape{.n_embd = hp.n_embd,
                                        .d_conv = hp.ssm_d_conv,
                                        .d_state = hp.ssm_d_state,
                                        .n_k_heads = hp.ssm_n_group,
                                        .n_v_heads = hp.ssm_dt_rank,
                                        .rms_eps = hp.rms_eps};
    m->moe_shape_ = MoeShape{.n_embd = hp.n_embd,
                             .n_expert = hp.n_expert,
                             .n_expert_used = hp.n_expert_used,
                             .n_ff_exp = hp.n_ff_exp,
                             .n_ff_shexp = hp.n_ff_shexp};
    return std::unique_ptr<Model>(std::move(m));
  }

  std::vector<LayerStateSpec> state_specs() const override {
    std::vector<LayerStateSpec> specs;
    for (const auto& l : layers_) {
      if (l.kind == LayerKind::kAttention) {
        specs.push_back({.k_row_elems = hp_.n_head_kv * hp_.head_dim_k, .v_row_elems = hp_.n_head_kv * hp_.head_dim_v});
      } else {
        specs.push_back({.conv_state_elems = delta_net_shape_.conv_state_elems(),
                         .ssm_state_elems = delta_net_shape_.ssm_state_elems()});
      }
    }
    return specs;
  }

  void forward_layer(int il, LayerExec& e) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    e.rms_norm(Act::kX, l.attn_norm, Act::kH);
    if (l.kind == LayerKind::kAttention) {
      e.attention(l.attention, attention_shape_, Act::kH, il, Act::kMix);
    } else {
      e.delta_net(l.delta_net, delta_net_shape_, Act::kH, il, Act::kMix);
    }
    e.add(Act::kX, Act::kMix);
    e.mark_after_mixer();
    e.rms_norm(Act::kX, l.post_attention_norm, Act::kH);
    e.moe(l.moe, moe_shape_, Act::kH, Act::kMix);  // routed experts + gated shared expert
    e.add(Act::kX, Act::kMix);
  }

 private:
  Qwen35MoeModel() = default;
  std::vector<Layer> layers_;
  AttentionShape attention_shape_;
  DeltaNetShape delta_net_shape_;
  MoeShape moe_shape_;
};

}  // namespace

Result<std::unique_ptr<Model>> create_qwen35moe_model(const gguf::ModelFile& file, const HParams& hp,
                                                      const ModelOptions& options) {
  return create_decoder_model<Qwen35MoeModel>(file, hp, options);
}

}  // namespace moetier
