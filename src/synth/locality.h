// `moetier synth --routing locality`: weights whose routing reuses experts from token to
// token the way trained MoE models do (random weights route every token independently).
// Real files decide how a real model routes; these files exist to compare expert-cache
// policies on something closer to real routing than uniform random choice.
//
// The locality is a property of the weights (any engine running the file routes the same
// way), and it comes from state carried across tokens, so it shows with random token ids
// (bench) as well as with the model's own tokens (greedy runs). qwen35moe only: the Gated
// DeltaNet layers carry exponential moving averages of the tokens at several time scales,
// and every router reads them. docs/benchmarking.md ("Synthetic models") has the design and
// the measured reuse statistics.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/arch.h"

namespace moetier::synth {

struct TensorInit;

// Router logit = skew * p_e + state term + token term, each term's standard deviation
// given here (p_e ~ N(0, 1) a fixed popularity of expert e).
struct LocalityParams {
  double state = 1.4;    // std of the logits carried by the recurrent state (slowly varying)
  double token = 0.35;   // std of the logits of the current token alone (new every token)
  double skew = 0.1;     // std of a fixed per-expert offset (a mild popularity skew)
  double memory = 100;   // longest time scale of the state in tokens (the shortest is 2)
};

// kBadInput unless the architecture can carry the state (qwen35moe with at least one
// DeltaNet layer) and the parameters are in range.
Status check_locality(const HParams& hp, const LocalityParams& params);

// GGUF metadata recording the parameters (moetier.synth.*); llama.cpp ignores the keys.
std::vector<std::pair<std::string, double>> locality_metadata(const LocalityParams& params);
// One line for the user, e.g. "routing locality: state 1.4, token 0.3, skew 0.2, memory 200 tokens".
std::string locality_summary(const LocalityParams& params);

// Replaces `init` (tensor_init's result for `spec`) with the structured rows of the
// locality design where the tensor takes part in it; other tensors keep their init.
void apply_locality(const TensorSpec& spec, const HParams& hp, const LocalityParams& params, uint64_t seed,
                    TensorInit& init);

// fill_rows for InitKind::kLocality.
void fill_locality_rows(const TensorInit& init, int64_t first_row, int64_t n_rows, float* out);

}  // namespace moetier::synth
