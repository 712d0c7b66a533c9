#include "model/decoder_model.h"

#include <algorithm>

#include "cpu/ops.h"

namespace moetier {

void DecoderModel::bind_embeddings(WeightBinder& b) {
  token_embd_ = b.matrix("token_embd.weight");
  output_ = b.matrix("output.weight");
  output_norm_ = b.f32("output_norm.weight");
}

void DecoderModel::forward_ubatch(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                                  std::span<const int64_t> logit_rows, float* logits_out, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t d = hp_.n_embd;
  x_.resize(static_cast<size_t>(n * d));
  {
    ScopedProfile p(profiler(), ProfileBlock::kEmbedding);
    embed_tokens(token_embd_, tokens, x_.data());
  }
  if (!cpu_exec_) cpu_exec_ = std::make_unique<CpuExec>(hp_.n_embd, hp_.rms_eps);
  for (int il = 0; il < hp_.n_layer; ++il) {
    cpu_exec_->begin(x_.data(), seqs, pool, profiler());
    forward_layer(il, *cpu_exec_);
  }
  if (logit_rows.empty()) return;
  ScopedProfile p(profiler(), ProfileBlock::kLmHead);
  const int64_t m = static_cast<int64_t>(logit_rows.size());
  const float* rows = x_.data() + logit_rows[0] * d;
  bool contiguous = true;
  for (int64_t i = 1; i < m; ++i) contiguous = contiguous && logit_rows[i] == logit_rows[0] + i;
  if (!contiguous) {
    logit_x_.resize(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(x_.data() + logit_rows[i] * d, d, logit_x_.data() + i * d);
    }
    rows = logit_x_.data();
  }
  lm_head(output_, output_norm_, hp_.rms_eps, rows, m, logits_out, lm_head_scratch_, pool);
}

}  // namespace moetier
