// One slot of the Scheduler (server/scheduler.h), shared by its translation units
// (scheduler.cpp, scheduler_slots.cpp, scheduler_sampling.cpp); nothing else includes it.
// A slot is touched by the engine thread only, except `info`, which is published under the
// scheduler's mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/sampler_logprobs.h"
#include "runtime/speculative.h"
#include "server/scheduler.h"
#include "server/task.h"
#include "server/text_stream.h"
#include "text/tokenizer.h"

namespace moetier::server {

using Clock = std::chrono::steady_clock;

inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// One slot: its sequence state, the tokens that state holds, and the task it runs.
struct Scheduler::Slot {
  int id = 0;
  SequenceState seq;
  std::vector<int32_t> cached;  // the tokens whose state `seq` holds (seq.n_past() of them)
  uint64_t last_used = 0;

  // The task in progress (null: free).
  std::shared_ptr<GenerationTask> task;
  std::optional<Sampler> sampler;
  std::optional<text::Detokenizer> detok;
  StopMatcher stop;
  ReasoningSplitter split;
  size_t n_fed = 0;             // prompt tokens in `seq` (cached or computed)
  bool generating = false;      // the prompt is in; `pending` is the next token to feed
  int32_t pending = 0;
  std::deque<int32_t> forced;   // tokens to emit instead of sampling (reasoning budget)
  bool forced_end_think = false;
  int64_t reasoning_tokens = 0;
  TaskTimings timings;
  Clock::time_point t_start, t_first;
  TaskEvent event;              // accumulates this step's output
  SlotInfo info;                // published copy (under the scheduler's mutex)
  PositionLogprobs scratch_logprobs;
  std::vector<float> biased;    // the step's logits with logit_bias / the constraint applied
  // Speculative decoding (null without): this slot's speculator, its hidden-state hook (for
  // draft-mtp), this step's drafts and verify batch, and the counters at the task's start.
  std::unique_ptr<Speculator> spec;
  HiddenSink hidden_sink;
  const HiddenSink* on_hidden = nullptr;
  std::vector<int32_t> draft, batch;
  SpecStats spec_at_start;
  bool journal = false;         // a rollback journal is open for this step's verify batch
  bool truncated = false;       // the task filled the slot (llama-server's `truncated`)

  explicit Slot(SequenceState s) : seq(std::move(s)) {}

  // Empties the sequence and its tokens (and the drafter's own cache): the next task
  // computes its whole prompt.
  void start_over() {
    seq.clear();
    cached.clear();
    if (spec) spec->drafter().on_truncate(0);
  }
};

}  // namespace moetier::server
