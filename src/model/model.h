// A loaded model that can run its forward pass. Each architecture file implements one
// subclass with straight-line per-layer code calling the named blocks in
// src/model/blocks/; the engine only sees this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/profiler.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "model/arch.h"
#include "runtime/sequence_state.h"

namespace moetier {

namespace gguf { class ModelFile; }

struct ForwardOptions {
  bool all_logits = false;  // false: logits of the last token only
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const HParams& hparams() const = 0;

  // Fresh per-sequence state (KV cache for attention layers, conv/recurrent state for
  // DeltaNet layers).
  virtual Result<SequenceState> new_sequence(const KvCacheOptions& options) const = 0;

  // Runs `tokens` at positions seq.n_past() ... and advances n_past. Tokens are processed
  // in micro-batches of at most n_ubatch (ModelOptions). logits: resized to
  // [rows][n_vocab], rows = 1 (last token) or tokens.size() with options.all_logits.
  // Errors (nothing is computed): empty input, token id out of range, context full.
  Status forward(std::span<const int32_t> tokens, SequenceState& seq, const ForwardOptions& options,
                 std::vector<float>& logits, ThreadPool& pool);

  // One compute layer on the hidden states x [n][n_embd] (updated in place to the layer's
  // output), for tokens at positions seq.n_past() ...; when after_mixer is not null it
  // receives the residual stream after the attention/DeltaNet block. Does not advance
  // n_past. forward() is built from this; tests use it to feed a layer llama.cpp's own
  // input (teacher forcing).
  virtual void forward_layer(int layer, float* x, int64_t n, SequenceState& seq, float* after_mixer,
                             ThreadPool& pool) = 0;

  int64_t n_ubatch() const { return n_ubatch_; }
  void set_n_ubatch(int64_t n) { n_ubatch_ = n > 0 ? n : 1; }

  // Time the forward pass per block type into `profiler` (nullptr: off, the default).
  // The profiler must outlive its use; the caller reads and resets it.
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }
  Profiler* profiler() const { return profiler_; }

 protected:
  enum class LogitRows { kNone, kLast, kAll };
  // One micro-batch of consecutive tokens of `seq` (positions seq.n_past() ...). Writes
  // logits for `rows` into `logits_out` ([1][n_vocab] for kLast, [n][n_vocab] for kAll).
  // Does not advance n_past (forward() does).
  virtual void forward_ubatch(std::span<const int32_t> tokens, SequenceState& seq, LogitRows rows,
                              float* logits_out, ThreadPool& pool) = 0;

 private:
  int64_t n_ubatch_ = 512;
  Profiler* profiler_ = nullptr;
};

// Loads the model in `file` with the architecture registered for it (validates every
// tensor's presence, type and shape against the architecture's TensorSpec list).
struct ModelOptions {
  int64_t n_ubatch = 512;  // tokens per forward micro-batch (-ub)
};
Result<std::unique_ptr<Model>> load_model(const gguf::ModelFile& file, const ModelOptions& options);

}  // namespace moetier
