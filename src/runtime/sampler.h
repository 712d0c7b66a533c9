// Token sampling with llama.cpp's semantics, defaults and default order.
//
// The chain, in order (llama.cpp's common_params_sampling::samplers default is
//   penalties -> dry -> top_n_sigma -> top_k -> typical_p -> top_p -> min_p -> xtc -> temperature
// followed by the dist sampler; dry, top_n_sigma, typical_p and xtc are off by default
// there and are not implemented here, so the default chains draw the same tokens):
//   1. penalties    repeat / frequency / presence over the last `repeat_last_n` accepted tokens
//   2. top_k        keep the k highest logits                      (k <= 0: off)
//   3. top_p        keep the smallest nucleus with mass >= top_p   (top_p >= 1: off)
//   4. min_p        keep p_i >= min_p * p_max                      (min_p <= 0: off)
//   5. temperature  logits / temperature                           (temperature <= 0: greedy)
//   6. dist         softmax, one uniform draw from std::mt19937(seed), inverse CDF
// Greedy (temperature <= 0) is the argmax of the penalised logits, lowest id on ties
// (filters 2-4 always keep the argmax, so they are skipped); it still consumes one draw
// so the RNG stream stays aligned with llama.cpp's.
//
// Usage (one Sampler per sequence; it owns that sequence's penalty window and RNG):
//   ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(SamplerParams{.temperature = 0.6f, .seed = 7}));
//   for (int32_t t : prompt_tokens) sampler.accept(t);  // llama.cpp's CLI penalises the prompt too
//   int32_t token = sampler.sample(logits, n_vocab);
//   sampler.accept(token);
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"
#include "runtime/sampler_stages.h"

namespace moetier {

// llama.cpp's LLAMA_DEFAULT_SEED: draw a fresh seed from std::random_device.
inline constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;

// Defaults are llama.cpp's (common/common.h, common_params_sampling).
struct SamplerParams {
  float temperature = 0.8f;       // <= 0: greedy
  int32_t top_k = 40;             // <= 0: off (whole vocabulary)
  float top_p = 0.95f;            // in [0, 1]; 1: off
  float min_p = 0.05f;            // in [0, 1]; 0: off
  float repeat_penalty = 1.0f;    // > 0; 1: off. Divides positive logits, multiplies negative ones
  int32_t repeat_last_n = 64;     // >= 0; window of accepted tokens the penalties see; 0: off
  float frequency_penalty = 0.0f; // subtracted per occurrence in the window; 0: off
  float presence_penalty = 0.0f;  // subtracted once if present in the window; 0: off
  int32_t min_keep = 0;           // >= 0; top_p and min_p keep at least this many tokens
  uint32_t seed = kRandomSeed;    // kRandomSeed: random
};

// Qwen's recommended settings (Qwen3 model cards, "Best Practices"): thinking mode uses
// temperature 0.6, top-k 20, top-p 0.95, min-p 0; non-thinking mode 0.7, 20, 0.8, 0. The
// cards also warn against greedy decoding in thinking mode (endless repetition) and allow a
// presence penalty in [0, 2] against repetition; it is left at 0 here. Other fields keep
// llama.cpp's defaults; set .seed as needed.
inline constexpr SamplerParams kQwenThinkingSampling{
    .temperature = 0.6f, .top_k = 20, .top_p = 0.95f, .min_p = 0.0f};
inline constexpr SamplerParams kQwenNonThinkingSampling{
    .temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .min_p = 0.0f};

// kBadInput naming the offending parameter (by its CLI flag) when a value is out of range or
// not finite. Negative top_k is accepted and means "off", as in llama.cpp.
Status validate(const SamplerParams& params);

class Sampler {
 public:
  // Validates `params`; the RNG is seeded here (a random seed when params.seed == kRandomSeed).
  static Result<Sampler> create(const SamplerParams& params);

  // Picks the next token from `logits` (n_vocab floats, the model's raw output for one
  // position). Does not accept the token: call accept() with what is actually appended
  // (a speculative-decoding caller may reject it). Allocates only on the first call (or when
  // n_vocab grows); O(n_vocab) plus the sorts the enabled stages need.
  int32_t sample(const float* logits, int32_t n_vocab);

  // Appends a token to the penalty window (prompt and generated tokens alike).
  void accept(int32_t token);

  // Empties the penalty window and reseeds the RNG (a new random seed for kRandomSeed, as
  // llama.cpp's reset does), making the sampler as if just created.
  void reset();

  // The candidates the last sample() drew from, in the chain's final order, with their
  // logits after penalties and temperature and their normalised probabilities (llama.cpp's
  // "post-sampling probabilities"). Valid until the next sample(). One entry with prob 1 in
  // greedy mode.
  std::span<const Candidate> candidates() const { return candidates_.live(); }
  // Index into candidates() of the token the last sample() returned.
  size_t selected_index() const { return selected_; }

  const SamplerParams& params() const { return params_; }
  // The seed actually in use (the drawn one when params().seed == kRandomSeed).
  uint32_t seed() const { return seed_; }
  // The penalty window, oldest first.
  std::vector<int32_t> window() const;

 private:
  explicit Sampler(const SamplerParams& params);
  void reseed();

  SamplerParams params_;
  uint32_t seed_ = 0;
  std::mt19937 rng_;
  // Ring buffer of the last repeat_last_n accepted tokens; slots [0, window_size_) are
  // filled, window_next_ is where the next token goes.
  std::vector<int32_t> window_;
  size_t window_size_ = 0;
  size_t window_next_ = 0;
  // Reused across calls so that steady-state sampling does not allocate.
  CandidateList candidates_;
  std::vector<int32_t> count_scratch_;
  size_t selected_ = 0;
};

}  // namespace moetier
