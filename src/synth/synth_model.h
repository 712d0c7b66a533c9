// `moetier synth`: write a random-weight GGUF model with the exact tensor shapes of a real
// one, tensor by tensor, without ever holding a whole tensor in memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "synth/locality.h"
#include "synth/quant_mix.h"
#include "synth/vocab.h"
#include "tensor/dtype.h"

namespace moetier::synth {

struct SynthOptions {
  std::string preset;                 // a name from presets()
  int64_t n_layer = 0;                // 0: the preset's depth; else >= 1
  std::optional<QuantMix> mix;        // unset: the preset's default mix
  uint64_t seed = 0;
  std::string vocab_path;             // empty: synthetic vocabulary of the preset's n_vocab
  // Smaller test files with the preset's other dimensions (0: the preset's value): fewer
  // routed experts (n_expert_used is kept), a smaller synthetic vocabulary, and the
  // qwen35moe full-attention interval (2 puts an attention layer in a 2-layer file).
  int64_t n_expert = 0;
  int64_t n_vocab = 0;
  int64_t full_attention_interval = 0;
  // Trailing MTP ("nextn") blocks, as the real Qwen3.5/3.6 files carry one (qwen35moe only):
  // -1 keeps the preset's count (1 for qwen3.6-35b-a3b, 0 for the small test shapes).
  int64_t n_layer_mtp = -1;
  // Only the MTP draft: token_embd, output_norm, output and the MTP block, with the full
  // model's metadata (what llama.cpp's converter writes with --mtp). Same seed, same tensors
  // as in the full file.
  bool mtp_only = false;
  // kLocality: weights whose routing reuses experts across tokens (synth/locality.h);
  // kUniform: every tensor random, routing independent from token to token.
  enum class Routing { kUniform, kLocality } routing = Routing::kUniform;
  LocalityParams locality;            // used with Routing::kLocality
  std::string out_path;
  int n_threads = 0;                  // 0: all hardware threads; the bytes do not depend on it
  bool progress = true;               // progress bar on stderr
};

// Everything about the file except the tensor data: shape, tensors, types, metadata.
struct SynthPlan {
  HParams hparams;
  QuantMix mix = QuantMix::kF32;
  std::vector<TensorSpec> tensors;
  std::vector<DType> types;           // one per tensor
  MetadataList metadata;              // general.*, <arch>.* are written by the arch; tokenizer.*
  std::vector<std::string> notes;     // remarks for the user (e.g. n_vocab taken from --vocab)
};

// Validates the options that do not need the output file (preset, depth, vocab).
Result<SynthPlan> plan_synth(const SynthOptions& options);

struct SynthSummary {
  uint64_t file_bytes = 0;
  size_t n_tensors = 0;
  uint64_t data_bytes = 0;
  double seconds = 0;
};

// Plans and writes the file. kBadInput for bad options, kRuntime for I/O failures.
Result<SynthSummary> synthesize(const SynthOptions& options);
// Writes a plan made by plan_synth(options) to options.out_path; removes the partial file on
// failure.
Result<SynthSummary> write_synth(const SynthPlan& plan, const SynthOptions& options);

}  // namespace moetier::synth
