#include "runtime/draft_model_drafter.h"

#include <algorithm>
#include <cmath>

namespace moetier {

Result<std::unique_ptr<DraftModelDrafter>> DraftModelDrafter::create(std::shared_ptr<Model> draft,
                                                                     const KvCacheOptions& cache, double p_min,
                                                                     uint64_t weight_bytes, ThreadPool& pool) {
  ASSIGN_OR_RETURN(SequenceState seq, draft->new_sequence(cache));
  return std::unique_ptr<DraftModelDrafter>(new DraftModelDrafter(std::move(draft), std::move(seq), p_min,
                                                                  weight_bytes, pool));
}

void DraftModelDrafter::cut_to(int64_t n) {
  if (n >= seq_.n_past()) return;
  if (!seq_.truncate(n)) {
    seq_.clear();  // recurrent state outside the journal: start over (the next draft re-feeds)
    n = 0;
  }
  fed_.resize(static_cast<size_t>(n));
}

void DraftModelDrafter::draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  if (!status_.is_ok() || history.empty() || max_tokens <= 0) return;
  // history = the target's tokens, the last one (x_P) not fed to the target yet.
  const auto P = static_cast<int64_t>(history.size()) - 1;
  if (P + max_tokens > seq_.n_ctx()) max_tokens = seq_.n_ctx() - P;
  if (max_tokens <= 0) return;
  // What the draft model holds that the history still begins with.
  const auto common = static_cast<int64_t>(
      std::mismatch(fed_.begin(), fed_.end(), history.begin(), history.end()).first - fed_.begin());
  cut_to(common);
  const int64_t from = seq_.n_past();
  const std::span<const int32_t> todo = history.subspan(static_cast<size_t>(from));
  if (todo.empty()) return;  // cannot happen: x_P is never fed before it is drafted from
  // The chain's rows (positions P + 1 ...) are dropped afterwards; a recurrent draft model
  // needs its journal for that, opened at x_P so that the state after it is recorded (the
  // tokens before x_P go in first, unjournaled).
  const bool journal = seq_.has_recurrent_state();
  if (journal && todo.size() > 1) {
    const auto before = todo.first(todo.size() - 1);
    status_ = model_->forward(before, seq_, {}, logits_, pool_);
    if (!status_.is_ok()) return;
    fed_.insert(fed_.end(), before.begin(), before.end());
  }
  const std::span<const int32_t> rest = journal ? todo.last(1) : todo;
  if (journal) {
    status_ = seq_.begin_journal(max_tokens + 1);
    if (!status_.is_ok()) return;
  }
  status_ = model_->forward(rest, seq_, {}, logits_, pool_);
  if (status_.is_ok()) fed_.insert(fed_.end(), rest.begin(), rest.end());
  while (status_.is_ok() && !logits_.empty()) {
    const GreedyPick pick = greedy_pick(logits_, p_min_);
    if (pick.p < p_min_) break;
    out.push_back(pick.token);
    if (static_cast<int64_t>(out.size()) >= max_tokens) break;
    const int32_t next = out.back();
    status_ = model_->forward({&next, 1}, seq_, {}, logits_, pool_);
  }
  if (!status_.is_ok()) out.clear();
  cut_to(P + 1);  // keep x_P and what came before
  if (journal) seq_.end_journal();
}

}  // namespace moetier
