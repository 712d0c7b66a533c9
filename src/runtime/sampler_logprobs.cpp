#include "runtime/sampler_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/math.h"
#include "core/status.h"

namespace moetier {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// "a is more likely than b": higher logit, then lower id.
bool more_likely(const TokenLogprob& a, const TokenLogprob& b) {
  return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
}

}  // namespace

void compute_logprobs(std::span<const float> logits, int32_t chosen, int n_top,
                      PositionLogprobs* out) {
  CHECK(!logits.empty() && n_top >= 0);
  CHECK(chosen >= 0 && static_cast<size_t>(chosen) < logits.size());

  // log Z = max + log(sum exp(l - max)); summed in double, since 248k terms in float would
  // lose about log2(248k) ~ 18 bits of the smaller terms.
  float max_logit = kNegInf;
  for (float l : logits) max_logit = std::max(max_logit, clean(l));
  double sum = 0.0;
  if (std::isfinite(max_logit)) {
    for (float l : logits) sum += math::exp_f64(static_cast<double>(clean(l)) - max_logit);
  }
  const double log_z = std::isfinite(max_logit) ? max_logit + math::log_f64(sum) : max_logit;
  const auto logprob_of = [&](float logit) {
    return static_cast<float>(static_cast<double>(clean(logit)) - log_z);
  };

  out->chosen = TokenLogprob{.token = chosen, .logprob = logprob_of(logits[chosen])};

  // Top set: a heap of the n best seen so far whose front is the least likely of them, so
  // most tokens cost one comparison. Ranked by logit (monotone in logprob, avoids rounding ties).
  const size_t n = std::min(static_cast<size_t>(n_top), logits.size());
  std::vector<TokenLogprob>& heap = out->top;
  heap.clear();
  for (size_t i = 0; i < logits.size() && n > 0; ++i) {
    const TokenLogprob entry{.token = static_cast<int32_t>(i), .logprob = clean(logits[i])};
    if (heap.size() < n) {
      heap.push_back(entry);
      std::push_heap(heap.begin(), heap.end(), more_likely);
    } else if (more_likely(entry, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), more_likely);
      heap.back() = entry;
      std::push_heap(heap.begin(), heap.end(), more_likely);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), more_likely);  // most likely first
  for (TokenLogprob& e : heap) e.logprob = logprob_of(e.logprob);
}

}  // namespace moetier
