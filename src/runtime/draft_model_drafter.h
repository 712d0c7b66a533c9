// --spec-type draft-simple (-md FILE): a separate, smaller model of the same vocabulary
// drafts greedily. It is fed token ids — the target's own tokens, never re-rendered text — so
// template arguments (--reasoning, --chat-template-kwargs) reach the target only.
//
// The draft model keeps its own sequence and follows the target's history: each draft feeds
// the tokens it has not seen yet (the accepted drafts and the target's correction) in one
// pass, then chains greedy tokens one at a time; the chained rows are dropped afterwards
// (attention layers just forget them; recurrent layers go back through the sequence's
// rollback journal). When the history no longer extends what the draft model holds (a chat
// that was cut back), it is cut back too, or started over when its recurrent state cannot be.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/speculative.h"

namespace moetier {

class DraftModelDrafter final : public Drafter {
 public:
  // `draft` must outlive the drafter (the server's slots share one draft model, each with its
  // own sequence of `cache`'s size). weight_bytes: the draft's weights (for the controller's
  // start and the stats line).
  static Result<std::unique_ptr<DraftModelDrafter>> create(std::shared_ptr<Model> draft, const KvCacheOptions& cache,
                                                           double p_min, uint64_t weight_bytes, ThreadPool& pool);

  void draft(std::span<const int32_t> history, int64_t max_tokens, std::vector<int32_t>& out) override;
  Status status() const override { return status_; }
  uint64_t bytes_per_token() const override { return weight_bytes_; }

 private:
  DraftModelDrafter(std::shared_ptr<Model> draft, SequenceState seq, double p_min, uint64_t weight_bytes,
                    ThreadPool& pool)
      : model_(std::move(draft)), seq_(std::move(seq)), p_min_(p_min), weight_bytes_(weight_bytes), pool_(pool) {}
  // Cuts the draft's sequence back to `n` tokens (clears it when recurrent state forbids).
  void cut_to(int64_t n);

  std::shared_ptr<Model> model_;
  SequenceState seq_;
  std::vector<int32_t> fed_;  // the tokens in seq_ (seq_.n_past() of them)
  double p_min_;
  uint64_t weight_bytes_;
  ThreadPool& pool_;
  std::vector<float> logits_;
  Status status_;
};

}  // namespace moetier
