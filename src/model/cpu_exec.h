// LayerExec on the CPU: the block functions of model/blocks/ on host rows, with their
// scratch buffers (reused across micro-batches: no allocation once warm).
#pragma once

#include <span>
#include <vector>

#include "core/profiler.h"
#include "core/thread_pool.h"
#include "model/layer_exec.h"

namespace moetier {

class CpuExec final : public LayerExec {
 public:
  CpuExec(int64_t n_embd, float rms_eps) : n_embd_(n_embd), rms_eps_(rms_eps) {}

  // The next layer runs on these rows: x = the residual stream [n][n_embd], n = the rows
  // `seqs` cover. after_mixer (optional, [n][n_embd]) receives mark_after_mixer()'s copy.
  void begin(float* x, std::span<const SeqRows> seqs, ThreadPool& pool, Profiler* profiler,
             float* after_mixer = nullptr);
  float* rows(Act a);
  int64_t n_rows() const { return n_; }
  // How attention() computes (-fa); the model sets it before each micro-batch.
  void set_attention_options(const AttentionOptions& options) { attention_options_ = options; }

  void rms_norm(Act in, const float* w, Act out) override;
  void add(Act x, Act y) override;
  void mark_after_mixer() override;
  void attention(const AttentionWeights& w, const AttentionShape& shape, Act in, int layer, Act out) override;
  void delta_net(const DeltaNetWeights& w, const DeltaNetShape& shape, Act in, int layer, Act out) override;
  void moe(const MoeWeights& w, const MoeShape& shape, Act in, Act out) override;

  // The routed experts only, from router logits (or a routing) computed elsewhere (the GPU):
  // out = Σ_k w_k·e_k over the pairs not computed elsewhere (options; the shared expert is
  // always left out).
  void moe_routed(const MoeWeights& w, const MoeShape& shape, const float* h, MoeOptions options, float* out);

 private:
  int64_t n_embd_;
  float rms_eps_;
  float* x_ = nullptr;
  float* after_mixer_ = nullptr;
  int64_t n_ = 0;
  std::span<const SeqRows> seqs_;
  ThreadPool* pool_ = nullptr;
  Profiler* profiler_ = nullptr;
  AttentionOptions attention_options_;
  std::vector<float> h_, mix_;
  AttentionScratch attention_scratch_;
  DeltaNetScratch delta_net_scratch_;
  MoeScratch moe_scratch_;
};

}  // namespace moetier
