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
//   3. makes room in generating slots that are full (--context-shift);
//   4. builds one batch: one token for every slot that is generating, then prompt chunks of
//      the slots still reading their prompt, up to `step_tokens` in total;
//   5. runs it as one Model::forward_batch (each token's result is bit for bit what that
//      sequence gets alone), samples a token for every slot that got logits, and streams the
//      text to its task.
// With speculative decoding (SchedulerOptions::make_speculator) a generating slot's entry is
// its next token plus the drafts its own speculator proposes (runtime/speculative.h); the
// slot samples each verified row in order and keeps the drafts its sampler agrees with, so
// the output is what the slot gives without speculation.
// So two concurrent requests give exactly what each gives alone, and a slot is freed
// within one step of its client going away.
//
// Code: scheduler.cpp (lifecycle, the loop and the batch), scheduler_slots.cpp (slot
// assignment and prompt cache, context shift, slot files), scheduler_sampling.cpp (per-slot
// sampling, draft verification, text and events, finishing a task); scheduler_slot.h holds
// the slot they share.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
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
  GpuExpertCacheStats gpu_expert_cache;  // the VRAM expert cache, as of the last step
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
  struct Slot;  // scheduler_slot.h
  // Where a queued task would run: a free slot and how many of its cached tokens the task's
  // prompt reuses; null slot: none is free (or the one the task asked for is busy).
  struct SlotChoice {
    Slot* slot = nullptr;
    size_t reuse = 0;
  };
  Scheduler(Model& model, const text::Tokenizer& tokenizer, ThreadPool& pool, const SchedulerOptions& options);
  // The engine thread: waits for work, runs slot actions between steps, then the phases
  // below until stop().
  void loop();

  // Phases of one engine step, in order. Each runs on the engine thread; one that ends a
  // task pushes its final event at once (finish()), so its slot is free for the next step.
  //
  // 1. Admit (under mu_; scheduler_slots.cpp): in queue order, each task goes to the free slot
  //    choose_slot() names (the slot's state is cut back to the reused prefix) and starts
  //    there (start_task); a task waiting for a busy id_slot does not hold back the rest.
  void assign_queued();
  SlotChoice choose_slot(const GenerationTask& task) const;
  void start_task(Slot& slot, const std::shared_ptr<GenerationTask>& task, size_t reuse);
  // 2. Ends every task with kError when abort_all() was called since the last step, else
  //    those whose client cancelled with kCancelled.
  void end_cancelled_tasks();
  // 3–8, one forward pass: shift, build, Model::forward_batch, then fail_batch, or record,
  // sample and publish. False when the batch is empty (nothing ran, the stats are unchanged).
  bool step();
  // 3. Shifts the context of generating slots that are full (scheduler_slots.cpp:
  //    shift_context; the slot may finish).
  void shift_full_contexts();
  // 4. Fills entries_ / entry_slots_: a decode entry (the pending token plus drafts) per
  //    generating slot, then prompt chunks in slot order while the step_tokens budget lasts
  //    (at least one prompt token per step). Tasks with max_tokens 0 and slots whose drafter
  //    fails end here. Returns the prompt tokens in the batch.
  int64_t build_batch();
  // Each returns the tokens it added to the batch: the pending token and the slot's drafts;
  // a prompt chunk (0: the slot's task ended instead).
  int64_t add_decode_entry(Slot& slot);
  int64_t add_prompt_chunk(Slot& slot, int64_t budget);
  // Every generating slot's drafts for this step into slot.draft, made together
  // (propose_together: draft-mtp slots share their head's passes): each at most what fits
  // its context, its token limit and its share of `budget`; a rollback journal opened where
  // the state is recurrent. A slot whose drafter failed ends its task here.
  void propose_drafts(int64_t budget);
  // 5. (forward pass failed) Ends the batch's tasks with the error and empties their slots.
  void fail_batch(const Status& st);
  // 6. Appends each entry's tokens to its slot's `cached`, advances prompt slots' n_fed and
  //    sends their progress events (`t_done`: when the pass ended).
  void record_fed_tokens(std::chrono::steady_clock::time_point t_done);
  // 7. (scheduler_sampling.cpp) Per slot with logits, in entry order (logits_ rows likewise):
  //    the first token after its prompt, one decoded token, or the verification of its drafts
  //    (sample each row in order, keep the agreeing drafts, roll the rest back).
  void sample_batch(double step_seconds);
  void verify_drafts(Slot& slot, const float* logits, double step_seconds);
  // 8. The step's counters and every slot's published info, under mu_.
  void publish_step_stats(int64_t n_prompt_tokens, double step_seconds);

  // Ends the slot's task: flushes the text stages (stop, length), sends the final event,
  // counts it in the stats and frees the slot (scheduler_sampling.cpp).
  void finish(Slot& slot, FinishReason reason, std::string error = {});
  // Makes room in a full generating slot (--context-shift); the slot may finish.
  void shift_context(Slot& slot);
  // Samples (or forces) the slot's next token from `logits` and streams it; `pos` is where
  // that token would be fed. The slot may finish (its task is then null).
  void emit_token(Slot& slot, const float* logits, int64_t pos);
  // Slots with a task (for SchedulerStats::busy_slots).
  int count_busy() const;

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
  // This step's batch (engine thread): the entries, the slot of each (same order), and the
  // logit rows forward_batch returned for them.
  std::vector<BatchEntry> entries_;
  std::vector<Slot*> entry_slots_;
  std::vector<float> logits_;
};

}  // namespace moetier::server
