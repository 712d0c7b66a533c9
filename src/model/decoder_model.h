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
#include "model/weights.h"

namespace moetier {

class DecoderModel : public Model {
 public:
  const HParams& hparams() const override { return hp_; }
  Result<SequenceState> new_sequence(const KvCacheOptions& options) const final;
  Status place_on_gpu(const GpuPlacement& placement) final;
  std::optional<GpuMemoryReport> gpu_memory() const final;
  GpuCensus take_gpu_census() final { return gpu_ ? gpu_->take_census() : GpuCensus{}; }
  void set_gpu_timestamps(bool on) final {
    if (gpu_) gpu_->set_timestamps(on);
  }
  std::string gpu_backend_name() const final { return gpu_ ? gpu_->describe() : std::string{}; }
  Status forward_layer_placed(int layer, float* x, int64_t n, SequenceState& seq, ThreadPool& pool) final;

 protected:
  // Binds token_embd.weight, output.weight and output_norm.weight.
  void bind_embeddings(WeightBinder& binder);

  // logits [n][n_vocab] = output · rmsnorm(x[r]) · norm for host rows x [n][n_embd] (n ≤
  // n_ubatch), on the device the placement gives the LM head: the MTP head's logits, on the
  // GPU when the output layer is there (its 0.4 GB read dominates a drafted token).
  Status lm_head_rows(const float* x, int64_t n, const float* norm, float* logits, ThreadPool& pool);

  // The MTP block (draft-mtp) on the GPU, when the placement put it there: an architecture
  // with one overrides has_mtp_block() and writes the block in forward_mtp_block() (the KV
  // cache is layer 0 of the head's own sequence). run_mtp_block_on_gpu runs it on rows x
  // [n][n_embd] (host, updated in place), then the head's final norm into hidden_out and the
  // last row's logits, the LM head wherever the output layer is.
  virtual bool has_mtp_block() const { return false; }
  virtual void forward_mtp_block(LayerExec& /*exec*/) {}
  bool mtp_on_gpu() const { return gpu_ && placement_.mtp_on_gpu; }
  Result<SequenceState> new_mtp_sequence(const LayerStateSpec& spec, const KvCacheOptions& options) const;
  Status run_mtp_block_on_gpu(float* x, int64_t n, SequenceState& seq, const float* head_norm, float* hidden_out,
                              float* logits_last, ThreadPool& pool);

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
