// Log-probabilities for OpenAI-style `logprobs` / `top_logprobs`.
//
// They come from the full softmax of the model's raw logits for one position: no penalties,
// no temperature, no truncation. That is what llama.cpp's server reports by default
// (post_sampling_probs = false) and what OpenAI documents. The distribution the token was
// actually drawn from is Sampler::candidates().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace moetier {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // natural log; -inf for a token with a -inf (or NaN) logit
};

struct PositionLogprobs {
  TokenLogprob chosen;             // the token that was emitted, whether or not it is in `top`
  std::vector<TokenLogprob> top;   // the n_top most likely, most likely first (ties: lower id)
};

// Fills `out` (its vector's capacity is reused: no allocation once it has held n_top
// entries). `chosen` must be a valid id; n_top >= 0 and is capped at logits.size().
// Cost: two passes over the logits plus O(V log n_top) for the top set.
void compute_logprobs(std::span<const float> logits, int32_t chosen, int n_top,
                      PositionLogprobs* out);

}  // namespace moetier
