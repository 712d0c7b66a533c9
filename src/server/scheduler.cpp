// The Scheduler's lifecycle (create, submit, close, stop), its engine loop and the phases of
// a step that build the batch, run it and record what it did (server/scheduler.h). Slot
// assignment and slot files: scheduler_slots.cpp; sampling and events: scheduler_sampling.cpp.
#include "server/scheduler.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "server/scheduler_slot.h"

namespace moetier::server {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "error";
}

const char* stop_type_name(StopType t) {
  switch (t) {
    case StopType::kNone: return "none";
    case StopType::kEos: return "eos";
    case StopType::kWord: return "word";
    case StopType::kLimit: return "limit";
  }
  return "none";
}

void GenerationTask::push(TaskEvent event) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

bool GenerationTask::wait(std::vector<TaskEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (events_.empty()) cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
  if (events_.empty()) return false;
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
  return true;
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(Model& model, const text::Tokenizer& tokenizer,
                                                     ThreadPool& pool, const SchedulerOptions& options) {
  if (options.n_slots < 1) return Status::bad_input("-np must be at least 1");
  if (options.kv.n_ctx < 1) return Status::bad_input("the context per slot must be at least 1 token");
  if (options.step_tokens < 1) return Status::bad_input("step size must be at least 1 token");
  if (options.context_shift && options.make_speculator) {
    return Status::bad_input(
        "--context-shift cannot be combined with speculative decoding (--spec-type): the drafter's own cache would "
        "need the same shift");
  }
  std::unique_ptr<Scheduler> s(new Scheduler(model, tokenizer, pool, options));
  for (int i = 0; i < options.n_slots; ++i) {
    auto seq = model.new_sequence(options.kv);
    if (!seq) return seq.status().with_context(fmt::format("slot {}", i));
    if (options.context_shift && !seq->can_shift()) {
      // Shifting drops the oldest tokens and re-rotates the rest; a recurrent state has folded
      // those tokens in and cannot drop them.
      return Status::bad_input(
          seq->has_recurrent_state()
              ? "--context-shift: this model keeps a recurrent (DeltaNet) state, which cannot drop old tokens; "
                "without the flag a full slot ends the reply with finish_reason length"
              : "--context-shift: this model does not say how its keys encode position, so they cannot be moved; "
                "without the flag a full slot ends the reply with finish_reason length");
    }
    auto slot = std::make_unique<Slot>(std::move(seq).value());
    slot->id = i;
    if (options.make_speculator) {
      auto spec = options.make_speculator();
      if (!spec) return spec.status().with_context(fmt::format("slot {}", i));
      slot->spec = std::move(spec).value();
      if (slot->spec && slot->seq.has_recurrent_state()) {
        // The rollback journal is allocated up front, so running out of memory is an error
        // now rather than a failed request later.
        RETURN_IF_ERROR(slot->seq.begin_journal(slot->spec->params().n_max + 1).with_context(fmt::format("slot {}", i)));
        slot->seq.end_journal();
      }
      if (slot->spec && slot->spec->drafter().wants_hidden()) {
        Drafter* drafter = &slot->spec->drafter();
        slot->hidden_sink = [drafter](std::span<const int32_t> tokens, int64_t first_pos, const float* hidden) {
          drafter->on_hidden(tokens, first_pos, hidden);
        };
        slot->on_hidden = &slot->hidden_sink;
      }
    }
    slot->info = {.id = i, .n_ctx = options.kv.n_ctx};
    s->slots_.push_back(std::move(slot));
  }
  s->stats_.n_slots = options.n_slots;
  s->stats_.kv_tokens_capacity = options.kv.n_ctx * options.n_slots;
  // What ends a think block when the budget runs out: the newline the model would write,
  // the tag, and the blank line templates put before the answer.
  s->end_think_tokens_ = tokenizer.encode("\n</think>\n\n", {.parse_special = true, .add_special = false});
  return s;
}

Scheduler::Scheduler(Model& model, const text::Tokenizer& tokenizer, ThreadPool& pool,
                     const SchedulerOptions& options)
    : model_(model), tokenizer_(tokenizer), pool_(pool), options_(options) {}

Scheduler::~Scheduler() { stop(); }

bool Scheduler::has_recurrent_state() const { return slots_.front()->seq.has_recurrent_state(); }

void Scheduler::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

Status Scheduler::submit(const std::shared_ptr<GenerationTask>& task) {
  const auto& spec = task->spec();
  if (spec.prompt.empty()) return Status::bad_input("the prompt has no tokens");
  if (static_cast<int64_t>(spec.prompt.size()) >= options_.kv.n_ctx) {
    return Status::bad_input(fmt::format("the prompt has {} tokens, but a slot's context is {} tokens", spec.prompt.size(),
                                         options_.kv.n_ctx));
  }
  if (spec.id_slot >= options_.n_slots) {
    return Status::bad_input(fmt::format("id_slot {} does not exist: the server has {} slot{} (0 to {})", spec.id_slot,
                                         options_.n_slots, options_.n_slots == 1 ? "" : "s", options_.n_slots - 1));
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return Status::runtime("the server is shutting down");
    task->submitted_at = Clock::now();
    queue_.push_back(task);
    stats_.queued = static_cast<int>(queue_.size());
  }
  cv_.notify_all();
  return Status::ok();
}

void Scheduler::close() {
  std::deque<std::shared_ptr<GenerationTask>> rejected;
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
    rejected.swap(queue_);
    stats_.queued = 0;
  }
  for (auto& t : rejected) {
    TaskEvent e;
    e.final = true;
    e.finish = FinishReason::kError;
    e.error = "the server is shutting down";
    t->push(std::move(e));
  }
  cv_.notify_all();
}

void Scheduler::abort_all(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort_reason_ = why;
  }
  cv_.notify_all();
}

void Scheduler::stop() {
  close();
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

std::vector<SlotInfo> Scheduler::slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<SlotInfo> out;
  for (const auto& s : slots_) out.push_back(s->info);
  return out;
}

int Scheduler::count_busy() const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->task != nullptr; }));
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto any_busy = [&] {
        return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->task != nullptr; });
      };
      cv_.wait(lk, [&] {
        return stopping_ || !queue_.empty() || any_busy() || !abort_reason_.empty() || !controls_.empty();
      });
      std::deque<std::function<void()>> controls;
      controls.swap(controls_);
      if (!controls.empty()) {
        lk.unlock();
        for (auto& c : controls) c();
        lk.lock();
      }
      if (stopping_ && !any_busy()) return;
      assign_queued();
    }
    end_cancelled_tasks();
    step();
  }
}

void Scheduler::end_cancelled_tasks() {
  std::string abort;
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort.swap(abort_reason_);
  }
  for (auto& s : slots_) {
    if (!s->task) continue;
    if (!abort.empty()) {
      finish(*s, FinishReason::kError, abort);
    } else if (s->task->cancelled()) {
      finish(*s, FinishReason::kCancelled);
    }
  }
}

bool Scheduler::step() {
  shift_full_contexts();
  const int64_t n_prompt_tokens = build_batch();
  if (entries_.empty()) return false;
  const auto t0 = Clock::now();
  const Status st = model_.forward_batch(entries_, logits_, pool_);
  const auto t1 = Clock::now();
  if (!st.is_ok()) {
    fail_batch(st);
    return true;
  }
  record_fed_tokens(t1);
  const double step_seconds = std::chrono::duration<double>(t1 - t0).count();
  sample_batch(step_seconds);
  publish_step_stats(n_prompt_tokens, step_seconds);
  return true;
}

void Scheduler::shift_full_contexts() {
  for (auto& s : slots_) {
    if (s->task && s->generating && s->seq.n_past() >= s->seq.n_ctx()) shift_context(*s);
  }
}

int64_t Scheduler::build_batch() {
  entries_.clear();
  entry_slots_.clear();
  int64_t budget = options_.step_tokens;
  propose_drafts(budget);
  for (auto& s : slots_) {
    if (s->task && s->generating) budget -= add_decode_entry(*s);
  }
  budget = std::max<int64_t>(budget, 1);  // prompts always make progress
  int64_t n_prompt_tokens = 0;
  for (auto& s : slots_) {
    if (!s->task || s->generating || budget == 0) continue;
    const int64_t take = add_prompt_chunk(*s, budget);
    budget -= take;
    n_prompt_tokens += take;
  }
  return n_prompt_tokens;
}

int64_t Scheduler::add_decode_entry(Slot& s) {
  s.batch.assign(1, s.pending);
  s.batch.insert(s.batch.end(), s.draft.begin(), s.draft.end());
  entries_.push_back({.seq = &s.seq,
                      .tokens = s.batch,
                      .want_logits = true,
                      .all_logits = !s.draft.empty(),
                      .on_hidden = s.on_hidden});
  entry_slots_.push_back(&s);
  return static_cast<int64_t>(s.batch.size());
}

void Scheduler::propose_drafts(int64_t budget) {
  // Each drafting slot's room: the context, its token limit and the step's budget, where the
  // slots before it are counted at their largest entry (drafts are made before the entries).
  std::vector<ProposeJob> jobs;
  std::vector<Slot*> drafting;
  for (auto& slot : slots_) {
    Slot& s = *slot;
    if (!s.task || !s.generating) continue;
    s.draft.clear();
    if (!s.spec || !s.forced.empty() || s.task->spec().constraint) {
      budget -= 1;
      continue;
    }
    const GenerationSpec& spec = s.task->spec();
    int64_t room = std::min(s.seq.n_ctx() - s.seq.n_past() - 1, budget - 1);
    if (spec.max_tokens >= 0) room = std::min(room, spec.max_tokens - s.timings.n_generated);
    room = std::min<int64_t>(room, s.spec->params().n_max);
    budget -= 1 + std::max<int64_t>(room, 0);
    if (room <= 0) continue;
    // The drafter's history is the slot's tokens and the pending one, without a copy.
    s.cached.push_back(s.pending);
    jobs.push_back({.spec = s.spec.get(), .history = s.cached, .max_tokens = room, .out = &s.draft});
    drafting.push_back(&s);
  }
  // Together: draft-mtp slots run their head's passes at once (MtpDrafter::draft_jobs).
  propose_together(jobs);
  for (Slot* sp : drafting) {
    Slot& s = *sp;
    s.cached.pop_back();
    if (const Status st = s.spec->drafter().status(); !st.is_ok()) {
      finish(s, FinishReason::kError, st.message());
      continue;
    }
    if (!s.draft.empty() && s.seq.has_recurrent_state()) {
      s.journal = s.seq.begin_journal(static_cast<int64_t>(s.draft.size()) + 1).is_ok();
      if (!s.journal) s.draft.clear();
    }
  }
}

int64_t Scheduler::add_prompt_chunk(Slot& s, int64_t budget) {
  const auto& prompt = s.task->spec().prompt;
  if (s.task->spec().max_tokens == 0) {  // nothing to generate: no need to read the prompt
    finish(s, FinishReason::kLength);
    return 0;
  }
  const int64_t left = static_cast<int64_t>(prompt.size() - s.n_fed);
  const int64_t take = std::min(left, budget);
  entries_.push_back({.seq = &s.seq,
                      .tokens = {prompt.data() + s.n_fed, static_cast<size_t>(take)},
                      .want_logits = take == left,  // the prompt's last token: the first sample
                      .on_hidden = s.on_hidden});
  entry_slots_.push_back(&s);
  return take;
}

void Scheduler::fail_batch(const Status& st) {
  // Inputs were validated; a failure here is the server's fault. End the tasks of this
  // batch with the reason and start their slots over.
  for (Slot* s : entry_slots_) {
    if (!s->task) continue;
    if (s->journal) s->seq.end_journal();
    s->journal = false;
    s->start_over();
    finish(*s, FinishReason::kError, st.message());
  }
}

void Scheduler::record_fed_tokens(Clock::time_point t_done) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const BatchEntry& e = entries_[i];
    Slot& s = *entry_slots_[i];
    s.cached.insert(s.cached.end(), e.tokens.begin(), e.tokens.end());
    if (s.generating) continue;
    s.n_fed += e.tokens.size();
    if (s.task && s.task->spec().report_progress) {
      TaskEvent progress;
      progress.progress = PromptProgress{.total = s.timings.n_prompt,
                                         .cache = s.timings.n_cached,
                                         .processed = static_cast<int64_t>(s.n_fed),
                                         .time_ms = ms_between(s.t_start, t_done)};
      s.task->push(std::move(progress));
    }
  }
}

void Scheduler::publish_step_stats(int64_t n_prompt_tokens, double step_seconds) {
  int64_t n_tokens = 0;
  for (const auto& e : entries_) n_tokens += static_cast<int64_t>(e.tokens.size());
  const GpuExpertCacheStats gpu_cache = model_.gpu_expert_cache_stats();  // on the stepping thread
  std::lock_guard<std::mutex> lk(mu_);
  stats_.gpu_expert_cache = gpu_cache;
  stats_.steps += 1;
  stats_.step_tokens += static_cast<uint64_t>(n_tokens);
  stats_.step_seconds += step_seconds;
  stats_.step_busy_slots += entries_.size();
  stats_.prompt_tokens += static_cast<uint64_t>(n_prompt_tokens);
  int64_t used = 0;
  for (auto& s : slots_) {
    s->info.n_cached = static_cast<int64_t>(s->cached.size());
    s->info.n_generated = s->task ? s->timings.n_generated : 0;
    used += s->info.n_cached;
    stats_.n_tokens_max = std::max(stats_.n_tokens_max, s->info.n_cached);
  }
  stats_.kv_tokens_used = used;
}

}  // namespace moetier::server
