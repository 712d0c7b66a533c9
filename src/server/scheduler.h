// The engine loop behind `moetier serve`: N slots (each its own KV cache and recurrent
// state, SequenceState), a FIFO queue of tasks waiting for a slot, and one engine thread
// that owns the model and the compute thread pool.
//
// Each step the engine (continuous batching)
//   1. moves queued tasks into free slots, preferring the slot whose cached tokens are the
//      longest reusable prefix of the new prompt (attention-only models reuse any common
//      prefix; models with recurrent state reuse the slot only when its whole cache is a
//      prefix of the prompt, since that state cannot be rewound);
//   2. drops cancelled tasks (their slot is free for the next step);
//   3. builds one batch: one token for every slot that is generating, then prompt chunks of
//      the slots still reading their prompt, up to `step_tokens` in total;
//   4. runs it as one Model::forward_batch (each token's result is bit for bit what that
//      sequence gets alone), samples a token for every slot that got logits, and streams the
//      text to its task.
// With speculative decoding (SchedulerOptions::make_speculator) a generating slot's entry is
// its next token plus the drafts its own speculator proposes (runtime/speculative.h); the
// slot samples each verified row in order and keeps the drafts its sampler agrees with, so
// the output is what the slot gives without speculation.
// So two concurrent requests give exactly what each gives alone, and a slot is freed
// within one step of its client going away.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/speculative.h"
#include "server/task.h"
#include "text/tokenizer.h"

namespace moetier::server {

struct SchedulerOptions {
  int n_slots = 1;
  KvCacheOptions kv;           // n_ctx: per slot
  int64_t step_tokens = 512;   // tokens per engine step (decode tokens + prompt chunks)
  // Speculative decoding (--spec-type): makes each slot's own speculator (drafter state such
  // as an MTP head's KV cache is per slot). Null: one token per slot and step.
  std::function<Result<std::unique_ptr<Speculator>>()> make_speculator;
  // --context-shift (llama-server's): when a generating slot is full, the tokens after its
  // first n_keep are cut in half (GenerationSpec::n_keep / n_discard), the later half moves
  // down and generation goes on, instead of ending with finish_reason "length". create()
  // refuses it for models whose state cannot drop tokens (recurrent layers), and with
  // speculative decoding (a drafter's own cache would need the same shift).
  bool context_shift = false;
};

// Cumulative counters and current gauges, for /metrics.
struct SchedulerStats {
  uint64_t tasks_finished = 0;
  uint64_t tasks_cancelled = 0;
  uint64_t prompt_tokens = 0;        // prompt tokens computed (cache hits excluded)
  uint64_t prompt_tokens_cached = 0; // prompt tokens reused from a slot's cache
  uint64_t generated_tokens = 0;
  double prompt_seconds = 0;         // summed per task (TaskTimings::prompt_ms)
  double generation_seconds = 0;     // summed per task
  uint64_t steps = 0;                // forward passes
  uint64_t step_tokens = 0;          // tokens through those passes
  double step_seconds = 0;           // time in forward passes
  uint64_t step_busy_slots = 0;      // sum over steps of the slots in the batch
  int busy_slots = 0;
  int queued = 0;
  int n_slots = 0;
  int64_t kv_tokens_used = 0;        // sum of the slots' cached positions
  int64_t n_tokens_max = 0;          // the most positions one slot has held
  int64_t kv_tokens_capacity = 0;
  // Speculative decoding, summed over slots (llama-server's spec_decode_* counters).
  uint64_t draft_tokens = 0;         // drafted tokens verified
  uint64_t draft_accepted = 0;       // of which the target kept
  uint64_t draft_steps = 0;          // verify passes with at least one drafted token
};

struct SlotInfo {
  int id = 0;
  bool busy = false;
  int64_t n_ctx = 0;
  int64_t n_cached = 0;    // positions held in the slot's state
  int64_t n_prompt = 0;    // busy: the task's prompt tokens
  int64_t n_generated = 0; // busy: tokens generated so far
};

// POST /slots/N?action=…: a slot's cached tokens and state to a file and back, or dropped.
enum class SlotAction { kSave, kRestore, kErase };
struct SlotActionResult {
  int64_t n_tokens = 0;  // tokens saved / restored / erased
  uint64_t n_bytes = 0;  // file size (save, restore)
  double ms = 0;
};

class Scheduler {
 public:
  // Allocates every slot's state up front (fails clearly when memory runs out).
  static Result<std::unique_ptr<Scheduler>> create(Model& model, const text::Tokenizer& tokenizer, ThreadPool& pool,
                                                    const SchedulerOptions& options);
  ~Scheduler();

  void start();
  // Queues a task. Fails (bad input) when its prompt does not fit a slot, or (runtime)
  // when the scheduler is shutting down.
  Status submit(const std::shared_ptr<GenerationTask>& task);
  // Stops taking tasks; queued ones end with an error event. In-flight ones continue.
  void close();
  // Cancels every in-flight task (each gets a final kError event saying why).
  void abort_all(const std::string& why);
  // close() + waits for in-flight tasks to end and the engine thread to exit.
  void stop();

  // Runs on the engine thread between steps and waits for it. Fails (bad input) when the
  // slot is busy or does not exist, or the file is missing, damaged or of another model or
  // cache layout (a failed restore leaves the slot empty). State on a GPU is read back and
  // written there. `path`: the file (save, restore).
  Result<SlotActionResult> slot_action(int slot, SlotAction action, const std::string& path);

  SchedulerStats stats() const;
  std::vector<SlotInfo> slots() const;
  int64_t n_ctx_slot() const { return options_.kv.n_ctx; }
  int n_slots() const { return options_.n_slots; }
  // The model keeps a recurrent state per sequence (it cannot drop or shift old tokens).
  bool has_recurrent_state() const;

 private:
  struct Slot;
  Scheduler(Model& model, const text::Tokenizer& tokenizer, ThreadPool& pool, const SchedulerOptions& options);
  void loop();
  void assign_queued();  // under mu_
  bool step();           // one forward pass; false when no slot is busy
  void finish(Slot& slot, FinishReason reason, std::string error = {});
  // Makes room in a full generating slot (--context-shift); the slot may finish.
  void shift_context(Slot& slot);
  // Samples (or forces) the slot's next token from `logits` and streams it; `pos` is where
  // that token would be fed. The slot may finish (its task is then null).
  void emit_token(Slot& slot, const float* logits, int64_t pos);

  Model& model_;
  text::Tokenizer tokenizer_;
  ThreadPool& pool_;
  SchedulerOptions options_;
  std::vector<int32_t> end_think_tokens_;  // forced when the reasoning budget is spent

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenerationTask>> queue_;
  std::deque<std::function<void()>> controls_;  // slot actions waiting for the engine thread
  bool closed_ = false;
  bool stopping_ = false;
  std::string abort_reason_;
  std::vector<std::unique_ptr<Slot>> slots_;  // slot contents: engine thread (+ mu_ for reads)
  SchedulerStats stats_;                      // under mu_
  uint64_t use_counter_ = 0;
  std::thread thread_;
  std::vector<float> logits_;
  std::vector<BatchEntry> entries_;
};

}  // namespace moetier::server
