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
// the drafter of --spec-type draft-mtp (Qwen35MoeMtpHead below, model.h's MtpHead).
#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "gguf/model_file.h"
#include "model/arch.h"
#include "cpu/ops.h"
#include "model/blocks/attention.h"
#include "model/blocks/delta_net.h"
#include "model/blocks/moe.h"
#include "model/decoder_model.h"
#include "model/cpu_exec.h"
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

// The MTP block's weights (blk.<n_layer>.*); token_embd and output are the model's.
struct MtpWeights {
  cpu::WeightMatrix eh_proj;     // {2·n_embd, n_embd}: [embedding ; hidden] -> n_embd
  const float* enorm = nullptr;  // [n_embd], on the token embedding
  const float* hnorm = nullptr;  // [n_embd], on the incoming hidden state
  const float* attn_norm = nullptr;
  const float* post_attention_norm = nullptr;
  const float* head_norm = nullptr;  // nextn.shared_head_norm, else output_norm
  AttentionWeights attention;
  MoeWeights moe;
};

// The MTP block after its input projection, on whichever executor runs it; its KV cache is
// layer 0 of the head's own sequence.
void run_mtp_block(LayerExec& e, const MtpWeights& w, const AttentionShape& attention, const MoeShape& moe) {
  e.rms_norm(Act::kX, w.attn_norm, Act::kH);
  e.attention(w.attention, attention, Act::kH, /*layer=*/0, Act::kMix);
  e.add(Act::kX, Act::kMix);
  e.rms_norm(Act::kX, w.post_attention_norm, Act::kH);
  e.moe(w.moe, moe, Act::kH, Act::kMix);
  e.add(Act::kX, Act::kMix);
}

uint64_t matrix_bytes(const cpu::WeightMatrix& m) { return static_cast<uint64_t>(m.row_bytes * m.n_out * m.n_mat); }

class Qwen35MoeMtpHead final : public MtpHead {
 public:
  struct Params {
    MtpWeights weights;
    cpu::WeightMatrix token_embd;  // the model's, or the MTP-only file's
    cpu::WeightMatrix output;
    AttentionShape attention_shape;
    MoeShape moe_shape;
    float rms_eps;
    int64_t n_ubatch;
    bool flash_attention;
    // An MTP-only file: the head owns it and the f32 copies of its small tensors.
    std::shared_ptr<const gguf::ModelFile> file;
    std::shared_ptr<std::deque<std::vector<float>>> converted;
    // The model's LM head wherever the placement put it (DecoderModel::lm_head_rows); empty:
    // `output` on the CPU.
    std::function<Status(const float* x, int64_t n, const float* norm, float* logits, ThreadPool& pool)> lm_head;
    // The block, final norm and LM head on the GPU (DecoderModel::run_mtp_block_on_gpu) and
    // the matching sequence; empty: on the CPU.
    std::function<Status(float* x, int64_t n, SequenceState& seq, const float* head_norm, float* hidden_out,
                         float* logits_last, ThreadPool& pool)>
        gpu_block;
    std::function<Result<SequenceState>(const LayerStateSpec& spec, const KvCacheOptions& options)> new_gpu_sequence;
  };
  explicit Qwen35MoeMtpHead(Params p) : p_(std::move(p)), exec_(p_.attention_shape.n_embd, p_.rms_eps) {}

  Result<SequenceState> new_sequence(const KvCacheOptions& options) const override {
    const AttentionShape& a = p_.attention_shape;
    const LayerStateSpec spec{.k_row_elems = a.n_head_kv * a.head_dim, .v_row_elems = a.n_head_kv * a.head_dim};
    if (p_.new_gpu_sequence) return p_.new_gpu_sequence(spec, options);
    return SequenceState::create({spec}, options);
  }

  Status forward(std::span<const int32_t> tokens, const float* hidden, SequenceState& seq, float* hidden_out,
                 float* logits_last, ThreadPool& pool) override {
    const MtpWeights& w = p_.weights;
    const int64_t d = p_.attention_shape.n_embd;
    const auto n = static_cast<int64_t>(tokens.size());
    if (n == 0) return Status::bad_input("no tokens to process");
    for (int32_t t : tokens) {
      if (t < 0 || t >= p_.output.n_out) return Status::bad_input(fmt::format("token id {} is out of range", t));
    }
    if (seq.n_past() + n > seq.n_ctx()) return Status::bad_input("the MTP head's context is full");
    exec_.set_attention_options({.flash = p_.flash_attention});
    for (int64_t begin = 0; begin < n; begin += p_.n_ubatch) {
      const int64_t c = std::min(p_.n_ubatch, n - begin);
      embedded_.resize(static_cast<size_t>(c * d));
      embed_tokens(p_.token_embd, tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(c)), embedded_.data());
      // [rmsnorm(e)·enorm ; rmsnorm(h)·hnorm] per row (llama.cpp's concat order: embedding first).
      concat_.resize(static_cast<size_t>(c * 2 * d));
      for (int64_t r = 0; r < c; ++r) {
        cpu::rms_norm(embedded_.data() + r * d, w.enorm, d, p_.rms_eps, concat_.data() + r * 2 * d);
        cpu::rms_norm(hidden + (begin + r) * d, w.hnorm, d, p_.rms_eps, concat_.data() + r * 2 * d + d);
      }
      x_.resize(static_cast<size_t>(c * d));
      cpu::matmul_f32(w.eh_proj, 0, concat_.data(), c, x_.data(), act_, pool);
      const bool last_chunk = begin + c == n;
      if (p_.gpu_block) {
        RETURN_IF_ERROR(p_.gpu_block(x_.data(), c, seq, w.head_norm, hidden_out ? hidden_out + begin * d : nullptr,
                                     last_chunk ? logits_last : nullptr, pool));
        seq.set_n_past(seq.n_past() + c);
        continue;
      }
      const SeqRows rows{.seq = &seq, .row_begin = 0, .n_rows = c};
      exec_.begin(x_.data(), std::span<const SeqRows>(&rows, 1), pool, nullptr);
      run_mtp_block(exec_, w, p_.attention_shape, p_.moe_shape);
      seq.set_n_past(seq.n_past() + c);
      if (hidden_out) {
        for (int64_t r = 0; r < c; ++r) {
          cpu::rms_norm(x_.data() + r * d, w.head_norm, d, p_.rms_eps, hidden_out + (begin + r) * d);
        }
      }
      if (logits_last && last_chunk) {
        const float* last = x_.data() + (c - 1) * d;
        if (p_.lm_head) {
          RETURN_IF_ERROR(p_.lm_head(last, 1, w.head_norm, logits_last, pool));
        } else {
          lm_head(p_.output, w.head_norm, p_.rms_eps, last, 1, logits_last, lm_head_scratch_, pool);
        }
      }
    }
    return Status::ok();
  }

  uint64_t bytes_per_token() const override {
    const MtpWeights& w = p_.weights;
    const MoeShape& m = p_.moe_shape;
    const uint64_t experts = matrix_bytes(w.moe.gate_exps) + matrix_bytes(w.moe.up_exps) + matrix_bytes(w.moe.down_exps);
    return matrix_bytes(w.eh_proj) + matrix_bytes(w.attention.q) + matrix_bytes(w.attention.k) +
           matrix_bytes(w.attention.v) + matrix_bytes(w.attention.out) + matrix_bytes(w.moe.router) +
           matrix_bytes(w.moe.shared_gate_inp) + matrix_bytes(w.moe.gate_shexp) + matrix_bytes(w.moe.up_shexp) +
           matrix_bytes(w.moe.down_shexp) + experts / static_cast<uint64_t>(m.n_expert) * static_cast<uint64_t>(m.n_expert_used) +
           matrix_bytes(p_.output) + static_cast<uint64_t>(p_.token_embd.row_bytes);
  }

 private:
  Params p_;
  CpuExec exec_;
  std::vector<float> embedded_, concat_, x_;
  cpu::QuantizedActivations act_;
  LmHeadScratch lm_head_scratch_;
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

// Binds the MTP block blk.<hp.n_layer>.*; output_norm is the fallback of the optional
// shared_head_norm. Errors: the binder's status.
MtpWeights bind_mtp(WeightBinder& b, const HParams& hp, const float* output_norm) {
  const std::string p = fmt::format("blk.{}.", hp.n_layer);
  MtpWeights w;
  w.eh_proj = b.matrix(p + "nextn.eh_proj.weight");
  w.enorm = b.f32(p + "nextn.enorm.weight");
  w.hnorm = b.f32(p + "nextn.hnorm.weight");
  w.attn_norm = b.f32(p + "attn_norm.weight");
  w.post_attention_norm = b.f32(p + "post_attention_norm.weight");
  w.head_norm = b.f32_optional(p + "nextn.shared_head_norm.weight");
  if (w.head_norm == nullptr) w.head_norm = output_norm;
  w.attention = bind_attention(b, p);
  w.moe = bind_moe(b, p);
  return w;
}


MoeShape moe_shape_of(const HParams& hp) {
  return MoeShape{.n_embd = hp.n_embd,
                  .n_expert = hp.n_expert,
                  .n_expert_used = hp.n_expert_used,
                  .n_ff_exp = hp.n_ff_exp,
                  .n_ff_shexp = hp.n_ff_shexp};
}

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
      m->mtp_ = bind_mtp(mb, hp, m->output_norm_);
      m->mtp_status_ = mb.status();
    } else {
      m->mtp_status_ = Status::bad_input(
          "--spec-type draft-mtp: this model file has no MTP block (qwen35moe.nextn_predict_layers is 0); use a "
          "GGUF converted with its MTP layer");
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
                         .ssm_state_elems = delta_net_shape_.ssm_state_elems()});
      }
    }
    return specs;
  }

  Result<std::unique_ptr<MtpHead>> mtp_head() override {
    RETURN_IF_ERROR(mtp_status_);
    return std::unique_ptr<MtpHead>(new Qwen35MoeMtpHead({.weights = mtp_,
                                                          .token_embd = token_embd_,
                                                          .output = output_,
                                                          .attention_shape = attention_shape_,
                                                          .moe_shape = moe_shape_,
                                                          .rms_eps = hp_.rms_eps,
                                                          .n_ubatch = n_ubatch(),
                                                          .flash_attention = flash_attention(),
                                                          .lm_head = [this](const float* x, int64_t n, const float* norm,
                                                                            float* logits, ThreadPool& pool) {
                                                            return lm_head_rows(x, n, norm, logits, pool);
                                                          },
                                                          .gpu_block = gpu_block(),
                                                          .new_gpu_sequence = new_gpu_sequence()}));
  }

  bool has_mtp_block() const override { return mtp_status_.is_ok(); }
  void forward_mtp_block(LayerExec& e) override { run_mtp_block(e, mtp_, attention_shape_, moe_shape_); }

  // The MTP head's GPU hooks, when the placement put the block there.
  decltype(Qwen35MoeMtpHead::Params::gpu_block) gpu_block() {
    if (!mtp_on_gpu()) return {};
    return [this](float* x, int64_t n, SequenceState& seq, const float* head_norm, float* hidden_out,
                  float* logits_last, ThreadPool& pool) {
      return run_mtp_block_on_gpu(x, n, seq, head_norm, hidden_out, logits_last, pool);
    };
  }
  decltype(Qwen35MoeMtpHead::Params::new_gpu_sequence) new_gpu_sequence() const {
    if (!mtp_on_gpu()) return {};
    return [this](const LayerStateSpec& spec, const KvCacheOptions& options) { return new_mtp_sequence(spec, options); };
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
  MtpWeights mtp_;     // valid when mtp_status_ is OK
  Status mtp_status_;  // why mtp_head() cannot be made (no MTP block, a bad tensor)
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
  if (hp.n_layer_mtp == 0) {
    return Status::bad_input(
        "--spec-type draft-mtp: the draft file has no MTP block (qwen35moe.nextn_predict_layers is 0)");
  }
  auto converted = std::make_shared<std::deque<std::vector<float>>>();
  const std::vector<TensorSpec> specs = find_arch(hp.arch)->tensor_specs(hp);
  WeightBinder b(*file, specs, *converted);
  Qwen35MoeMtpHead::Params p{.token_embd = b.matrix("token_embd.weight"),
                             .output = b.matrix("output.weight"),
                             .attention_shape = AttentionShape::of(hp),
                             .moe_shape = moe_shape_of(hp),
                             .rms_eps = hp.rms_eps,
                             .n_ubatch = options.n_ubatch,
                             .flash_attention = options.flash_attention};
  const float* output_norm = b.f32("output_norm.weight");
  p.weights = bind_mtp(b, hp, output_norm);
  RETURN_IF_ERROR(b.status());
  p.file = std::move(file);
  p.converted = std::move(converted);
  return std::unique_ptr<MtpHead>(new Qwen35MoeMtpHead(std::move(p)));
}

}  // namespace moetier
