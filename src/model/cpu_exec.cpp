#include "model/cpu_exec.h"

#include <algorithm>

#include "cpu/ops.h"

namespace moetier {

void CpuExec::begin(float* x, std::span<const SeqRows> seqs, ThreadPool& pool, Profiler* profiler,
                    float* after_mixer) {
  x_ = x;
  seqs_ = seqs;
  n_ = seqs.back().row_begin + seqs.back().n_rows;
  pool_ = &pool;
  profiler_ = profiler;
  after_mixer_ = after_mixer;
  h_.resize(static_cast<size_t>(n_ * n_embd_));
  mix_.resize(static_cast<size_t>(n_ * n_embd_));
}

float* CpuExec::rows(Act a) {
  switch (a) {
    case Act::kX: return x_;
    case Act::kH: return h_.data();
    case Act::kMix: return mix_.data();
  }
  return nullptr;
}

void CpuExec::rms_norm(Act in, const float* w, Act out) {
  ScopedProfile p(profiler_, ProfileBlock::kNorm);
  const float* x = rows(in);
  float* o = rows(out);
  for (int64_t t = 0; t < n_; ++t) cpu::rms_norm(x + t * n_embd_, w, n_embd_, rms_eps_, o + t * n_embd_);
}

void CpuExec::add(Act x, Act y) {
  ScopedProfile p(profiler_, ProfileBlock::kNorm);
  float* a = rows(x);
  const float* b = rows(y);
  for (int64_t i = 0; i < n_ * n_embd_; ++i) a[i] += b[i];
}

void CpuExec::mark_after_mixer() {
  if (after_mixer_) std::copy(x_, x_ + n_ * n_embd_, after_mixer_);
}

void CpuExec::attention(const AttentionWeights& w, const AttentionShape& shape, Act in, int layer, Act out) {
  ScopedProfile p(profiler_, ProfileBlock::kAttention);
  attention_block(w, shape, rows(in), seqs_, layer, rows(out), attention_scratch_, *pool_, attention_options_);
}

void CpuExec::delta_net(const DeltaNetWeights& w, const DeltaNetShape& shape, Act in, int layer, Act out) {
  ScopedProfile p(profiler_, ProfileBlock::kDeltaNet);
  delta_net_block(w, shape, rows(in), seqs_, layer, rows(out), delta_net_scratch_, *pool_, profiler_);
}

void CpuExec::moe(const MoeWeights& w, const MoeShape& shape, Act in, Act out) {
  moe_block(w, shape, rows(in), n_, rows(out), moe_scratch_, *pool_, profiler_);
}

void CpuExec::moe_routed(const MoeWeights& w, const MoeShape& shape, const float* h, MoeOptions options, float* out) {
  options.skip_shared = true;
  moe_block(w, shape, h, n_, out, moe_scratch_, *pool_, profiler_, options);
}

}  // namespace moetier
