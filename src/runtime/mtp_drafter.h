// --spec-type draft-mtp: the model's own multi-token-prediction head (model.h's MtpHead)
// as the drafter, following llama.cpp's pairing for Qwen3.5/3.6:
//
//   the head's row at position p pairs token x_p with h_(p−1), the target's final-norm
//   hidden state at the position before (zeros at p = 0), and predicts x_(p+1);
//   drafting from the last sampled token x_P (not yet fed to the target) runs the row
//   (x_P, h_(P−1)) → d_1, then (d_1, ĥ_P) → d_2, ... where ĥ is the head's own output.
//
// The head keeps its own KV cache. Rows paired with the target's hidden state are exact and
// stay; the rows a draft chains on the head's own output are dropped after drafting. The
// target's hidden rows arrive through on_hidden after each of its forward passes; the head
// catches up on them lazily (in one batch with the next draft's first row) or, for long
// prompts, every n_ubatch tokens, so memory stays bounded by the micro-batch.
//
// Drafts are the head's greedy choice (point masses, so verification stays exact:
// runtime/speculative.h); a draft stops early at a token whose probability under the head
// is below --spec-draft-p-min.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/speculative.h"

namespace moetier {

class MtpDrafter final : public Drafter {
 public:
  // The head's KV cache is made with `cache` (the target's n_ctx and KV types).
  static Result<std::unique_ptr<MtpDrafter>> create(Model& model, const KvCacheOptions& cache, double p_min,
                                                    ThreadPool& pool);
  // With a head from elsewhere (an MTP-only GGUF given as the draft, -md), for `target`.
  static Result<std::unique_ptr<MtpDrafter>> create(std::unique_ptr<MtpHead> head, const Model& target,
                                                    const KvCacheOptions& cache, double p_min, ThreadPool& pool);

  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override;
  // The jobs of MtpDrafters whose heads share this one's weights run together: one head
  // pass (MtpHead::forward_batch) per draft position for all of them, so the slots' drafts
  // read the block and the LM head once per position instead of once per slot. Each gets
  // the draft (and logits) it gets alone; other jobs run on their own drafters.
  void draft_jobs(std::span<const DraftJob> jobs) override;
  bool wants_hidden() const override { return true; }
  void on_hidden(std::span<const int32_t> tokens, int64_t first_pos, const float* hidden) override;
  void on_truncate(int64_t n_keep) override;
  Status status() const override { return status_; }

  // For tests: positions the head's cache holds, and the logits of the last draft's steps
  // ([step][n_vocab], kept when keep_logits is set).
  int64_t head_positions() const { return seq_.n_past(); }
  void set_keep_logits(bool on) { keep_logits_ = on; }
  const std::vector<float>& last_draft_logits() const { return draft_logits_; }
  uint64_t bytes_per_token() const override { return head_->bytes_per_token(); }

 private:
  MtpDrafter(std::unique_ptr<MtpHead> head, SequenceState seq, int64_t n_embd, int64_t n_vocab, int64_t n_ubatch,
             double p_min, ThreadPool& pool);
  // Runs the first n waiting rows through the head (no logits).
  void catch_up(int64_t n);
  // Drafts for `drafters` (distinct; heads sharing weights with the first one's), job i
  // for drafters[i], through the first drafter's head.
  static void draft_together(std::span<MtpDrafter* const> drafters, std::span<const DraftJob> jobs);
  // draft()'s checks and the first pass's rows (the waiting rows and x_P): false when this
  // job gets no draft.
  bool begin_draft(std::span<const int32_t> history, int64_t& max_tokens);
  static constexpr int64_t kNoDraft = INT64_MAX;

  std::unique_ptr<MtpHead> head_;
  SequenceState seq_;      // the head's KV cache: positions [0, seq_.n_past())
  int64_t n_embd_, n_vocab_, n_ubatch_;
  double p_min_;
  ThreadPool& pool_;
  int64_t target_n_past_ = 0;  // positions the target has processed (as on_hidden saw them)
  // Positions from here on belong to a verify batch whose outcome is not known yet.
  int64_t tentative_from_ = kNoDraft;
  // Waiting rows: tokens_ at positions [seq_.n_past(), target_n_past_), and hidden_ the
  // target's rows at positions [seq_.n_past() − 1, target_n_past_ − 1] (one more than
  // tokens_; the first is zeros at position −1 or after a cut past what was kept).
  std::vector<int32_t> tokens_;
  std::vector<float> hidden_;
  std::vector<float> rows_h_, out_h_, logits_;  // scratch
  int32_t next_token_ = 0;                      // the token a draft step feeds the head
  int64_t draft_from_ = 0;                      // P of the draft under way
  bool desynced_ = false;  // the target holds positions the head never saw: no drafts
  bool keep_logits_ = false;
  std::vector<float> draft_logits_;
  Status status_;
};

}  // namespace moetier
