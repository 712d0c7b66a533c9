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

void MtpDrafter::draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  draft_logits_.clear();
  if (!status_.is_ok() || desynced_ || max_tokens <= 0 || history.empty()) return;
  // history ends with x_P, the token about to be fed at P = target_n_past_.
  const int64_t P = target_n_past_;
  if (static_cast<int64_t>(history.size()) != P + 1) return;
  if (static_cast<int64_t>(hidden_.size()) != (static_cast<int64_t>(tokens_.size()) + 1) * n_embd_) return;
  if (P + max_tokens > seq_.n_ctx()) max_tokens = seq_.n_ctx() - P;
  if (max_tokens <= 0) return;

  // The waiting rows and (x_P, h_(P−1)) in one pass; logits of the last row predict x_(P+1).
  tokens_.push_back(history.back());
  const auto n = static_cast<int64_t>(tokens_.size());
  out_h_.resize(static_cast<size_t>(n * n_embd_));
  logits_.resize(static_cast<size_t>(n_vocab_));
  status_ = head_->forward(tokens_, hidden_.data(), seq_, out_h_.data(), logits_.data(), pool_);
  tokens_.clear();
  hidden_.clear();  // the target's row at P arrives with its next forward pass
  if (!status_.is_ok()) return;
  rows_h_.assign(out_h_.end() - n_embd_, out_h_.end());  // ĥ_P

  for (;;) {
    const GreedyPick pick = greedy_pick(logits_, p_min_);
    if (pick.p < p_min_) break;
    out.push_back(pick.token);
    if (keep_logits_) draft_logits_.insert(draft_logits_.end(), logits_.begin(), logits_.end());
    if (static_cast<int64_t>(out.size()) >= max_tokens) break;
    const int32_t next = out.back();
    out_h_.resize(static_cast<size_t>(n_embd_));
    status_ = head_->forward({&next, 1}, rows_h_.data(), seq_, out_h_.data(), logits_.data(), pool_);
    if (!status_.is_ok()) {
      out.clear();
      break;
    }
    rows_h_.swap(out_h_);
  }
  seq_.truncate(P + 1);  // the chained rows used the head's own hidden state; only (x_P, h_(P−1)) stays
  tentative_from_ = out.empty() ? kNoDraft : P + 1;
}

}  // namespace moetier
