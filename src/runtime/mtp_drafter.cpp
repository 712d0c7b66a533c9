#include "runtime/mtp_drafter.h"

#include <algorithm>
#include <cmath>

namespace moetier {

Result<std::unique_ptr<MtpDrafter>> MtpDrafter::create(Model& model, const KvCacheOptions& cache, double p_min,
                                                       ThreadPool& pool) {
  ASSIGN_OR_RETURN(std::unique_ptr<MtpHead> head, model.mtp_head());
  return create(std::move(head), model, cache, p_min, pool);
}

Result<std::unique_ptr<MtpDrafter>> MtpDrafter::create(std::unique_ptr<MtpHead> head, const Model& target,
                                                       const KvCacheOptions& cache, double p_min, ThreadPool& pool) {
  ASSIGN_OR_RETURN(SequenceState seq, head->new_sequence(cache));
  const HParams& hp = target.hparams();
  return std::unique_ptr<MtpDrafter>(
      new MtpDrafter(std::move(head), std::move(seq), hp.n_embd, hp.n_vocab, target.n_ubatch(), p_min, pool));
}

MtpDrafter::MtpDrafter(std::unique_ptr<MtpHead> head, SequenceState seq, int64_t n_embd, int64_t n_vocab,
                       int64_t n_ubatch, double p_min, ThreadPool& pool)
    : head_(std::move(head)), seq_(std::move(seq)), n_embd_(n_embd), n_vocab_(n_vocab), n_ubatch_(n_ubatch),
      p_min_(p_min), pool_(pool), hidden_(static_cast<size_t>(n_embd), 0.0f) {}

void MtpDrafter::catch_up(int64_t n) {
  n = std::min<int64_t>(n, static_cast<int64_t>(tokens_.size()));
  if (n <= 0 || !status_.is_ok()) return;
  status_ = head_->forward(std::span<const int32_t>(tokens_.data(), static_cast<size_t>(n)), hidden_.data(), seq_,
                           nullptr, nullptr, pool_);
  hidden_.erase(hidden_.begin(), hidden_.begin() + n * n_embd_);  // keeps the row at the last position done
  tokens_.erase(tokens_.begin(), tokens_.begin() + n);
}

void MtpDrafter::on_hidden(std::span<const int32_t> tokens, int64_t first_pos, const float* hidden) {
  if (first_pos < target_n_past_) on_truncate(first_pos);  // the target was cut back without telling us
  if (first_pos > target_n_past_) {
    // Positions the head never saw (a sequence filled before this drafter existed): their
    // rows cannot be made, so the head stops drafting until the sequence is cleared.
    desynced_ = true;
  }
  if (desynced_) {
    target_n_past_ = first_pos + static_cast<int64_t>(tokens.size());
    return;
  }
  const int64_t base = seq_.n_past();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t pos = first_pos + static_cast<int64_t>(i);
    const float* row = hidden + static_cast<int64_t>(i) * n_embd_;
    if (pos < base - 1) continue;  // already paired
    if (pos == base - 1) {
      hidden_.assign(row, row + n_embd_);
      tokens_.clear();
      continue;
    }
    tokens_.push_back(tokens[i]);
    hidden_.insert(hidden_.end(), row, row + n_embd_);
  }
  target_n_past_ = first_pos + static_cast<int64_t>(tokens.size());
  // Long prompts: catch up every n_ubatch rows, so memory stays bounded. Rows of a verify
  // batch still waiting for its outcome (positions ≥ tentative_from_) may be rolled back,
  // so they wait.
  const int64_t settled = std::min(tentative_from_, target_n_past_) - seq_.n_past();
  if (settled >= n_ubatch_) catch_up(settled);
}

void MtpDrafter::on_truncate(int64_t n_keep) {
  tentative_from_ = kNoDraft;  // the verify batch's outcome is known
  if (n_keep >= target_n_past_) return;
  target_n_past_ = n_keep;
  if (desynced_) {
    if (n_keep > 0) return;
    desynced_ = false;  // a cleared sequence starts over in step
  }
  const int64_t base = seq_.n_past();
  if (n_keep >= base) {
    tokens_.resize(static_cast<size_t>(n_keep - base));
    hidden_.resize(static_cast<size_t>((n_keep - base + 1) * n_embd_));
    return;
  }
  // Cut below what the head already holds: the hidden state at n_keep − 1 is gone, so the
  // next row pairs with zeros (as at position 0); drafts may be worse there, never wrong.
  seq_.truncate(n_keep);
  tokens_.clear();
  hidden_.assign(static_cast<size_t>(n_embd_), 0.0f);
}

bool MtpDrafter::begin_draft(std::span<const int32_t> history, int64_t& max_tokens) {
  draft_logits_.clear();
  if (!status_.is_ok() || desynced_ || max_tokens <= 0 || history.empty()) return false;
  // history ends with x_P, the token about to be fed at P = target_n_past_.
  const int64_t P = target_n_past_;
  if (static_cast<int64_t>(history.size()) != P + 1) return false;
  if (static_cast<int64_t>(hidden_.size()) != (static_cast<int64_t>(tokens_.size()) + 1) * n_embd_) return false;
  if (P + max_tokens > seq_.n_ctx()) max_tokens = seq_.n_ctx() - P;
  if (max_tokens <= 0) return false;
  draft_from_ = P;
  // The waiting rows and (x_P, h_(P−1)) in one pass; logits of the last row predict x_(P+1).
  tokens_.push_back(history.back());
  out_h_.resize(tokens_.size() * static_cast<size_t>(n_embd_));
  logits_.resize(static_cast<size_t>(n_vocab_));
  return true;
}

void MtpDrafter::draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  MtpDrafter* self = this;
  const DraftJob job{.drafter = this, .history = history, .max_tokens = max_tokens, .out = &out};
  draft_together({&self, 1}, {&job, 1});
}

void MtpDrafter::draft_jobs(std::span<const DraftJob> jobs) {
  std::vector<MtpDrafter*> together;
  std::vector<DraftJob> together_jobs;
  for (const DraftJob& j : jobs) {
    auto* mtp = dynamic_cast<MtpDrafter*>(j.drafter);
    const bool joins = mtp != nullptr && mtp->head_->shares_weights_with(*head_) &&
                       std::find(together.begin(), together.end(), mtp) == together.end();
    if (joins) {
      together.push_back(mtp);
      together_jobs.push_back(j);
    } else {
      j.drafter->draft(j.history, j.max_tokens, *j.out);
    }
  }
  if (!together.empty()) draft_together(together, together_jobs);
}

void MtpDrafter::draft_together(std::span<MtpDrafter* const> drafters, std::span<const DraftJob> jobs) {
  MtpHead& head = *drafters[0]->head_;
  ThreadPool& pool = drafters[0]->pool_;
  // The drafters still drafting, their jobs' limits, and the head's rows for the next pass.
  std::vector<size_t> active;
  std::vector<int64_t> max_tokens(drafters.size());
  std::vector<MtpHead::Entry> entries;
  for (size_t i = 0; i < drafters.size(); ++i) {
    MtpDrafter& d = *drafters[i];
    jobs[i].out->clear();
    max_tokens[i] = jobs[i].max_tokens;
    if (!d.begin_draft(jobs[i].history, max_tokens[i])) continue;
    active.push_back(i);
    entries.push_back({.tokens = d.tokens_, .hidden = d.hidden_.data(), .seq = &d.seq_, .hidden_out = d.out_h_.data(),
                       .logits_last = d.logits_.data()});
  }
  if (active.empty()) return;
  const Status first = head.forward_batch(entries, pool);
  for (size_t i : active) {
    MtpDrafter& d = *drafters[i];
    d.status_ = first;
    d.tokens_.clear();
    d.hidden_.clear();  // the target's row at P arrives with its next forward pass
    if (first.is_ok()) d.rows_h_.assign(d.out_h_.end() - d.n_embd_, d.out_h_.end());  // ĥ_P
  }
  if (!first.is_ok()) return;
  const std::vector<size_t> started = active;

  // Each pass: every active drafter takes its greedy pick from its logits; those that go on
  // feed it back with ĥ, all in one pass.
  while (!active.empty()) {
    std::vector<size_t> going_on;
    entries.clear();
    for (size_t i : active) {
      MtpDrafter& d = *drafters[i];
      std::vector<int32_t>& out = *jobs[i].out;
      const GreedyPick pick = greedy_pick(d.logits_, d.p_min_);
      if (pick.p < d.p_min_) continue;
      out.push_back(pick.token);
      if (d.keep_logits_) d.draft_logits_.insert(d.draft_logits_.end(), d.logits_.begin(), d.logits_.end());
      if (static_cast<int64_t>(out.size()) >= max_tokens[i]) continue;
      d.next_token_ = out.back();
      d.out_h_.resize(static_cast<size_t>(d.n_embd_));
      going_on.push_back(i);
      entries.push_back({.tokens = {&d.next_token_, 1}, .hidden = d.rows_h_.data(), .seq = &d.seq_,
                         .hidden_out = d.out_h_.data(), .logits_last = d.logits_.data()});
    }
    if (going_on.empty()) break;
    const Status st = head.forward_batch(entries, pool);
    for (size_t i : going_on) {
      MtpDrafter& d = *drafters[i];
      d.status_ = st;
      if (st.is_ok()) {
        d.rows_h_.swap(d.out_h_);
      } else {
        jobs[i].out->clear();
      }
    }
    if (!st.is_ok()) break;
    active = std::move(going_on);
  }
  for (size_t i : started) {
    MtpDrafter& d = *drafters[i];
    d.seq_.truncate(d.draft_from_ + 1);  // the chained rows used the head's own hidden state; only (x_P, h_(P−1)) stays
    d.tentative_from_ = jobs[i].out->empty() ? kNoDraft : d.draft_from_ + 1;
  }
}

}  // namespace moetier
