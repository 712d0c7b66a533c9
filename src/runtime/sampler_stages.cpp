#include "runtime/sampler_stages.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/math.h"
#include "core/status.h"

namespace moetier {

namespace {

// Above this many unsorted candidates, top-p first sorts only a prefix, betting that the
// nucleus is short (it nearly always is for a trained model). llama.cpp's thresholds; they
// affect only speed, never the result, since ranks_before is a total order.
constexpr size_t kTopPFullSortLimit = 1024;
constexpr size_t kTopPPrefix = 256;

float max_logit(const CandidateList& list) {
  if (list.sorted) return list.items[0].logit;
  float m = -std::numeric_limits<float>::infinity();
  for (const Candidate& c : list.live()) m = std::max(m, c.logit);
  return m;
}

// Softmax of the live candidates into `prob`, float accumulation in list order (as
// llama.cpp's softmax helper, so top-p cuts at the same token).
void softmax_in_place(CandidateList* list) {
  const float m = max_logit(*list);
  float sum = 0.0f;
  for (Candidate& c : list->live()) {
    c.prob = math::exp_f32(c.logit - m);
    sum += c.prob;
  }
  for (Candidate& c : list->live()) c.prob /= sum;
}

bool penalties_off(const PenaltyParams& p) {
  return p.repeat == 1.0f && p.frequency == 0.0f && p.presence == 0.0f;
}

// Dividing a negative logit would raise its probability, hence the sign split.
float penalized(float logit, int32_t count, const PenaltyParams& p) {
  logit = logit <= 0.0f ? logit * p.repeat : logit / p.repeat;
  return logit - (static_cast<float>(count) * p.frequency + p.presence);
}

float read_logit(float l) { return std::isnan(l) ? -std::numeric_limits<float>::infinity() : l; }

void sort_all(CandidateList* list) {
  std::sort(list->items.begin(), list->items.begin() + list->size, ranks_before);
  list->sorted = true;
  list->in_id_order = false;
}

}  // namespace

// Two passes 4 lanes at a time (SSE2, every x86-64): the maximum (MAXPS returns its second
// operand when the first is NaN, so a NaN never wins), then the first position equal to it
// (+0 and −0 compare equal there, as under fill_top_k's `>`). A 248k-token row took ~0.15 ms
// in fill_top_k's scalar scan.
int32_t first_argmax(const float* logits, int32_t n_vocab) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  __m128 lanes_max = _mm_set1_ps(kNegInf);
  int32_t i = 0;
  for (; i + 4 <= n_vocab; i += 4) lanes_max = _mm_max_ps(_mm_loadu_ps(logits + i), lanes_max);
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, lanes_max);
  float best = kNegInf;
  for (float v : lanes) best = v > best ? v : best;
  for (; i < n_vocab; ++i) best = logits[i] > best ? logits[i] : best;
  if (best == kNegInf) return 0;
  const __m128 target = _mm_set1_ps(best);
  for (i = 0; i + 4 <= n_vocab; i += 4) {
    const int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(logits + i), target));
    if (hit != 0) return i + std::countr_zero(static_cast<unsigned>(hit));
  }
  for (; i < n_vocab; ++i) {
    if (logits[i] == best) return i;
  }
  CHECK_MSG(false, "first_argmax: the maximum was not found again");
  return 0;
}

void CandidateList::fill(const float* logits, int32_t n_vocab) {
  CHECK(logits != nullptr && n_vocab > 0);
  if (items.size() < static_cast<size_t>(n_vocab)) items.resize(n_vocab);  // first call only
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float l = logits[i];
    items[i] = Candidate{.token = i,
                         .logit = read_logit(l),
                         .prob = 0.0f};
  }
  size = static_cast<size_t>(n_vocab);
  sorted = false;
  in_id_order = true;
}

void apply_penalties(const PenaltyParams& params, std::span<const int32_t> window,
                     CandidateList* list, std::vector<int32_t>* count_scratch) {
  if (penalties_off(params) || window.empty()) return;
  CHECK_MSG(list->in_id_order, "penalties must run before any stage that reorders candidates");
  std::vector<int32_t>& counts = *count_scratch;
  if (counts.size() < list->size) counts.resize(list->size, 0);

  const auto in_range = [&](int32_t t) { return t >= 0 && static_cast<size_t>(t) < list->size; };
  for (int32_t t : window) {
    if (in_range(t)) ++counts[t];
  }
  // Second pass visits each distinct token once (its count is cleared after use), so the
  // cost is O(window), independent of the vocabulary size.
  for (int32_t t : window) {
    if (!in_range(t) || counts[t] == 0) continue;
    const int32_t count = counts[t];
    counts[t] = 0;
    list->items[t].logit = penalized(list->items[t].logit, count, params);
  }
  list->sorted = false;
}

void keep_top_k(int32_t k, CandidateList* list) {
  if (k <= 0 || list->size == 0) return;
  const size_t keep = std::min(static_cast<size_t>(k), list->size);
  if (!list->sorted) {
    if (keep == list->size) {
      sort_all(list);
    } else {
      // Heap-based selection: O(n log k), nearly one comparison per token for small k.
      std::partial_sort(list->items.begin(), list->items.begin() + keep,
                        list->items.begin() + list->size, ranks_before);
      list->sorted = true;
      list->in_id_order = false;
    }
  }
  list->size = keep;
}

void fill_top_k(const float* logits, int32_t n_vocab, int32_t k, const PenaltyParams& penalties,
                std::span<const int32_t> window, CandidateList* list,
                std::vector<int32_t>* count_scratch) {
  CHECK(logits != nullptr && k > 0 && k < n_vocab);
  if (list->items.size() < static_cast<size_t>(n_vocab)) list->items.resize(n_vocab);  // first call
  std::vector<int32_t>& counts = *count_scratch;
  const bool penalise = !penalties_off(penalties) && !window.empty();
  if (k == 1 && !penalise) {
    const int32_t token = first_argmax(logits, n_vocab);
    list->items[0] = Candidate{.token = token, .logit = read_logit(logits[token]), .prob = 0.0f};
    list->size = 1;
    list->sorted = true;
    list->in_id_order = false;
    return;
  }
  if (penalise) {
    if (counts.size() < static_cast<size_t>(n_vocab)) counts.resize(n_vocab, 0);
    for (int32_t t : window) {
      if (t >= 0 && t < n_vocab) ++counts[t];
    }
  }

  // items[0, k) is a heap whose front is the worst kept candidate. Tokens are visited in
  // increasing id order, so a later token beats the front only with a strictly higher logit
  // (on equal logits the lower, earlier id ranks first): one float comparison per token,
  // which a NaN (read as -inf) also fails.
  Candidate* heap = list->items.data();
  const auto scan = [&](auto logit_of) {
    for (int32_t i = 0; i < k; ++i) {
      heap[i] = Candidate{.token = i, .logit = read_logit(logit_of(i)), .prob = 0.0f};
    }
    std::make_heap(heap, heap + k, ranks_before);
    float worst = heap[0].logit;
    for (int32_t i = k; i < n_vocab; ++i) {
      const float l = logit_of(i);
      if (l > worst) {
        std::pop_heap(heap, heap + k, ranks_before);
        heap[k - 1] = Candidate{.token = i, .logit = l, .prob = 0.0f};
        std::push_heap(heap, heap + k, ranks_before);
        worst = heap[0].logit;
      }
    }
  };
  if (penalise) {
    scan([&](int32_t i) {
      return counts[i] == 0 ? logits[i] : penalized(logits[i], counts[i], penalties);
    });
    for (int32_t t : window) {
      if (t >= 0 && t < n_vocab) counts[t] = 0;
    }
  } else {
    scan([&](int32_t i) { return logits[i]; });
  }
  std::sort_heap(heap, heap + k, ranks_before);  // best first
  list->size = static_cast<size_t>(k);
  list->sorted = true;
  list->in_id_order = false;
}

void keep_top_p(float p, size_t min_keep, CandidateList* list) {
  if (p >= 1.0f || list->size == 0) return;
  softmax_in_place(list);

  auto first = list->items.begin();
  size_t sorted_prefix = list->size;
  if (!list->sorted) {
    if (list->size > kTopPFullSortLimit) {
      sorted_prefix = kTopPPrefix;
      std::partial_sort(first, first + sorted_prefix, first + list->size, ranks_before);
    } else {
      std::sort(first, first + list->size, ranks_before);
    }
    list->sorted = true;  // true for the prefix now, for all of it before we read past it
    list->in_id_order = false;
  }

  float mass = 0.0f;
  size_t keep = list->size;
  for (size_t i = 0; i < list->size; ++i) {
    if (i == sorted_prefix) {
      // The nucleus is longer than the sorted prefix (a flat distribution). Everything past
      // the prefix ranks below it, so selecting the next best chunk of the tail (O(n)) and
      // sorting only that chunk extends the prefix; growing it 4x per round avoids a full
      // O(n log n) sort of a 248k vocabulary when the nucleus is a few thousand tokens.
      const size_t grown = std::min(list->size, sorted_prefix * 4);
      if (grown < list->size) {
        std::nth_element(first + sorted_prefix, first + grown, first + list->size, ranks_before);
      }
      std::sort(first + sorted_prefix, first + grown, ranks_before);
      sorted_prefix = grown;
    }
    mass += list->items[i].prob;
    if (mass >= p && i + 1 >= min_keep) {
      keep = i + 1;
      break;
    }
  }
  list->size = keep;
}

void keep_min_p(float p, size_t min_keep, CandidateList* list) {
  if (p <= 0.0f || list->size == 0) return;
  const float log_p = static_cast<float>(math::log_f64(p));

  if (!list->sorted) {
    // Unsorted fast path: one threshold pass, order preserved, no sort.
    const float threshold = max_logit(*list) + log_p;
    size_t n_pass = 0;
    for (const Candidate& c : list->live()) n_pass += c.logit >= threshold ? 1 : 0;
    if (n_pass > 0 && n_pass >= min_keep) {
      if (n_pass != list->size) {
        size_t out = 0;
        for (size_t i = 0; i < list->size; ++i) {
          if (list->items[i].logit >= threshold) list->items[out++] = list->items[i];
        }
        list->size = n_pass;
        list->in_id_order = false;
      }
      return;
    }
    sort_all(list);  // too few survivors for min_keep: fall back to the sorted rule
  }

  const float threshold = list->items[0].logit + log_p;
  size_t keep = 1;  // the most likely token always survives
  while (keep < list->size && (list->items[keep].logit >= threshold || keep < min_keep)) ++keep;
  list->size = keep;
}

void scale_by_temperature(float temperature, CandidateList* list) {
  CHECK(temperature > 0.0f);
  if (temperature == 1.0f) return;
  for (Candidate& c : list->live()) c.logit /= temperature;
}

size_t argmax_index(const CandidateList& list) {
  CHECK(list.size > 0);
  size_t best = 0;
  for (size_t i = 1; i < list.size; ++i) {
    if (ranks_before(list.items[i], list.items[best])) best = i;
  }
  return best;
}

void keep_only(size_t index, CandidateList* list) {
  CHECK(index < list->size);
  list->items[0] = list->items[index];
  list->items[0].prob = 1.0f;
  list->size = 1;
  list->sorted = true;
  list->in_id_order = false;
}

double draw_uniform(std::mt19937* rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return unit(*rng);
}

size_t draw_from_softmax(CandidateList* list, std::mt19937* rng) {
  CHECK(list->size > 0);
  if (list->size == 1) {
    draw_uniform(rng);  // keep the RNG stream aligned: one draw per sampled token
    list->items[0].prob = 1.0f;
    return 0;
  }

  // Unnormalised weights in float, their sum in double (llama.cpp's precision choices).
  const float m = max_logit(*list);
  double total = 0.0;
  for (Candidate& c : list->live()) {
    c.prob = math::exp_f32(c.logit - m);
    total += c.prob;
  }
  const double u = draw_uniform(rng);
  if (!(total > 0.0) || !std::isfinite(total)) {
    // Every logit -inf (or +inf present): no distribution to draw from.
    const size_t best = argmax_index(*list);
    for (Candidate& c : list->live()) c.prob = 0.0f;
    list->items[best].prob = 1.0f;
    return best;
  }

  // Inverse CDF in list order, normalising the probabilities in the same pass.
  const double target = total * u;
  double running = 0.0;
  size_t chosen = list->size - 1;  // only reachable through rounding at u ~ 1
  bool found = false;
  for (size_t i = 0; i < list->size; ++i) {
    Candidate& c = list->items[i];
    if (!found) {
      running += c.prob;
      if (running >= target) {
        chosen = i;
        found = true;
      }
    }
    c.prob = static_cast<float>(c.prob / total);
  }
  return chosen;
}

}  // namespace moetier
