#include "model/decoder_model.h"

#include "cpu/ops.h"

namespace moetier {

void DecoderModel::bind_embeddings(WeightBinder& b) {
  token_embd_ = b.matrix("token_embd.weight");
  output_ = b.matrix("output.weight");
  output_norm_ = b.f32("output_norm.weight");
}

void DecoderModel::norm_rows(const float* x, const float* w, int64_t n, float* out) const {
  ScopedProfile p(profiler(), ProfileBlock::kNorm);
  const int64_t d = hp_.n_embd;
  for (int64_t t = 0; t < n; ++t) cpu::rms_norm(x + t * d, w, d, hp_.rms_eps, out + t * d);
}

void DecoderModel::add_rows(float* x, const float* y, int64_t n) const {
  ScopedProfile p(profiler(), ProfileBlock::kNorm);
  for (int64_t i = 0; i < n * hp_.n_embd; ++i) x[i] += y[i];
}

void DecoderModel::forward_ubatch(std::span<const int32_t> tokens, SequenceState& seq, LogitRows rows,
                                  float* logits_out, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t d = hp_.n_embd;
  x_.resize(static_cast<size_t>(n * d));
  h_.resize(static_cast<size_t>(n * d));
  mix_.resize(static_cast<size_t>(n * d));
  {
    ScopedProfile p(profiler(), ProfileBlock::kEmbedding);
    embed_tokens(token_embd_, tokens, x_.data());
  }
  for (int il = 0; il < hp_.n_layer; ++il) forward_layer(il, x_.data(), n, seq, nullptr, pool);
  ScopedProfile p(profiler(), ProfileBlock::kLmHead);
  if (rows == LogitRows::kAll) {
    lm_head(output_, output_norm_, hp_.rms_eps, x_.data(), n, logits_out, lm_head_scratch_, pool);
  } else if (rows == LogitRows::kLast) {
    lm_head(output_, output_norm_, hp_.rms_eps, x_.data() + (n - 1) * d, 1, logits_out, lm_head_scratch_, pool);
  }
}

}  // namespace moetier
