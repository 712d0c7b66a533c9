// The frame shared by decoder-only architectures: token embedding → compute layers →
// final RMSNorm → LM head. An architecture file derives from it, binds its layer weights
// and writes forward_layer() as straight-line code over the named blocks.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "cpu/matmul.h"
#include "model/blocks/embedding.h"
#include "model/cpu_exec.h"
#include "model/gpu_backend.h"
#include "model/model.h"
#include "model/mtp_head.h"
#include "model/weights.h"

namespace moetier {

class DecoderModel : public Model {
 public:
  const HParams& hparams() const override { return hp_; }
  Result<SequenceState> new_sequence(const KvCacheOptions& options) const final;
  Status place_on_gpu(const GpuPlacement& placement) final;
  std::optional<GpuMemoryReport> gpu_memory() const final;
  GpuCensus take_gpu_census() final { return gpu_ ? gpu_->take_census() : GpuCensus{}; }
  GpuExpertCacheStats gpu_expert_cache_stats() const final { return gpu_ ? gpu_->expert_cache_stats() : GpuExpertCacheStats{}; }
  void set_gpu_timestamps(bool on) final {
    if (gpu_) gpu_->set_timestamps(on);
  }
  std::string gpu_backend_name() const final { return gpu_ ? gpu_->describe() : std::string{}; }
  Status forward_layer_placed(int layer, float* x, int64_t n, SequenceState& seq, ThreadPool& pool) final;
  // The MTP head over the block set_mtp() gave (model/mtp_head.h), or why there is none.
  Result<std::unique_ptr<MtpHead>> mtp_head() final;

 protected:
  // Binds token_embd.weight, output.weight and output_norm.weight.
  void bind_embeddings(WeightBinder& binder);

  // An architecture with an MTP ("nextn") block gives its binding here, or why it cannot
  // be used (no block in the file, a malformed tensor: only --spec-type draft-mtp fails).
  void set_mtp(NextnWeights nextn, std::unique_ptr<MtpBlock> block) {
    mtp_nextn_ = nextn;
    mtp_block_ = std::move(block);
  }
  void set_mtp_unavailable(Status why) { mtp_status_ = std::move(why); }

  Status forward_ubatch(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                        std::span<const int64_t> logit_rows, float* logits_out, float* hidden_out,
                        ThreadPool& pool) override;

  HParams hp_;
  std::deque<std::vector<float>> converted_;  // f32 copies of small tensors stored in other types
  cpu::WeightMatrix token_embd_, output_;
  const float* output_norm_ = nullptr;
  // The residual stream of the current micro-batch, [n][n_embd]; reused across calls.
  std::vector<float> x_;
  std::unique_ptr<CpuExec> cpu_exec_;
  // Layers placed on the GPU (place_on_gpu); null: everything on the CPU.
  std::unique_ptr<GpuBackend> gpu_;
  GpuPlacement placement_;
  std::vector<float> logit_x_;  // [logit rows][n_embd]: the rows the LM head reads, gathered
  LmHeadScratch lm_head_scratch_;
  LmHeadScratch mtp_lm_head_scratch_;
  std::vector<int64_t> lm_head_rows_;

 private:
  friend class MtpHeadRunner;  // model/mtp_head.cpp: runs the block and LM head where they are placed
  bool has_mtp_block() const { return mtp_block_ != nullptr; }
  bool mtp_on_gpu() const { return gpu_ && placement_.mtp_on_gpu; }
  std::unique_ptr<MtpHead> make_mtp_head();
  // logits [n][n_vocab] = output · rmsnorm(x[r]) · norm for host rows x [n][n_embd] (n ≤
  // n_ubatch), on the device the placement gives the LM head: the MTP head's logits, on the
  // GPU when the output layer is there (its 0.4 GB read dominates a drafted token).
  Status lm_head_rows(const float* x, int64_t n, const float* norm, float* logits, ThreadPool& pool);
  // The MTP block's sequence (its KV cache, layer 0) and the block, final norm and LM head on
  // rows x [n][n_embd] (host, updated in place) when the placement put the block on the GPU;
  // hidden_out [n][n_embd] and the last row's logits (each may be null).
  Result<SequenceState> new_mtp_sequence(const LayerStateSpec& spec, const KvCacheOptions& options) const;
  Status run_mtp_block_on_gpu(float* x, int64_t n, SequenceState& seq, const float* head_norm, float* hidden_out,
                              float* logits_last, ThreadPool& pool);

  NextnWeights mtp_nextn_;
  std::unique_ptr<MtpBlock> mtp_block_;  // null: no usable MTP block (mtp_status_ says why)
  Status mtp_status_;
};

// create_model for a DecoderModel subclass M with
//   static Result<std::unique_ptr<Model>> M::create(file, hp, tensor_specs):
// binds the weights against the architecture's expected tensors and applies the options.
template <class M>
Result<std::unique_ptr<Model>> create_decoder_model(const gguf::ModelFile& file, const HParams& hp,
                                                    const ModelOptions& options) {
  auto model = M::create(file, hp, find_arch(hp.arch)->tensor_specs(hp));
  if (model.is_ok()) {
    (*model)->set_n_ubatch(options.n_ubatch);
    (*model)->set_flash_attention(options.flash_attention);
  }
  return model;
}

}  // namespace moetier
