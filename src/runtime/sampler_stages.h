// The individual sampling stages, each a pure transformation of a CandidateList.
//
// Semantics follow llama.cpp's samplers (src/llama-sampler.cpp) so that, given the same
// logits and seed, moetier draws the same tokens; the only intended difference is that
// ties between equal logits are broken by the lower token id (llama.cpp leaves the order
// of equal logits to its sort). The Sampler (sampler.h) runs the stages in llama.cpp's
// default order; they are exposed separately for tests and for future custom chains.
//
// A CandidateList starts as the whole vocabulary in id order and "unsorted"; stages may
// sort it (descending logit) and shrink it. Whether it is sorted matters: the final draw
// walks the candidates in their current order, exactly like llama.cpp's dist sampler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace moetier {

struct Candidate {
  int32_t token = 0;
  float logit = 0.0f;  // after the transformations applied so far (penalties, temperature)
  float prob = 0.0f;   // softmax probability, valid only after a stage that computes it
};

struct CandidateList {
  // Storage has capacity for the whole vocabulary and is reused across tokens; only
  // items[0, size) is live.
  std::vector<Candidate> items;
  size_t size = 0;
  // items[0, size) is in descending logit order, equal logits by ascending token id.
  bool sorted = false;
  // items[i].token == i for every i < size (true right after fill(), until a stage reorders
  // or drops candidates). The penalty stage relies on it to index by token id.
  bool in_id_order = false;

  // Loads `n_vocab` logits (NaN is read as -inf so that sorting stays well defined).
  void fill(const float* logits, int32_t n_vocab);
  std::span<Candidate> live() { return {items.data(), size}; }
  std::span<const Candidate> live() const { return {items.data(), size}; }
};

// Strict "ranks before" order used by every sort: higher logit first, then lower id.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

struct PenaltyParams {
  float repeat = 1.0f;     // > 0; 1 = off
  float frequency = 0.0f;  // subtracted once per occurrence in the window
  float presence = 0.0f;   // subtracted once if the token occurs in the window
};

// Repetition penalties over the tokens in `window` (the last-n accepted tokens, any order).
// For each distinct token t occurring c > 0 times in the window:
//   logit_t = logit_t > 0 ? logit_t / repeat : logit_t * repeat     (pushes toward "less likely")
//   logit_t -= c * frequency + presence
// Token ids outside the list are ignored. Requires list->in_id_order (the stage runs first).
// `count_scratch` holds per-token counts between calls; it is left all zero.
void apply_penalties(const PenaltyParams& params, std::span<const int32_t> window,
                     CandidateList* list, std::vector<int32_t>* count_scratch);

// Keeps the k highest logits, sorted. k <= 0 disables the stage. k >= size sorts everything.
void keep_top_k(int32_t k, CandidateList* list);

// The first token of the highest logit, NaN read as −inf (token 0 when nothing beats −inf):
// greedy without penalties (fill_top_k's k = 1 path, the drafters' greedy_pick).
// Requires n_vocab > 0.
int32_t first_argmax(const float* logits, int32_t n_vocab);

// Fused fill -> apply_penalties -> keep_top_k for 0 < k < n_vocab, with identical results
// (same tokens, logits and order): one pass over the raw logits into a k-entry heap instead
// of writing n_vocab candidates and selecting from them. This is the common case (top-k on
// by default; greedy is k = 1), and saves most of the per-token cost at 248k-token vocabularies.
// Greedy without penalties (k = 1) takes two vector passes instead (the maximum, then its
// first position): the same token and logit.
void fill_top_k(const float* logits, int32_t n_vocab, int32_t k, const PenaltyParams& penalties,
                std::span<const int32_t> window, CandidateList* list,
                std::vector<int32_t>* count_scratch);

// Nucleus: computes softmax probabilities of the current candidates, then keeps the
// shortest prefix of the sorted list whose probability mass reaches p (and at least
// min_keep tokens). p >= 1 disables the stage. Leaves the list sorted; `prob` holds the
// probabilities before truncation (not renormalised), as in llama.cpp.
void keep_top_p(float p, size_t min_keep, CandidateList* list);

// Keeps tokens whose probability is at least p times the most likely token's, i.e. whose
// logit >= max_logit + ln(p) (and at least min_keep tokens). p <= 0 disables the stage.
// An unsorted list stays unsorted (order preserved) when the filter alone suffices.
void keep_min_p(float p, size_t min_keep, CandidateList* list);

// Divides every logit by `temperature` (> 0; 1 is a no-op).
void scale_by_temperature(float temperature, CandidateList* list);

// Index of the highest logit, lowest token id on ties. Requires size > 0.
size_t argmax_index(const CandidateList& list);

// Reduces the list to the single candidate at `index`, with probability 1.
void keep_only(size_t index, CandidateList* list);

// The final random pick: softmax over the candidates (probabilities stored in `prob`), one
// uniform u in [0, 1) from `rng`, and the first candidate, in list order, at which the
// running probability mass reaches u. Consumes exactly one uniform draw, also when a single
// candidate is left. If the mass is not a positive finite number (every logit -inf), it
// falls back to the argmax. Returns the selected index. Requires size > 0.
size_t draw_from_softmax(CandidateList* list, std::mt19937* rng);

// One uniform double in [0, 1), exactly as llama.cpp draws it from its std::mt19937.
double draw_uniform(std::mt19937* rng);

}  // namespace moetier
