// Qwen3.5/3.6 MoE (GGUF arch "qwen35moe"): the forward pass. Every
// full_attention_interval-th layer is gated softmax attention, the others Gated DeltaNet;
// every layer ends in a routed MoE with a sigmoid-gated shared expert.
//
//   h  = rmsnorm(x) * attn_norm
//   x  = x + (GatedAttention(h) or GatedDeltaNet(h))
//   h2 = rmsnorm(x) * post_attention_norm
//   x  = x + MoE(h2) + sigmoid(shexp_gate · h2) * SharedExpert(h2)
//   logits = output · (rmsnorm(x) * output_norm)
//
// The trailing MTP ("nextn") block, when the file has one, is not part of this pass; it is
// the drafter of --spec-type draft-mtp (Qwen35MoeMtpBlock below in model/mtp_head.h's frame).
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cpu/ops.h"
#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/blocks/attention.h"
#include "model/blocks/delta_net.h"
#include "model/blocks/moe.h"
#include "model/cpu_exec.h"
#include "model/decoder_model.h"
#include "model/layer_exec.h"
#include "model/mtp_head.h"

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

AttentionWeights bind_attention(WeightBinder& b, const std::string& p) {
  return AttentionWeights{.q = b.matrix(p + "attn_q.weight"),
                          .k = b.matrix(p + "attn_k.weight"),
                          .v = b.matrix(p + "attn_v.weight"),
                          .out = b.matrix(p + "attn_output.weight"),
                          .q_norm = b.f32(p + "attn_q_norm.weight"),
                          .k_norm = b.f32(p + "attn_k_norm.weight")};
}

MoeWeights bind_moe(WeightBinder& b, const std::string& p) {
  return MoeWeights{.router = b.matrix(p + "ffn_gate_inp.weight"),
                    .gate_exps = b.matrix(p + "ffn_gate_exps.weight"),
                    .up_exps = b.matrix(p + "ffn_up_exps.weight"),
                    .down_exps = b.matrix(p + "ffn_down_exps.weight"),
                    .has_shared = true,
                    .shared_gate_inp = b.matrix(p + "ffn_gate_inp_shexp.weight"),
                    .gate_shexp = b.matrix(p + "ffn_gate_shexp.weight"),
                    .up_shexp = b.matrix(p + "ffn_up_shexp.weight"),
                    .down_shexp = b.matrix(p + "ffn_down_shexp.weight")};
}

MoeShape moe_shape_of(const HParams& hp) {
  return MoeShape{.n_embd = hp.n_embd,
                  .n_expert = hp.n_expert,
                  .n_expert_used = hp.n_expert_used,
                  .n_ff_exp = hp.n_ff_exp,
                  .n_ff_shexp = hp.n_ff_shexp};
}

uint64_t matrix_bytes(const cpu::WeightMatrix& m) { return static_cast<uint64_t>(m.row_bytes * m.n_out * m.n_mat); }

// The MTP block after its input projection (model/mtp_head.h): a gated attention layer and
// the MoE with its shared expert, as a full layer without the DeltaNet choice.
class Qwen35MoeMtpBlock final : public MtpBlock {
 public:
  static std::unique_ptr<MtpBlock> bind(WeightBinder& b, const std::string& p, const HParams& hp) {
    auto block = std::make_unique<Qwen35MoeMtpBlock>();
    block->attn_norm_ = b.f32(p + "attn_norm.weight");
    block->post_attention_norm_ = b.f32(p + "post_attention_norm.weight");
    block->attention_ = bind_attention(b, p);
    block->moe_ = bind_moe(b, p);
    block->attention_shape_ = AttentionShape::of(hp);
    block->moe_shape_ = moe_shape_of(hp);
    return block;
  }

  void forward(LayerExec& e) const override {
    e.rms_norm(Act::kX, attn_norm_, Act::kH);
    e.attention(attention_, attention_shape_, Act::kH, /*layer=*/0, Act::kMix);
    e.add(Act::kX, Act::kMix);
    e.rms_norm(Act::kX, post_attention_norm_, Act::kH);
    e.moe(moe_, moe_shape_, Act::kH, Act::kMix);
    e.add(Act::kX, Act::kMix);
  }

  LayerStateSpec state_spec() const override {
    const AttentionShape& a = attention_shape_;
    return {.k_row_elems = a.n_head_kv * a.head_dim, .v_row_elems = a.n_head_kv * a.head_dim};
  }

  uint64_t bytes_per_token() const override {
    const MoeWeights& m = moe_;
    const uint64_t experts = matrix_bytes(m.gate_exps) + matrix_bytes(m.up_exps) + matrix_bytes(m.down_exps);
    return matrix_bytes(attention_.q) + matrix_bytes(attention_.k) + matrix_bytes(attention_.v) +
           matrix_bytes(attention_.out) + matrix_bytes(m.router) + matrix_bytes(m.shared_gate_inp) +
           matrix_bytes(m.gate_shexp) + matrix_bytes(m.up_shexp) + matrix_bytes(m.down_shexp) +
           experts / static_cast<uint64_t>(moe_shape_.n_expert) * static_cast<uint64_t>(moe_shape_.n_expert_used);
  }

 private:
  const float* attn_norm_ = nullptr;
  const float* post_attention_norm_ = nullptr;
  AttentionWeights attention_;
  MoeWeights moe_;
  AttentionShape attention_shape_;
  MoeShape moe_shape_;
};

bool is_mtp_only(const gguf::ModelFile& file, const HParams& hp) {
  return hp.n_layer_mtp > 0 && file.header().find_tensor("blk.0.attn_norm.weight") == nullptr;
}

class Qwen35MoeModel final : public DecoderModel {
 public:
  static Result<std::unique_ptr<Model>> create(const gguf::ModelFile& file, const HParams& hp,
                                               const std::vector<TensorSpec>& specs) {
    if (is_mtp_only(file, hp)) {
      return Status::bad_input(
          "this is an MTP-only GGUF (the MTP layer without the model's layers): give it as the draft of the full "
          "model, -md FILE --spec-type draft-mtp");
    }
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
        l.attention = bind_attention(b, p);
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
      l.moe = bind_moe(b, p);
      m->layers_.push_back(l);
    }
    if (!b.status().is_ok()) return b.status();
    if (hp.n_layer_mtp > 0) {
      // Bound apart: a malformed MTP block fails only --spec-type draft-mtp (as llama.cpp,
      // which loads the block only when asked to), not the model.
      WeightBinder mb(file, specs, m->converted_);
      const NextnWeights nextn = bind_nextn(mb, hp, m->output_norm_);
      auto block = Qwen35MoeMtpBlock::bind(mb, fmt::format("blk.{}.", hp.n_layer), hp);
      if (mb.status().is_ok()) {
        m->set_mtp(nextn, std::move(block));
      } else {
        m->set_mtp_unavailable(mb.status());
      }
    } else {
      m->set_mtp_unavailable(Status::bad_input(
          "--spec-type draft-mtp: this model file has no MTP block (qwen35moe.nextn_predict_layers is 0); use a "
          "GGUF converted with its MTP layer"));
    }
    m->attention_shape_ = AttentionShape::of(hp);
    m->delta_net_shape_ = DeltaNetShape{.n_embd = hp.n_embd,
                                        .d_conv = hp.ssm_d_conv,
                                        .d_state = hp.ssm_d_state,
                                        .n_k_heads = hp.ssm_n_group,
                                        .n_v_heads = hp.ssm_dt_rank,
                                        .rms_eps = hp.rms_eps};
    // The conv taps rearranged once for the CPU's conv (the file's layout stays for the GPU).
    for (Layer& l : m->layers_) {
      if (l.kind == LayerKind::kAttention) continue;
      const int64_t ch = m->delta_net_shape_.channels();
      m->converted_.push_back(conv_by_tap(l.delta_net.conv, ch, hp.ssm_d_conv));
      l.delta_net.conv_by_tap = m->converted_.back().data();
    }
    m->moe_shape_ = moe_shape_of(hp);
    return std::unique_ptr<Model>(std::move(m));
  }

  std::vector<LayerStateSpec> state_specs() const override {
    std::vector<LayerStateSpec> specs;
    for (const auto& l : layers_) {
      if (l.kind == LayerKind::kAttention) {
        specs.push_back({.k_row_elems = hp_.n_head_kv * hp_.head_dim_k, .v_row_elems = hp_.n_head_kv * hp_.head_dim_v});
      } else {
        specs.push_back({.conv_state_elems = delta_net_shape_.conv_state_elems(),
                         .ssm_state_elems = delta_net_shape_.ssm_state_elems(),
                         .ssm_heads = delta_net_shape_.n_v_heads,
                         .ssm_d_k = delta_net_shape_.d_state,
                         .ssm_d_v = delta_net_shape_.d_state});
      }
    }
    return specs;
  }

  void attach_experts(ExpertSource& source) override {
    for (size_t il = 0; il < layers_.size(); ++il) attach_expert_source(layers_[il].moe, static_cast<int>(il), source);
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

// An MTP head from a separate GGUF: an MTP-only file (what llama.cpp's converter writes with
// --mtp: token_embd, output_norm, output and the MTP block) or a full file with an MTP block.
Result<std::unique_ptr<MtpHead>> create_qwen35moe_mtp_head(std::shared_ptr<const gguf::ModelFile> file,
                                                          const HParams& hp, const ModelOptions& options) {
  return open_mtp_head(std::move(file), hp, options, [&hp](WeightBinder& b, const std::string& prefix) {
    return Qwen35MoeMtpBlock::bind(b, prefix, hp);
  });
}

}  // namespace moetier
