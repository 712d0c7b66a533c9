// Model shapes `moetier synth` can write: two real MoE models (Qwen3.6-35B-A3B,
// Qwen3-30B-A3B) and the small shapes of ../shared/ref (tiny/small) used by tests.
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "synth/quant_mix.h"

namespace moetier::synth {

struct Preset {
  std::string_view name;         // what --preset takes, e.g. "qwen3.6-35b-a3b"
  std::string_view description;  // one line for --help
  HParams hparams;               // the full-depth shape, layer_kinds filled in
  QuantMix default_mix;          // f32 for the test shapes, q4_k_m for real ones
};

const std::vector<Preset>& presets();
// kBadInput listing the known presets when `name` is unknown.
Result<const Preset*> find_preset(std::string_view name);

// The layer kinds of an architecture's fixed pattern for `n_layer` layers:
// qwen35moe: layer il is attention when (il + 1) % full_attention_interval == 0, else Gated
// DeltaNet; every other architecture: all attention.
std::vector<LayerKind> layer_pattern(const HParams& hp, int64_t n_layer);

// Cut (or keep) the depth to `n_layer` layers, keeping the layer pattern from layer 0.
// n_layer must be >= 1 (kBadInput otherwise). Depth beyond the preset's is allowed too.
Status set_depth(HParams& hp, int64_t n_layer);

}  // namespace moetier::synth
