// The Vulkan GpuBackend: a LayerExec that records each block of a GPU layer as kernels
// (vk_blocks.cpp), the GPU weights it has uploaded (keyed by the host tensor they copy, so
// architecture files need no GPU code), its scratch buffers, and the per-sequence GPU state.
//
// Decode of one GPU layer is one stream of kernels; when the layer's routed experts stay on
// the CPU the stream is submitted after the router, the CPU runs the routed experts while the
// GPU runs the shared expert, and the routed sum comes back for the combine: one host round
// trip per layer.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "gpu/expert_cache.h"
#include "gpu/vulkan/vk_device.h"
#include "gpu/vulkan/vk_ops.h"
#include "model/cpu_exec.h"
#include "model/gpu_backend.h"

namespace moetier::vk {

// A sequence's memory for its GPU layers.
class GpuSequenceState final : public DeviceState {
 public:
  struct Layer {
    BufferRef k, v;        // attention: [n_ctx][kv width] (f16 or f32)
    BufferRef conv, ssm;   // DeltaNet: [(d_conv − 1)][channels], [n_v][d_k][d_v] (f32)
    int64_t k_row_bytes = 0, v_row_bytes = 0;  // one position's K / V row
  };
  GpuSequenceState(Device& dev, std::vector<Layer> layers, uint64_t bytes)
      : dev_(dev), layers_(std::move(layers)), bytes_(bytes), journal_(layers_.size()) {}
  void clear() override;
  uint64_t bytes() const override { return bytes_; }
  const Layer& layer(int il) const { return layers_[static_cast<size_t>(il)]; }

  // The rollback journal (speculative decoding): per DeltaNet layer, the conv and SSM state
  // after each of `capacity` tokens, in GPU memory (allocated on first use, kept).
  Status reserve_journal(int64_t max_tokens) override;
  Status restore_journal(int64_t slot) override;
  Status read_kv(int layer, int64_t pos, int64_t n, uint8_t* k, uint8_t* v) override;
  Status write_kv(int layer, int64_t pos, int64_t n, const uint8_t* k, const uint8_t* v) override;
  Status read_recurrent(int layer, float* conv, float* ssm) override;
  Status write_recurrent(int layer, const float* conv, const float* ssm) override;
  // Where the block records the state after the token of journal slot `slot`.
  BufferRef journal_conv(int il, int64_t slot) const;
  BufferRef journal_ssm(int il, int64_t slot) const;

 private:
  Device& dev_;
  std::vector<Layer> layers_;
  uint64_t bytes_;
  std::vector<Layer> journal_;  // conv, ssm: [capacity][state]
  int64_t journal_capacity_ = 0;
};

class VulkanBackend final : public GpuBackend, public LayerExec {
 public:
  static Result<std::unique_ptr<VulkanBackend>> create(const HParams& hp, const GpuBackendOptions& options);

  // GpuBackend
  LayerExec& begin_layer(int layer, std::span<const SeqRows> seqs, ThreadPool& pool, Profiler* profiler,
                         bool prepare) override;
  Status upload_x(const float* x, int64_t n) override;
  Status download_x(float* x, int64_t n) override;
  Status lm_head(const cpu::WeightMatrix& output, const float* output_norm, std::span<const int64_t> logit_rows,
                 float* logits, bool prepare) override;
  Status finish() override;
  Result<std::unique_ptr<DeviceState>> new_state(const std::vector<LayerStateSpec>& specs,
                                                 const KvCacheOptions& options) override;
  GpuMemoryReport memory() const override;
  GpuCensus take_census() override { return dev_->stream().take_census(); }
  void set_timestamps(bool on) override { dev_->stream().set_timestamps(on); }
  std::string describe() const override;
  GpuExpertCacheStats expert_cache_stats() const override;

  // LayerExec (vk_blocks.cpp)
  void rms_norm(Act in, const float* w, Act out) override;
  void add(Act x, Act y) override;
  void mark_after_mixer() override { flush_output({}); }
  void attention(const AttentionWeights& w, const AttentionShape& shape, Act in, int layer, Act out) override;
  void delta_net(const DeltaNetWeights& w, const DeltaNetShape& shape, Act in, int layer, Act out) override;
  void moe(const MoeWeights& w, const MoeShape& shape, Act in, Act out) override;

  Device& device() { return *dev_; }

 private:
  VulkanBackend(const HParams& hp, const GpuBackendOptions& options) : hp_(hp), options_(options), cpu_(hp.n_embd, hp.rms_eps) {}
  Status allocate_scratch();
  // The GPU copy of a host tensor, uploaded on first use (prepare mode uploads them all).
  const GpuMatrix* matrix(const cpu::WeightMatrix& w);
  BufferRef vector(const float* host, int64_t n);
  BufferRef rows(Act a) const;
  // xq = rows of `in` (n_in wide, `rows` of them) in the activation type of `w`; returns the
  // buffer and its row stride. F32 weights read the f32 rows directly.
  struct Converted {
    BufferRef buffer;
    uint64_t row_bytes = 0;
  };
  Converted convert(const GpuMatrix& w, const BufferRef& in, int64_t n_rows, int64_t n_in, int64_t in_stride,
                    const BufferRef& scratch);
  // y[r] = w · in[r] (in: f32 rows `in_stride` floats apart), converting `in` for this one
  // product (an intermediate such as the attention output).
  void project(const cpu::WeightMatrix& w, const BufferRef& in, int64_t n_rows, int64_t in_stride, const BufferRef& y,
               int64_t y_stride);
  // The block's input (rows(in), n_embd wide) converted at most once per activation type,
  // as the CPU's ActivationCache does: q/k/v, the four DeltaNet projections, the router with
  // the shared and routed experts share their conversions. begin_input starts a block.
  void begin_input(Act in);
  Converted input_for(const GpuMatrix& w);
  // y[r] = w · input[r]; with `up`, y = silu(w · input) · (up · input) (fused SwiGLU).
  void project_input(const cpu::WeightMatrix& w, const BufferRef& y, int64_t y_stride,
                     const cpu::WeightMatrix* up = nullptr);
  // Whether w and up can go through one fused SwiGLU mat-vec for this micro-batch.
  bool fuse_swiglu(const cpu::WeightMatrix& w, const cpu::WeightMatrix& up) const;

  // The last op of a block (its output projection, or the MoE combine) is held back until
  // the next call: when that call is add(kX, out), the op adds its result into the residual
  // stream itself (y = x + W·a, x + (routed + shared): the same additions as the separate
  // add), which saves a pass over the rows and a dispatch. Any other call records it as is.
  struct PendingOutput {
    enum class Kind { kNone, kProjection, kCombine } kind = Kind::kNone;
    Act out = Act::kMix;
    const cpu::WeightMatrix* w = nullptr;  // projection: out = w · in
    BufferRef in;
    int64_t in_stride = 0;
    bool has_routed = false, has_shared = false;  // combine (buffers: big_[4], weights_, big_[5], small_a_)
    bool pair_map = false;                         // combine with pair_map_ (the VRAM expert cache)
    int64_t k = 0;
  } pending_;
  void defer_projection(const cpu::WeightMatrix& w, const BufferRef& in, int64_t in_stride, Act out);
  void defer_combine(bool has_routed, bool has_shared, int64_t k, Act out, bool pair_map = false);
  // Records the pending op: into rows(out), or added into `residual` when it is valid.
  void flush_output(const BufferRef& residual);
  void fail(const Status& s) {
    if (status_.is_ok() && !s.is_ok()) status_ = s;
  }
  GpuSequenceState* state_of(const SeqRows& s);

  HParams hp_;
  GpuBackendOptions options_;
  std::unique_ptr<Device> dev_;
  KernelSet kernels_ = KernelSet::kFast;
  CpuExec cpu_;  // the routed experts of layers whose experts stay on the CPU
  Status status_;

  // The current layer.
  int layer_ = 0;
  bool prepare_ = false;
  int64_t n_ = 0;
  std::span<const SeqRows> seqs_;
  ThreadPool* pool_ = nullptr;
  Profiler* profiler_ = nullptr;

  std::unordered_map<const void*, GpuMatrix> matrices_;
  std::unordered_map<const void*, BufferRef> vectors_;

  // Scratch, sized for options_.n_ubatch rows.
  int64_t capacity_ = 0;
  BufferRef x_, h_, mix_;
  BufferRef xq_, xq2_;             // the block input's conversions (begin_input / input_for)
  BufferRef xq3_;                   // conversions of intermediates (project)
  struct InputSlot {
    bool used = false;
    DType type = DType::F32;
    Converted conv;
  };
  InputSlot input_slots_[2];
  Act input_ = Act::kH;
  // Fast kernels: the last rms_norm also wrote its output's Q8_K rows into xq_ and Q8_0 rows
  // into xq2_ (one dispatch for the norm and the block input's conversions); begin_input of
  // that activation starts with them. Any later write to xq_/xq2_/the activation ends it.
  struct Prequantized {
    bool valid = false;
    Act act = Act::kH;
  } prequantized_;
  static constexpr int kBig = 6;
  BufferRef big_[kBig];             // block intermediates (sizes: allocate_scratch)
  BufferRef small_a_, small_b_;     // [rows][n_v_heads] (β, α) or [rows] (shared gate)
  BufferRef cos_sin_, scores_;     // scores_: the exact attention's scores, or flash attention's split-K partials
  BufferRef ids_, weights_, pair_rows_, iota_;
  BufferRef group_offsets_, group_order_;  // expert pairs grouped by expert (fast prompt batches)
  BufferRef logits_;
  int64_t logits_rows_ = 0;         // rows of n_vocab logits_ holds
  std::vector<float> host_a_, host_b_, host_c_;  // downloads for the CPU part of hybrid layers
  std::vector<float> host_cos_sin_;
  std::vector<int64_t> cos_sin_key_;  // the positions (and rope) cos_sin_ holds angles for

  // Prompt-time expert streaming (op offload) for layers whose experts live on the CPU.
  // The cost model compares, for the pairs of a batch, the CPU's measured seconds per routed
  // pair with the upload (measured host→device GB/s) plus the GPU's measured seconds per pair.
  bool stream_experts(const MoeWeights& w, int64_t n_pairs);
  // The block input's routed experts (begin_input), n_pairs pairs in ids_/pair_rows_ (all n·k
  // of them, or the VRAM expert cache's).
  void routed_on_gpu(const MoeShape& s, const GpuMatrix& gate, const GpuMatrix& up, const GpuMatrix& down,
                     int64_t n_pairs);
  // For routed experts the CPU computes: the normalised rows [n][n_embd] into host_a_ and the
  // router logits [n][n_expert] into host_b_ (one GPU round trip), host_c_ sized for the
  // CPU's sum. False on a GPU error (status_ has it).
  bool download_for_cpu_experts(const MoeShape& s, Act in, const BufferRef& logits);
  // The shared expert of the block input into big_[5] (its gate logits into small_a_).
  void shared_expert(const MoeWeights& w, const MoeShape& s);

  // The VRAM expert cache (vk_expert_cache.cpp): per layer, copies of recently routed experts
  // in `slots` matrices of each stack, and the policy deciding which (gpu/expert_cache.h).
  struct ExpertCacheLayer {
    GpuMatrix gate, up, down;  // n_mat = slots
    std::unique_ptr<GpuExpertCachePolicy> policy;
  };
  // The cache of layer_ when it has one (allocated in prepare mode), else null.
  ExpertCacheLayer* expert_cache(const MoeWeights& w);
  Status allocate_expert_cache(const MoeWeights& w, int slots, ExpertCacheLayer& cache);
  // The routed experts of a layer with a cache: the cached experts' pairs on the GPU, the rest
  // on the CPU at the same time, the copies for the next steps after. `logits`: the router's.
  void moe_with_expert_cache(const MoeWeights& w, const MoeShape& s, Act in, Act out, ExpertCacheLayer& cache,
                             const BufferRef& logits);
  std::vector<ExpertCacheLayer> expert_caches_;  // [n_layer]
  BufferRef pair_map_;                            // [rows·k] i32
  std::vector<int32_t> host_selected_, host_map_, host_gpu_ids_, host_gpu_rows_, host_order_;
  std::vector<float> host_selected_weight_;
  std::vector<uint8_t> host_elsewhere_;
  std::vector<int> host_missed_;
  GpuExpertCacheStats cache_stats_;
  double decode_cpu_seconds_per_pair_ = 0;  // the CPU's time per routed pair in small batches
  double upload_gbps_ = 0;                  // host → GPU, measured when the first cache is made
  struct Streamed {
    std::vector<BufferRef> buffers;  // the staging area on the GPU, in binding-sized pieces
    uint64_t bytes = 0;
  } stream_area_;
  double h2d_gbps_ = 0;              // measured at the first streamed layer
  double cpu_seconds_per_pair_ = 0;  // running averages (0: not measured yet)
  double gpu_seconds_per_pair_ = 0;
  bool stream_disabled_ = false;
  uint64_t streamed_layers_ = 0;
};

}  // namespace moetier::vk
