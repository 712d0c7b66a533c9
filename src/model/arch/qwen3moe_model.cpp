// Qwen3 MoE (GGUF arch "qwen3moe"): the forward pass. Every layer is softmax attention
// (per-head q/k RMSNorm, full NEOX rotary, no output gate) followed by a routed MoE.
//
//   x = x + attn_output · attention(rope(qnorm(q)), rope(knorm(k)), v),  q,k,v from rmsnorm(x)*attn_norm
//   x = x + MoE(rmsnorm(x) * ffn_norm)
//   logits = output · (rmsnorm(x) * output_norm)
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/blocks/attention.h"
#include "model/blocks/moe.h"
#include "model/decoder_model.h"
#include "model/layer_exec.h"

namespace moetier {

namespace {

struct Layer {
  const float* attn_norm;
  const float* ffn_norm;
  AttentionWeights attention;
  MoeWeights moe;
};

class Qwen3MoeModel final : public DecoderModel {
 public:
  static Result<std::unique_ptr<Model>> create(const gguf::ModelFile& file, const HParams& hp,
                                               const std::vector<TensorSpec>& specs) {
    auto m = std::unique_ptr<Qwen3MoeModel>(new Qwen3MoeModel());
    m->hp_ = hp;
    WeightBinder b(file, specs, m->converted_);
    m->bind_embeddings(b);
    for (int il = 0; il < hp.n_layer; ++il) {
      const std::string p = fmt::format("blk.{}.", il);
      m->layers_.push_back(Layer{
          .attn_norm = b.f32(p + "attn_norm.weight"),
          .ffn_norm = b.f32(p + "ffn_norm.weight"),
          .attention = {.q = b.matrix(p + "attn_q.weight"),
                        .k = b.matrix(p + "attn_k.weight"),
                        .v = b.matrix(p + "attn_v.weight"),
                        .out = b.matrix(p + "attn_output.weight"),
                        .q_norm = b.f32(p + "attn_q_norm.weight"),
                        .k_norm = b.f32(p + "attn_k_norm.weight")},
          .moe = {.router = b.matrix(p + "ffn_gate_inp.weight"),
                  .gate_exps = b.matrix(p + "ffn_gate_exps.weight"),
                  .up_exps = b.matrix(p + "ffn_up_exps.weight"),
                  .down_exps = b.matrix(p + "ffn_down_exps.weight")}});
    }
    if (!b.status().is_ok()) return b.status();
    m->attention_shape_ = AttentionShape::of(hp);  // qwen3moe: no output gate
    m->moe_shape_ = MoeShape{.n_embd = hp.n_embd,
                             .n_expert = hp.n_expert,
                             .n_expert_used = hp.n_expert_used,
                             .n_ff_exp = hp.n_ff_exp};
    return std::unique_ptr<Model>(std::move(m));
  }

  std::vector<LayerStateSpec> state_specs() const override {
    // Keys are stored after NEOX rotary over n_rot dims (attention block), so a context shift
    // can move them by re-rotating.
    return std::vector<LayerStateSpec>(layers_.size(), {.k_row_elems = hp_.n_head_kv * hp_.head_dim_k,
                                                        .v_row_elems = hp_.n_head_kv * hp_.head_dim_v,
                                                        .head_dim = hp_.head_dim_k,
                                                        .rope_dims = hp_.n_rot,
                                                        .rope_base = hp_.rope_base});
  }

  void attach_experts(ExpertSource& source) override {
    for (size_t il = 0; il < layers_.size(); ++il) attach_expert_source(layers_[il].moe, static_cast<int>(il), source);
  }

  void forward_layer(int il, LayerExec& e) override {
    const Layer& l = layers_[static_cast<size_t>(il)];
    e.rms_norm(Act::kX, l.attn_norm, Act::kH);
    e.attention(l.attention, attention_shape_, Act::kH, il, Act::kMix);
    e.add(Act::kX, Act::kMix);
    e.mark_after_mixer();
    e.rms_norm(Act::kX, l.ffn_norm, Act::kH);
    e.moe(l.moe, moe_shape_, Act::kH, Act::kMix);
    e.add(Act::kX, Act::kMix);
  }

 private:
  Qwen3MoeModel() = default;
  std::vector<Layer> layers_;
  AttentionShape attention_shape_;
  MoeShape moe_shape_;
};

}  // namespace

Result<std::unique_ptr<Model>> create_qwen3moe_model(const gguf::ModelFile& file, const HParams& hp,
                                                     const ModelOptions& options) {
  return create_decoder_model<Qwen3MoeModel>(file, hp, options);
}

}  // namespace moetier
