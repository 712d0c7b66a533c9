#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>

namespace moetier {

Status validate(const SamplerParams& p) {
  if (!std::isfinite(p.temperature)) {
    return Status::bad_input(fmt::format("--temp must be a finite number, got {}", p.temperature));
  }
  // Written as negated ranges so that NaN fails too.
  if (!(p.top_p >= 0.0f && p.top_p <= 1.0f)) {
    return Status::bad_input(fmt::format("--top-p must be in [0, 1], got {}", p.top_p));
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return Status::bad_input(fmt::format("--min-p must be in [0, 1], got {}", p.min_p));
  }
  // 1/penalty must be finite too: the penalty multiplies negative logits and divides positive ones.
  if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0.0f &&
        std::isfinite(1.0f / p.repeat_penalty))) {
    return Status::bad_input(
        fmt::format("--repeat-penalty must be finite and greater than 0, got {}", p.repeat_penalty));
  }
  if (p.repeat_last_n < 0) {
    return Status::bad_input(fmt::format("--repeat-last-n must be >= 0, got {}", p.repeat_last_n));
  }
  if (!std::isfinite(p.frequency_penalty)) {
    return Status::bad_input(
        fmt::format("--frequency-penalty must be a finite number, got {}", p.frequency_penalty));
  }
  if (!std::isfinite(p.presence_penalty)) {
    return Status::bad_input(
        fmt::format("--presence-penalty must be a finite number, got {}", p.presence_penalty));
  }
  if (p.min_keep < 0) {
    return Status::bad_input(fmt::format("--min-keep must be >= 0, got {}", p.min_keep));
  }
  return Status::ok();
}

Result<Sampler> Sampler::create(const SamplerParams& params) {
  RETURN_IF_ERROR(validate(params));
  return Sampler(params);
}

Sampler::Sampler(const SamplerParams& params)
    : params_(params), window_(static_cast<size_t>(params.repeat_last_n)) {
  reseed();
}

void Sampler::reseed() {
  seed_ = params_.seed == kRandomSeed ? std::random_device{}() : params_.seed;
  rng_.seed(seed_);
}

void Sampler::reset() {
  window_size_ = 0;
  window_next_ = 0;
  reseed();
}

void Sampler::accept(int32_t token) {
  if (window_.empty()) return;  // repeat_last_n == 0: penalties off, nothing to remember
  window_[window_next_] = token;
  window_next_ = (window_next_ + 1) % window_.size();
  window_size_ = std::min(window_size_ + 1, window_.size());
}

std::vector<int32_t> Sampler::window() const {
  std::vector<int32_t> out;
  out.reserve(window_size_);
  const size_t oldest = window_size_ < window_.size() ? 0 : window_next_;
  for (size_t i = 0; i < window_size_; ++i) out.push_back(window_[(oldest + i) % window_.size()]);
  return out;
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
  CHECK(logits != nullptr && n_vocab > 0);
  const PenaltyParams penalties{.repeat = params_.repeat_penalty,
                                .frequency = params_.frequency_penalty,
                                .presence = params_.presence_penalty};
  // The penalties see the window as a multiset, so the ring's slot order does not matter.
  const std::span<const int32_t> window(window_.data(), window_size_);
  const bool greedy = params_.temperature <= 0.0f;
  // Greedy is top-1 of the penalised logits: the later filters always keep the argmax.
  const int32_t k = greedy ? 1 : params_.top_k;

  if (k > 0 && k < n_vocab) {
    fill_top_k(logits, n_vocab, k, penalties, window, &candidates_, &count_scratch_);
  } else {
    candidates_.fill(logits, n_vocab);
    apply_penalties(penalties, window, &candidates_, &count_scratch_);
    keep_top_k(k, &candidates_);
  }

  if (greedy) {
    keep_only(argmax_index(candidates_), &candidates_);
    draw_uniform(&rng_);  // llama.cpp's chain still ends in one dist draw
    selected_ = 0;
    return candidates_.items[0].token;
  }

  const size_t min_keep = static_cast<size_t>(params_.min_keep);
  keep_top_p(params_.top_p, min_keep, &candidates_);
  keep_min_p(params_.min_p, min_keep, &candidates_);
  scale_by_temperature(params_.temperature, &candidates_);
  selected_ = draw_from_softmax(&candidates_, &rng_);
  return candidates_.items[selected_].token;
}

}  // namespace moetier
