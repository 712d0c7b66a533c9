#include "model/mtp_head.h"

#include <algorithm>

#include <fmt/format.h>

#include "cpu/ops.h"
#include "model/blocks/embedding.h"
#include "model/cpu_exec.h"
#include "model/decoder_model.h"

namespace moetier {

namespace {

uint64_t matrix_bytes(const cpu::WeightMatrix& m) { return static_cast<uint64_t>(m.row_bytes * m.n_out * m.n_mat); }

}  // namespace

NextnWeights bind_nextn(WeightBinder& b, const HParams& hp, const float* output_norm) {
  const std::string p = fmt::format("blk.{}.", hp.n_layer);
  NextnWeights w;
  w.eh_proj = b.matrix(p + "nextn.eh_proj.weight");
  w.enorm = b.f32(p + "nextn.enorm.weight");
  w.hnorm = b.f32(p + "nextn.hnorm.weight");
  w.head_norm = b.f32_optional(p + "nextn.shared_head_norm.weight");
  if (w.head_norm == nullptr) w.head_norm = output_norm;
  return w;
}

// The head over an MtpBlock. With `model` set, the block and the LM head run where the
// model's placement put them; without, everything runs on the CPU and the head owns what
// it reads (a separate file).
class MtpHeadRunner final : public MtpHead {
 public:
  struct Params {
    NextnWeights nextn;
    const MtpBlock* block = nullptr;
    cpu::WeightMatrix token_embd;  // the model's, or the MTP-only file's
    cpu::WeightMatrix output;
    int64_t n_embd = 0;
    float rms_eps = 0;
    int64_t n_ubatch = 512;
    bool flash_attention = false;
    DecoderModel* model = nullptr;  // the model this head belongs to (nullptr: a separate file)
    // A separate file: the head keeps it, the f32 copies of its small tensors and its block.
    std::shared_ptr<const gguf::ModelFile> file;
    std::shared_ptr<std::deque<std::vector<float>>> converted;
    std::unique_ptr<MtpBlock> owned_block;
  };
  explicit MtpHeadRunner(Params p)
      : p_(std::move(p)), on_gpu_(p_.model != nullptr && p_.model->mtp_on_gpu()), exec_(p_.n_embd, p_.rms_eps) {}

  Result<SequenceState> new_sequence(const KvCacheOptions& options) const override {
    const LayerStateSpec spec = p_.block->state_spec();
    if (on_gpu_) return p_.model->new_mtp_sequence(spec, options);
    return SequenceState::create({spec}, options);
  }

  Status forward(std::span<const int32_t> tokens, const float* hidden, SequenceState& seq, float* hidden_out,
                 float* logits_last, ThreadPool& pool) override {
    RETURN_IF_ERROR(check_rows(tokens, seq));
    const NextnWeights& w = p_.nextn;
    const int64_t d = p_.n_embd;
    const auto n = static_cast<int64_t>(tokens.size());
    for (int64_t begin = 0; begin < n; begin += p_.n_ubatch) {
      const int64_t c = std::min(p_.n_ubatch, n - begin);
      const bool last_chunk = begin + c == n;
      const Entry chunk{.tokens = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(c)),
                        .hidden = hidden + begin * d,
                        .seq = &seq,
                        .hidden_out = hidden_out ? hidden_out + begin * d : nullptr,
                        .logits_last = last_chunk ? logits_last : nullptr};
      if (!on_gpu_) {
        RETURN_IF_ERROR(run_on_cpu({&chunk, 1}, pool));
        continue;
      }
      const Segment rows{.tokens = chunk.tokens, .hidden = chunk.hidden};
      project_inputs({&rows, 1}, c, pool);
      RETURN_IF_ERROR(p_.model->run_mtp_block_on_gpu(x_.data(), c, seq, w.head_norm, chunk.hidden_out,
                                                     chunk.logits_last, pool));
      seq.set_n_past(seq.n_past() + c);
    }
    return Status::ok();
  }

  Status forward_batch(std::span<const Entry> entries, ThreadPool& pool) override {
    int64_t total = 0;
    for (const Entry& e : entries) total += static_cast<int64_t>(e.tokens.size());
    // One pass on the CPU while every row fits one micro-batch; else (and on the GPU, whose
    // block runs one sequence at a time) entry by entry, as forward() does.
    if (on_gpu_ || entries.size() < 2 || total > p_.n_ubatch) return MtpHead::forward_batch(entries, pool);
    for (size_t i = 0; i < entries.size(); ++i) {
      RETURN_IF_ERROR(check_rows(entries[i].tokens, *entries[i].seq));
      for (size_t j = 0; j < i; ++j) CHECK_MSG(entries[j].seq != entries[i].seq, "a sequence twice in one MTP batch");
    }
    return run_on_cpu(entries, pool);
  }

  bool shares_weights_with(const MtpHead& other) const override {
    const auto* o = dynamic_cast<const MtpHeadRunner*>(&other);
    return o != nullptr && o->p_.block == p_.block && o->p_.output.data == p_.output.data &&
           o->p_.token_embd.data == p_.token_embd.data && o->on_gpu_ == on_gpu_;
  }

  uint64_t bytes_per_token() const override {
    return matrix_bytes(p_.nextn.eh_proj) + p_.block->bytes_per_token() + matrix_bytes(p_.output) +
           static_cast<uint64_t>(p_.token_embd.row_bytes);
  }

 private:
  // Rows of one sequence: its tokens and, per token, the hidden row it pairs with.
  struct Segment {
    std::span<const int32_t> tokens;
    const float* hidden = nullptr;  // [tokens.size()][n_embd]
  };
  // x_ [n_rows][n_embd] = eh_proj · [rmsnorm(embed(token))·enorm ; rmsnorm(hidden)·hnorm] for
  // the segments' rows in order (llama.cpp's concat order: embedding first).
  void project_inputs(std::span<const Segment> segments, int64_t n_rows, ThreadPool& pool) {
    const NextnWeights& w = p_.nextn;
    const int64_t d = p_.n_embd;
    embedded_.resize(static_cast<size_t>(n_rows * d));
    concat_.resize(static_cast<size_t>(n_rows * 2 * d));
    int64_t row = 0;
    for (const Segment& seg : segments) {
      embed_tokens(p_.token_embd, seg.tokens, embedded_.data() + row * d);
      for (int64_t r = 0; r < static_cast<int64_t>(seg.tokens.size()); ++r, ++row) {
        cpu::rms_norm(embedded_.data() + row * d, w.enorm, d, p_.rms_eps, concat_.data() + row * 2 * d);
        cpu::rms_norm(seg.hidden + r * d, w.hnorm, d, p_.rms_eps, concat_.data() + row * 2 * d + d);
      }
    }
    x_.resize(static_cast<size_t>(n_rows * d));
    cpu::matmul_f32(w.eh_proj, 0, concat_.data(), n_rows, x_.data(), act_, pool);
  }
  // What forward() refuses before touching the sequence.
  Status check_rows(std::span<const int32_t> tokens, const SequenceState& seq) const {
    if (tokens.empty()) return Status::bad_input("no tokens to process");
    for (int32_t t : tokens) {
      if (t < 0 || t >= p_.output.n_out) return Status::bad_input(fmt::format("token id {} is out of range", t));
    }
    if (seq.n_past() + static_cast<int64_t>(tokens.size()) > seq.n_ctx()) {
      return Status::bad_input("the MTP head's context is full");
    }
    return Status::ok();
  }
  // The entries' rows (checked, at most n_ubatch in all, distinct sequences) through the head
  // on the CPU in one pass: the input projection, the block over one SeqRows per entry, the
  // final norm into each hidden_out, and the LM head over the last row of every entry that
  // asks for logits, all of them at once.
  Status run_on_cpu(std::span<const Entry> entries, ThreadPool& pool) {
    const int64_t d = p_.n_embd;
    exec_.set_attention_options({.flash = p_.flash_attention});
    rows_.clear();
    segments_.clear();
    int64_t total = 0;
    for (const Entry& e : entries) {
      const auto n = static_cast<int64_t>(e.tokens.size());
      rows_.push_back({.seq = e.seq, .row_begin = total, .n_rows = n});
      segments_.push_back({.tokens = e.tokens, .hidden = e.hidden});
      total += n;
    }
    project_inputs(segments_, total, pool);
    exec_.begin(x_.data(), rows_, pool, nullptr);
    p_.block->forward(exec_);
    last_rows_.clear();
    // Where the logits go and the row they come from when one entry asks for them (no copies).
    float* only_logits = nullptr;
    const float* only_row = nullptr;
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      const SeqRows& r = rows_[i];
      e.seq->set_n_past(e.seq->n_past() + r.n_rows);
      if (e.hidden_out) {
        for (int64_t k = 0; k < r.n_rows; ++k) {
          cpu::rms_norm(x_.data() + (r.row_begin + k) * d, p_.nextn.head_norm, d, p_.rms_eps, e.hidden_out + k * d);
        }
      }
      if (e.logits_last) {
        const float* last = x_.data() + (r.row_begin + r.n_rows - 1) * d;
        last_rows_.insert(last_rows_.end(), last, last + d);
        only_logits = e.logits_last;
        only_row = last;
      }
    }
    const auto m = static_cast<int64_t>(last_rows_.size()) / d;
    if (m == 0) return Status::ok();
    if (m == 1) return lm_head_of(only_row, 1, only_logits, pool);
    const int64_t n_vocab = p_.output.n_out;
    batch_logits_.resize(static_cast<size_t>(m * n_vocab));
    RETURN_IF_ERROR(lm_head_of(last_rows_.data(), m, batch_logits_.data(), pool));
    int64_t k = 0;
    for (const Entry& e : entries) {
      if (e.logits_last) std::copy_n(batch_logits_.data() + k++ * n_vocab, n_vocab, e.logits_last);
    }
    return Status::ok();
  }
  // logits [n][n_vocab] of rows x [n][n_embd] after the head's final norm, where the LM head is placed.
  Status lm_head_of(const float* x, int64_t n, float* logits, ThreadPool& pool) {
    if (p_.model) return p_.model->lm_head_rows(x, n, p_.nextn.head_norm, logits, pool);
    lm_head(p_.output, p_.nextn.head_norm, p_.rms_eps, x, n, logits, lm_head_scratch_, pool);
    return Status::ok();
  }

  Params p_;
  bool on_gpu_;  // the model's placement put the block on the GPU
  CpuExec exec_;
  std::vector<float> embedded_, concat_, x_;
  std::vector<SeqRows> rows_;
  std::vector<Segment> segments_;
  std::vector<float> last_rows_, batch_logits_;
  cpu::QuantizedActivations act_;
  LmHeadScratch lm_head_scratch_;
};

std::unique_ptr<MtpHead> DecoderModel::make_mtp_head() {
  return std::make_unique<MtpHeadRunner>(MtpHeadRunner::Params{.nextn = mtp_nextn_,
                                                               .block = mtp_block_.get(),
                                                               .token_embd = token_embd_,
                                                               .output = output_,
                                                               .n_embd = hp_.n_embd,
                                                               .rms_eps = hp_.rms_eps,
                                                               .n_ubatch = n_ubatch(),
                                                               .flash_attention = flash_attention(),
                                                               .model = this});
}

Result<std::unique_ptr<MtpHead>> open_mtp_head(std::shared_ptr<const gguf::ModelFile> file, const HParams& hp,
                                               const ModelOptions& options, const MtpBlockBinder& bind_block) {
  if (hp.n_layer_mtp == 0) {
    return Status::bad_input(
        fmt::format("--spec-type draft-mtp: the draft file has no MTP block ({}.nextn_predict_layers is 0)", hp.arch));
  }
  auto converted = std::make_shared<std::deque<std::vector<float>>>();
  const std::vector<TensorSpec> specs = find_arch(hp.arch)->tensor_specs(hp);
  WeightBinder b(*file, specs, *converted);
  MtpHeadRunner::Params p{.token_embd = b.matrix("token_embd.weight"),
                          .output = b.matrix("output.weight"),
                          .n_embd = hp.n_embd,
                          .rms_eps = hp.rms_eps,
                          .n_ubatch = options.n_ubatch,
                          .flash_attention = options.flash_attention};
  const float* output_norm = b.f32("output_norm.weight");
  p.nextn = bind_nextn(b, hp, output_norm);
  p.owned_block = bind_block(b, fmt::format("blk.{}.", hp.n_layer));
  RETURN_IF_ERROR(b.status());
  p.block = p.owned_block.get();
  p.file = std::move(file);
  p.converted = std::move(converted);
  return std::unique_ptr<MtpHead>(new MtpHeadRunner(std::move(p)));
}

}  // namespace moetier
