// A generation request as the scheduler sees it (already validated and tokenized by the
// HTTP layer), and the channel its results travel back on. The HTTP thread that owns the
// request waits on the channel; the engine thread pushes one event per generated token
// and a final event; either side may cancel.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/sampler_logprobs.h"

namespace moetier::server {

enum class FinishReason {
  kStop,       // end-of-generation token or a stop string
  kLength,     // max_tokens reached, or the slot's context is full
  kCancelled,  // the client went away (or asked to stop)
  kError,      // the server could not finish it (shutdown, internal error): see TaskEvent::error
};
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

// What ended a generation, in llama-server's terms (its /completion `stop_type`).
enum class StopType {
  kNone,   // not stopped by the model (cancelled, error)
  kEos,    // an end-of-generation token
  kWord,   // a stop string (TaskEvent::stopping_word)
  kLimit,  // max_tokens, or the slot's context is full
};
const char* stop_type_name(StopType t);  // "none", "eos", "word", "limit"

// A logit bias (llama-server / OpenAI `logit_bias`): added to the token's raw logit before
// sampling; -INFINITY bans the token.
struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
};

// Per-token constraint on what may be sampled (a grammar). The scheduler asks it for a mask
// before each sample and tells it the token chosen; one instance per task.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of tokens that may not come next to -INFINITY (n_vocab entries).
  virtual void mask(float* logits, int32_t n_vocab) = 0;
  // The token was emitted; false when it violates the constraint (the task then ends with an error).
  virtual bool accept(int32_t token) = 0;
};

struct GenerationSpec {
  std::vector<int32_t> prompt;     // token ids, at least one
  SamplerParams sampling;
  int64_t max_tokens = -1;         // -1: until end of generation or the slot's context is full
  std::vector<std::string> stop;   // stop strings
  bool ignore_eos = false;
  int n_logprobs = -1;             // -1: none; N >= 0: the chosen token's logprob and the top N
  bool split_reasoning = true;     // <think> … </think> into reasoning_content
  bool prompt_opens_reasoning = false;  // the prompt ends inside an open <think> block
  int64_t reasoning_budget = -1;   // tokens of thinking before "</think>" is forced; -1: no limit
  bool cache_prompt = true;        // reuse a slot's cached prefix of this prompt
  std::vector<LogitBias> logit_bias;
  // n_logprobs from the distribution the sampler drew from (after penalties, top-k/p,
  // min-p and temperature) instead of the raw logits: llama-server's post_sampling_probs.
  bool post_sampling_probs = false;
  int id_slot = -1;                // run in this slot (waits for it); -1: the best free slot
  // Context shift (SchedulerOptions::context_shift): the first n_keep tokens (-1: the whole
  // prompt) always stay; n_discard of the rest are dropped (0: half of them).
  int64_t n_keep = 0;
  int64_t n_discard = 0;
  bool report_progress = false;    // send prompt-processing progress events
  // Built per task by the HTTP layer (grammar, json_schema, tool_choice); null: free text.
  // While set, the slot does not draft speculatively (a draft would need the constraint's
  // state rolled back).
  std::shared_ptr<TokenConstraint> constraint;
};

// Prompt processing progress (llama-server's `prompt_progress`).
struct PromptProgress {
  int64_t total = 0;      // prompt tokens
  int64_t cache = 0;      // of which reused from the slot's cache
  int64_t processed = 0;  // of which in the sequence so far (cached included)
  double time_ms = 0;     // since the slot took the task
};

struct TaskTimings {
  int64_t n_prompt = 0;      // prompt tokens
  int64_t n_cached = 0;      // of which reused from the slot's cache (not computed)
  int64_t n_generated = 0;   // tokens sampled (including an end-of-generation token)
  double prompt_ms = 0;      // from the slot taking the task to the first token's logits
  double generation_ms = 0;  // from then to the end
  double queue_ms = 0;       // waiting for a free slot
  int64_t draft_n = 0;          // speculative decoding: tokens drafted and verified
  int64_t draft_n_accepted = 0; // of which accepted
};

struct TaskEvent {
  std::string content;    // new answer text (valid UTF-8)
  std::string reasoning;  // new reasoning text (valid UTF-8)
  std::vector<PositionLogprobs> logprobs;  // one per token sampled since the last event
  std::vector<int32_t> tokens;            // the tokens sampled since the last event
  std::optional<PromptProgress> progress; // GenerationSpec::report_progress
  bool final = false;
  FinishReason finish = FinishReason::kStop;
  std::string error;      // kError: why
  StopType stop_type = StopType::kNone;  // final events
  std::string stopping_word;             // final events with kWord
  TaskTimings timings;    // final events
  int slot = -1;          // final events: the slot that ran it
  bool truncated = false; // final events: the slot's context filled up (it ended the reply or was shifted)
};

class GenerationTask {
 public:
  explicit GenerationTask(GenerationSpec spec) : spec_(std::move(spec)) {}
  const GenerationSpec& spec() const { return spec_; }

  // Ask the engine to stop this task at its next step (idempotent, any thread).
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // Engine side.
  void push(TaskEvent event);
  // Client side: moves all pending events into `out` (appending); waits up to `timeout`
  // when there are none. Returns false when nothing arrived.
  bool wait(std::vector<TaskEvent>& out, std::chrono::milliseconds timeout);

  std::chrono::steady_clock::time_point submitted_at;

 private:
  GenerationSpec spec_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TaskEvent> events_;
};

}  // namespace moetier::server
