// A loaded model that can run its forward pass. Each architecture file implements one
// subclass with straight-line per-layer code calling the named blocks in
// src/model/blocks/; the engine only sees this interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/gpu_census.h"
#include "core/profiler.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "model/arch.h"
#include "state/sequence_state.h"

namespace moetier {

namespace gguf { class ModelFile; }
class LayerExec;
class ExpertSource;
class GpuBackend;
struct GpuBackendOptions;

// Makes the GPU backend for a model (gpu/gpu.h's create_gpu_backend in the engine; the
// model never names a backend itself).
using GpuBackendFactory = Result<std::unique_ptr<GpuBackend>> (*)(const HParams& hp, const GpuBackendOptions& options);

// What a GPU holds for a model placed on it (bytes).
struct GpuMemoryReport {
  std::string device;           // name of the device
  uint64_t weight_bytes = 0, kv_bytes = 0, state_bytes = 0, scratch_bytes = 0;
  uint64_t budget_bytes = 0;    // what the device says this process may use (0: unknown)
  uint64_t used_bytes = 0;      // used on the device by every process (0: unknown)
  uint64_t total() const { return weight_bytes + kv_bytes + state_bytes + scratch_bytes; }
};

// Which layers run on the GPU, from the placement plan (engine/plan.h): for each compute
// layer its dense part and its routed experts, and the LM head.
struct GpuPlacement {
  GpuBackendFactory create_backend = nullptr;  // required when any() is true
  int device = 0;                    // -dev
  std::vector<bool> layer_on_gpu;    // [n_layer]
  std::vector<bool> experts_on_gpu;  // [n_layer]; only where layer_on_gpu
  bool output_on_gpu = false;
  // The MTP block (--spec-type draft-mtp): its dense part, and its routed experts where
  // mtp_experts_on_gpu, on the GPU (the plan's choice; its KV cache lives there too).
  bool mtp_on_gpu = false;
  bool mtp_experts_on_gpu = false;
  bool progress = true;              // progress bar while uploading
  uint64_t memory_limit_bytes = 0;   // --vram-budget: allocate no more than this on the GPU (0: no limit)
  // Prompt batches of at least op_offload_min_tokens: stream a GPU layer's CPU-resident
  // experts to the GPU when the measured cost model says it is faster (--no-op-offload: never).
  bool op_offload = true;
  // --fit's budget (free − margin; 0: none): the expert streaming area is only allocated
  // while the GPU's total stays within it, so an optional buffer never eats the headroom.
  // (Not a ceiling for the weights and caches: the allocator's chunks round the plan up.)
  uint64_t op_offload_limit_bytes = 0;
  int64_t op_offload_min_tokens = 32;
  bool op_offload_always = false;    // tests: skip the cost model
  // The VRAM expert cache: slots per layer [n_layer] for layers whose dense part is on the GPU
  // and whose experts are on the CPU (empty: none; engine/expert_tiers.h sizes it).
  std::vector<int> expert_cache_slots;
  // The reference GPU kernels instead of the fast ones (--gpu-kernels exact; vk_ops.h).
  bool exact_kernels = false;
  bool any() const;
};

// Receives, per micro-batch, the final-norm hidden state of every token processed
// (rmsnorm(x)·output_norm, the LM head's input): tokens [n] at positions first_pos ...,
// hidden [n][n_embd]. The MTP drafter feeds these to the model's MTP head.
using HiddenSink = std::function<void(std::span<const int32_t> tokens, int64_t first_pos, const float* hidden)>;

struct ForwardOptions {
  bool all_logits = false;            // false: logits of the last token only
  const HiddenSink* on_hidden = nullptr;  // not null: called after each micro-batch
};

// The model's multi-token-prediction head (Qwen3.5/3.6's "nextn" block), the drafter of
// --spec-type draft-mtp (runtime/mtp_drafter.h). Row i of a call pairs tokens[i], at
// position seq.n_past() + i, with hidden[i], the final-norm hidden state of the position
// before it (the target's, or the head's own output when drafting further ahead):
//   x = eh_proj · [rmsnorm(embed(token))·enorm ; rmsnorm(hidden)·hnorm]
//   x = x + GatedAttention(rmsnorm(x)·attn_norm)        (the head's own KV cache: seq)
//   x = x + MoE(rmsnorm(x)·post_attention_norm)
//   hidden_out = rmsnorm(x)·shared_head_norm;  logits = output · hidden_out
// It reads the model's weights (the model must outlive it) and runs on the CPU.
class MtpHead {
 public:
  virtual ~MtpHead() = default;
  // The head's per-sequence state: one attention layer's KV cache.
  virtual Result<SequenceState> new_sequence(const KvCacheOptions& options) const = 0;
  // Runs n = tokens.size() rows and advances seq.n_past(); hidden [n][n_embd]; hidden_out
  // [n][n_embd] (may be null); logits_last [n_vocab]: the last row's logits (may be null).
  virtual Status forward(std::span<const int32_t> tokens, const float* hidden, SequenceState& seq, float* hidden_out,
                         float* logits_last, ThreadPool& pool) = 0;
  // Several sequences in one pass, each entry as one forward() call with the same results
  // row for row: the drafts of several slots at one draft position read the head's weights
  // once. Every entry's sequence must be this head's or that of a head that
  // shares_weights_with() it. The base runs the entries one by one.
  struct Entry {
    std::span<const int32_t> tokens;
    const float* hidden = nullptr;
    SequenceState* seq = nullptr;
    float* hidden_out = nullptr;
    float* logits_last = nullptr;
  };
  virtual Status forward_batch(std::span<const Entry> entries, ThreadPool& pool) {
    for (const Entry& e : entries) RETURN_IF_ERROR(forward(e.tokens, e.hidden, *e.seq, e.hidden_out, e.logits_last, pool));
    return Status::ok();
  }
  // Whether `other` computes with the same weights in the same place (its sequences may then
  // go through this head's forward_batch).
  virtual bool shares_weights_with(const MtpHead& other) const { return &other == this; }
  // Weight bytes one drafted token reads (the MTP block's dense part, n_expert_used experts
  // and the LM head), for the docs' cost figure and the plan.
  virtual uint64_t bytes_per_token() const = 0;
};

// One sequence's share of a batched forward pass (Model::forward_batch): `tokens` are
// appended at positions seq->n_past() ...
struct BatchEntry {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  bool want_logits = true;  // logits of the entry's last token
  bool all_logits = false;  // logits of every token of the entry (a speculative verify batch)
  const HiddenSink* on_hidden = nullptr;  // the entry's final-norm hidden rows (draft-mtp)
};

// Rows [row_begin, row_begin + n_rows) of a micro-batch's activations are consecutive
// tokens of one sequence, at positions seq->n_past() ... . A micro-batch is a list of
// these in row order covering every row; each sequence appears at most once.
struct SeqRows {
  SequenceState* seq = nullptr;
  int64_t row_begin = 0;
  int64_t n_rows = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const HParams& hparams() const = 0;

  // Fresh per-sequence state (KV cache for attention layers, conv/recurrent state for
  // DeltaNet layers), in host memory for CPU layers and on the GPU for GPU layers.
  virtual Result<SequenceState> new_sequence(const KvCacheOptions& options) const = 0;
  // What each layer keeps per sequence (the architecture file says; new_sequence allocates).
  virtual std::vector<LayerStateSpec> state_specs() const = 0;

  // Runs `tokens` at positions seq.n_past() ... and advances n_past. Tokens are processed
  // in micro-batches of at most n_ubatch (ModelOptions). logits: resized to
  // [rows][n_vocab], rows = 1 (last token) or tokens.size() with options.all_logits.
  // Errors (nothing is computed): empty input, token id out of range, context full.
  Status forward(std::span<const int32_t> tokens, SequenceState& seq, const ForwardOptions& options,
                 std::vector<float>& logits, ThreadPool& pool);

  // Several sequences in one pass (continuous batching: the server's slots decode together).
  // Every entry's tokens go through the same weight reads; each token's result is what
  // forward() gives for that sequence alone (every kernel computes each token row
  // independently of the others in its micro-batch): bit for bit on the CPU and with the
  // exact GPU kernels; the fast GPU kernels choose mat-vec or mat-mat by the micro-batch's
  // size, which round differently, so there the last bits may depend on the batch. logits:
  // [rows][n_vocab] in entry order: one row per entry with want_logits, one per token for an
  // entry with all_logits. Entries are cut into micro-batches of at most n_ubatch
  // tokens in total. Errors (nothing is computed): no entries, an empty entry, a sequence
  // given twice, a token id out of range, an entry that does not fit its context.
  Status forward_batch(std::span<const BatchEntry> entries, std::vector<float>& logits, ThreadPool& pool);

  // One compute layer, written by the architecture file as straight-line calls on `exec`
  // (model/layer_exec.h), which holds the micro-batch's rows and runs the blocks on its
  // device. Does not advance n_past.
  virtual void forward_layer(int layer, LayerExec& exec) = 0;
  // On the CPU, for n tokens of one sequence: x [n][n_embd] is updated in place to the
  // layer's output; when after_mixer is not null it receives the residual stream after the
  // attention/DeltaNet block. Tests use it to feed a layer llama.cpp's own input (teacher
  // forcing).
  void forward_layer(int layer, float* x, int64_t n, SequenceState& seq, float* after_mixer, ThreadPool& pool);
  // The same on the device the placement gives the layer (the GPU for layers placed there),
  // x on the host before and after; for tests comparing one layer across devices.
  virtual Status forward_layer_placed(int layer, float* x, int64_t n, SequenceState& seq, ThreadPool& pool) {
    forward_layer(layer, x, n, seq, nullptr, pool);
    return Status::ok();
  }

  // The MTP head for --spec-type draft-mtp. kBadInput when the file has no MTP block (or
  // its tensors are missing or malformed) or the architecture has none.
  virtual Result<std::unique_ptr<MtpHead>> mtp_head() {
    return Status::bad_input(fmt::format("--spec-type draft-mtp: architecture '{}' has no MTP head", hparams().arch));
  }

  // Moves layers to the GPU as `placement` says: opens the device, uploads their weights
  // (with a progress bar) and keeps their KV cache and state there for sequences made
  // afterwards. Errors (no device, out of GPU memory) leave the model on the CPU, usable.
  // Routed experts read through `source` (engine/expert_store.h) in the layers it serves;
  // every MoE layer calls attach_expert_source (model/blocks/moe.h).
  virtual void attach_experts(ExpertSource& source) { (void)source; }
  virtual Status place_on_gpu(const GpuPlacement& placement);
  // The GPU's memory use, when layers were placed there.
  virtual std::optional<GpuMemoryReport> gpu_memory() const { return std::nullopt; }
  // The GPU census since the last call (empty without a GPU part), and per-dispatch GPU
  // timestamps on or off (core/gpu_census.h).
  virtual GpuCensus take_gpu_census() { return {}; }
  virtual void set_gpu_timestamps(bool) {}
  // "Vulkan, fast kernels: <device>" when layers run on a GPU; empty otherwise.
  virtual std::string gpu_backend_name() const { return {}; }
  // The VRAM expert cache's counters (zero without one).
  virtual GpuExpertCacheStats gpu_expert_cache_stats() const { return {}; }

  int64_t n_ubatch() const { return n_ubatch_; }
  void set_n_ubatch(int64_t n) { n_ubatch_ = n > 0 ? n : 1; }
  // -fa: softmax attention on the CPU through the flash kernels (cpu/flash_attention.h)
  // or the exact path (AttentionOptions). GPU layers keep their own kernels.
  bool flash_attention() const { return flash_attention_; }
  void set_flash_attention(bool on) { flash_attention_ = on; }

  // Time the forward pass per block type into `profiler` (nullptr: off, the default).
  // The profiler must outlive its use; the caller reads and resets it.
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }
  Profiler* profiler() const { return profiler_; }

 protected:
  // One micro-batch: tokens [n], laid out as `seqs` says. Writes the logits of the rows
  // listed in logit_rows (ascending) into logits_out [logit_rows.size()][n_vocab]. Does not
  // advance n_past (forward() and forward_batch() do).
  // hidden_out (may be null): [n][n_embd], the final-norm hidden state of every row.
  virtual Status forward_ubatch(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                                std::span<const int64_t> logit_rows, float* logits_out, float* hidden_out,
                                ThreadPool& pool) = 0;

 private:
  int64_t n_ubatch_ = 512;
  bool flash_attention_ = false;
  Profiler* profiler_ = nullptr;
};

// Loads the model in `file` with the architecture registered for it (validates every
// tensor's presence, type and shape against the architecture's TensorSpec list).
struct ModelOptions {
  int64_t n_ubatch = 512;  // tokens per forward micro-batch (-ub)
  // CPU attention through the flash kernels (-fa on|auto) instead of the exact path (-fa off,
  // the default here: the tests' reference; the tools resolve -fa themselves).
  bool flash_attention = false;
};
Result<std::unique_ptr<Model>> load_model(const gguf::ModelFile& file, const ModelOptions& options);

}  // namespace moetier
