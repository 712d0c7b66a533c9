#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "server/text_stream.h"

namespace moetier::server {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

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
};

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

namespace {

constexpr char kSlotMagic[8] = {'M', 'T', 'S', 'L', 'O', 'T', '0', '1'};

}  // namespace

Result<SlotActionResult> Scheduler::slot_action(int slot_id, SlotAction action, const std::string& path) {
  if (slot_id < 0 || slot_id >= options_.n_slots) {
    return Status::bad_input(fmt::format("slot {} does not exist (the server has {})", slot_id, options_.n_slots));
  }
  auto done = std::make_shared<std::promise<Result<SlotActionResult>>>();
  auto future = done->get_future();
  auto run = [this, slot_id, action, path, done] {
    const auto t0 = Clock::now();
    Slot& s = *slots_[static_cast<size_t>(slot_id)];
    auto result = [&]() -> Result<SlotActionResult> {
      if (s.task) return Status::bad_input(fmt::format("slot {} is busy; try again when its request is done", slot_id));
      SlotActionResult r;
      if (action == SlotAction::kErase) {
        r.n_tokens = static_cast<int64_t>(s.cached.size());
        s.seq.clear();
        s.cached.clear();
      } else if (action == SlotAction::kSave) {
        ASSIGN_OR_RETURN(std::vector<uint8_t> state, s.seq.snapshot());
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        const int64_t n = static_cast<int64_t>(s.cached.size());
        f.write(kSlotMagic, sizeof(kSlotMagic));
        f.write(reinterpret_cast<const char*>(&n), sizeof(n));
        f.write(reinterpret_cast<const char*>(s.cached.data()), static_cast<std::streamsize>(n * sizeof(int32_t)));
        f.write(reinterpret_cast<const char*>(state.data()), static_cast<std::streamsize>(state.size()));
        f.close();
        if (!f) return Status::runtime(fmt::format("cannot write {}", path));
        r.n_tokens = n;
        r.n_bytes = sizeof(kSlotMagic) + sizeof(n) + static_cast<uint64_t>(n) * sizeof(int32_t) + state.size();
      } else {
        std::ifstream f(path, std::ios::binary);
        if (!f) return Status::bad_input(fmt::format("no saved slot at {}", path));
        std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        int64_t n = 0;
        if (bytes.size() < sizeof(kSlotMagic) + sizeof(n) || !std::equal(kSlotMagic, kSlotMagic + 8, bytes.begin())) {
          return Status::bad_input(fmt::format("{} is not a saved moetier slot", path));
        }
        std::memcpy(&n, bytes.data() + sizeof(kSlotMagic), sizeof(n));
        const size_t header = sizeof(kSlotMagic) + sizeof(n);
        if (n < 0 || n > s.seq.n_ctx() || bytes.size() - header < static_cast<size_t>(n) * sizeof(int32_t)) {
          return Status::bad_input(fmt::format("{} is damaged or holds more tokens than a slot", path));
        }
        std::vector<int32_t> tokens(static_cast<size_t>(n));
        std::memcpy(tokens.data(), bytes.data() + header, tokens.size() * sizeof(int32_t));
        std::vector<uint8_t> state(bytes.begin() + static_cast<std::ptrdiff_t>(header + tokens.size() * sizeof(int32_t)),
                                   bytes.end());
        if (const Status st = s.seq.restore(state); !st.is_ok()) {
          s.seq.clear();  // a failed restore may have written part of the state
          s.cached.clear();
          return st;
        }
        if (s.seq.n_past() != n) {
          s.seq.clear();
          return Status::bad_input(fmt::format("{} is damaged (token count and state disagree)", path));
        }
        s.cached = std::move(tokens);
        r.n_tokens = n;
        r.n_bytes = bytes.size();
      }
      // A drafter's own cache (an MTP head's) does not follow the restored state: start it over.
      if (s.spec) s.spec->drafter().on_truncate(0);
      r.ms = ms_between(t0, Clock::now());
      std::lock_guard<std::mutex> lk(mu_);
      s.info.n_cached = static_cast<int64_t>(s.cached.size());
      return r;
    }();
    done->set_value(std::move(result));
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return Status::runtime("the server is shutting down");
    controls_.push_back(std::move(run));
  }
  cv_.notify_all();
  return future.get();
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
    step();
  }
}

void Scheduler::assign_queued() {
  // In queue order; a task that asked for a busy slot (id_slot) waits without holding back
  // the tasks behind it.
  for (size_t qi = 0; qi < queue_.size();) {
    // The free slot with the longest reusable prefix; ties go to the least recently used.
    Slot* best = nullptr;
    size_t best_reuse = 0;
    const std::shared_ptr<GenerationTask> task = queue_[qi];
    const auto& prompt = task->spec().prompt;
    const int wanted = task->spec().id_slot;
    for (auto& s : slots_) {
      if (s->task || (wanted >= 0 && s->id != wanted)) continue;
      size_t common = 0;
      if (task->spec().cache_prompt) {
        const size_t n = std::min(s->cached.size(), prompt.size() - 1);  // at least one token to compute
        while (common < n && s->cached[common] == prompt[common]) ++common;
        if (s->seq.has_recurrent_state() && common != s->cached.size()) common = 0;
      }
      if (!best || common > best_reuse || (common == best_reuse && s->last_used < best->last_used)) {
        best = s.get();
        best_reuse = common;
      }
    }
    if (!best) {
      if (wanted >= 0) {
        ++qi;
        continue;
      }
      return;
    }
    Slot& s = *best;
    s.task = task;
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(qi));
    stats_.queued = static_cast<int>(queue_.size());
    s.last_used = ++use_counter_;
    const bool kept = s.seq.truncate(static_cast<int64_t>(best_reuse));
    if (!kept) {  // cannot happen (reuse is chosen to be keepable); start over to be safe
      s.seq.clear();
      best_reuse = 0;
    }
    s.cached.resize(best_reuse);
    if (s.spec) {
      s.spec->drafter().on_truncate(static_cast<int64_t>(best_reuse));
      s.spec_at_start = s.spec->stats();
    }
    const GenerationSpec& spec = s.task->spec();
    auto sampler = Sampler::create(spec.sampling);
    s.t_start = Clock::now();
    s.timings = {.n_prompt = static_cast<int64_t>(prompt.size()),
                 .n_cached = static_cast<int64_t>(best_reuse),
                 .queue_ms = ms_between(s.task->submitted_at, s.t_start)};
    s.event = {};
    if (!sampler) {  // validated by the HTTP layer; never leave a slot in a bad state
      s.task->push({.final = true, .finish = FinishReason::kError, .error = sampler.status().message()});
      s.task.reset();
      continue;
    }
    s.sampler = std::move(sampler).value();
    for (int32_t t : prompt) s.sampler->accept(t);  // as `moetier run` and llama.cpp penalise the prompt
    s.detok.emplace(tokenizer_);
    s.stop = StopMatcher(spec.stop);
    s.split = ReasoningSplitter(spec.prompt_opens_reasoning);
    s.n_fed = best_reuse;
    s.generating = false;
    s.forced.clear();
    s.forced_end_think = false;
    s.reasoning_tokens = 0;
    s.truncated = false;
    if (spec.report_progress) {  // as llama-server: a first report before any batch (processed == cache)
      TaskEvent start;
      start.progress = PromptProgress{.total = s.timings.n_prompt, .cache = s.timings.n_cached,
                                      .processed = s.timings.n_cached, .time_ms = 0};
      s.task->push(std::move(start));
    }
    s.info.busy = true;
    s.info.n_prompt = static_cast<int64_t>(prompt.size());
    s.info.n_generated = 0;
    stats_.busy_slots = static_cast<int>(
        std::count_if(slots_.begin(), slots_.end(), [](const auto& x) { return x->task != nullptr; }));
  }
}

bool Scheduler::step() {
  entries_.clear();
  std::vector<Slot*> with_logits;
  int64_t budget = options_.step_tokens;
  for (auto& s : slots_) {
    if (s->task && s->generating && s->seq.n_past() >= s->seq.n_ctx()) shift_context(*s);
    if (!s->task || !s->generating) continue;
    s->batch.assign(1, s->pending);
    s->draft.clear();
    if (s->spec && s->forced.empty() && !s->task->spec().constraint) {
      // Drafts stay within the context, the token budget and this step's size.
      const GenerationSpec& spec = s->task->spec();
      int64_t room = std::min(s->seq.n_ctx() - s->seq.n_past() - 1, budget - 1);
      if (spec.max_tokens >= 0) room = std::min(room, spec.max_tokens - s->timings.n_generated);
      if (room > 0) {
        // The drafter's history is the slot's tokens and the pending one, without a copy.
        s->cached.push_back(s->pending);
        s->spec->propose(s->cached, room, s->draft);
        s->cached.pop_back();
        if (const Status st = s->spec->drafter().status(); !st.is_ok()) {
          finish(*s, FinishReason::kError, st.message());
          continue;
        }
      }
      if (!s->draft.empty() && s->seq.has_recurrent_state()) {
        s->journal = s->seq.begin_journal(static_cast<int64_t>(s->draft.size()) + 1).is_ok();
        if (!s->journal) s->draft.clear();
      }
      s->batch.insert(s->batch.end(), s->draft.begin(), s->draft.end());
    }
    entries_.push_back({.seq = &s->seq,
                        .tokens = s->batch,
                        .want_logits = true,
                        .all_logits = !s->draft.empty(),
                        .on_hidden = s->on_hidden});
    with_logits.push_back(s.get());
    budget -= static_cast<int64_t>(s->batch.size());
  }
  budget = std::max<int64_t>(budget, 1);  // prompts always make progress
  int64_t n_prompt_tokens = 0;
  for (auto& s : slots_) {
    if (!s->task || s->generating || budget == 0) continue;
    const auto& prompt = s->task->spec().prompt;
    if (s->task->spec().max_tokens == 0) {  // nothing to generate: no need to read the prompt
      finish(*s, FinishReason::kLength);
      continue;
    }
    const int64_t left = static_cast<int64_t>(prompt.size() - s->n_fed);
    const int64_t take = std::min(left, budget);
    const bool last = take == left;
    entries_.push_back({.seq = &s->seq,
                        .tokens = {prompt.data() + s->n_fed, static_cast<size_t>(take)},
                        .want_logits = last,
                        .on_hidden = s->on_hidden});
    if (last) with_logits.push_back(s.get());
    budget -= take;
    n_prompt_tokens += take;
  }
  if (entries_.empty()) return false;

  // Logit rows come in entry order; with_logits is in the same order (decoders, then the
  // prompts that completed).
  std::vector<Slot*> logit_order;
  for (const auto& e : entries_) {
    if (!e.want_logits) continue;
    for (Slot* s : with_logits) {
      if (&s->seq == e.seq) logit_order.push_back(s);
    }
  }
  const auto t0 = Clock::now();
  const Status st = model_.forward_batch(entries_, logits_, pool_);
  const auto t1 = Clock::now();
  int64_t n_tokens = 0;
  for (const auto& e : entries_) n_tokens += static_cast<int64_t>(e.tokens.size());
  if (!st.is_ok()) {
    // Inputs were validated; a failure here is the server's fault. End the tasks of this
    // batch with the reason and start their slots over.
    for (const auto& e : entries_) {
      for (auto& s : slots_) {
        if (&s->seq == e.seq && s->task) {
          if (s->journal) s->seq.end_journal();
          s->journal = false;
          s->seq.clear();
          s->cached.clear();
          if (s->spec) s->spec->drafter().on_truncate(0);
          finish(*s, FinishReason::kError, st.message());
        }
      }
    }
    return true;
  }
  // Record what each sequence now holds.
  for (const auto& e : entries_) {
    for (auto& s : slots_) {
      if (&s->seq != e.seq) continue;
      s->cached.insert(s->cached.end(), e.tokens.begin(), e.tokens.end());
      if (s->generating) continue;
      s->n_fed += e.tokens.size();
      if (s->task && s->task->spec().report_progress) {
        TaskEvent progress;
        progress.progress = PromptProgress{.total = s->timings.n_prompt,
                                           .cache = s->timings.n_cached,
                                           .processed = static_cast<int64_t>(s->n_fed),
                                           .time_ms = ms_between(s->t_start, t1)};
        s->task->push(std::move(progress));
      }
    }
  }
  const int64_t n_vocab = model_.hparams().n_vocab;
  const double step_seconds = std::chrono::duration<double>(t1 - t0).count();
  int64_t row = 0;  // logit rows come in entry order: a verify batch has one per token
  for (Slot* sp : logit_order) {
    Slot& s = *sp;
    const float* logits = logits_.data() + row * n_vocab;
    if (!s.generating) {
      s.generating = true;
      s.t_first = Clock::now();
      s.timings.prompt_ms = ms_between(s.t_start, s.t_first);
      emit_token(s, logits, s.seq.n_past());
      row += 1;
      continue;
    }
    if (s.draft.empty()) {
      emit_token(s, logits, s.seq.n_past());
      if (s.spec) s.spec->record(0, 0, 1, step_seconds);
      row += 1;
      continue;
    }
    // Verify: row i holds the logits after batch[i], i.e. for draft[i]. Each row is sampled
    // in order (the sampler draws once per emitted token, as without speculation); a draft
    // the sample equals was already fed, so the next row follows it.
    const auto k = static_cast<int64_t>(s.draft.size());
    const int64_t pos0 = s.seq.n_past() - (k + 1);  // where the batch's first token went
    int64_t accepted = 0;
    for (int64_t i = 0; i <= k; ++i) {
      emit_token(s, logits + i * n_vocab, pos0 + 1 + i);
      if (!s.task) break;  // finished at this token (it is not kept when it was a draft)
      if (i == k || s.pending != s.draft[static_cast<size_t>(i)]) break;
      ++accepted;
    }
    row += k + 1;
    const int64_t keep = pos0 + 1 + accepted;
    const bool cut = s.seq.truncate(keep);
    if (s.journal) s.seq.end_journal();
    s.journal = false;
    s.cached.resize(static_cast<size_t>(keep));
    s.spec->drafter().on_truncate(keep);
    s.spec->record(k, accepted, k + 1, step_seconds);
    if (!cut) {  // cannot happen (the journal covers the batch); start the slot over to be safe
      s.seq.clear();
      s.cached.clear();
      s.spec->drafter().on_truncate(0);
      if (s.task) finish(s, FinishReason::kError, "speculative decoding could not roll the sequence back");
    }
  }
  std::lock_guard<std::mutex> lk(mu_);
  stats_.steps += 1;
  stats_.step_tokens += static_cast<uint64_t>(n_tokens);
  stats_.step_seconds += std::chrono::duration<double>(t1 - t0).count();
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
  return true;
}

void Scheduler::emit_token(Slot& s, const float* logits, int64_t pos) {
  const GenerationSpec& spec = s.task->spec();
  const int32_t n_vocab = static_cast<int32_t>(model_.hparams().n_vocab);
  // Reasoning budget: once spent, the block is closed by forced tokens instead of samples.
  if (!s.forced_end_think && spec.reasoning_budget >= 0 && s.split.in_reasoning() &&
      s.reasoning_tokens >= spec.reasoning_budget) {
    s.forced.assign(end_think_tokens_.begin(), end_think_tokens_.end());
    s.forced_end_think = true;
  }
  int32_t token;
  bool sampled = false;
  if (!s.forced.empty()) {
    token = s.forced.front();
    s.forced.pop_front();
  } else {
    const float* row = logits;
    if (!spec.logit_bias.empty() || spec.constraint || spec.ignore_eos) {
      s.biased.assign(logits, logits + n_vocab);
      for (const LogitBias& b : spec.logit_bias) s.biased[static_cast<size_t>(b.token)] += b.bias;
      if (spec.constraint) spec.constraint->mask(s.biased.data(), n_vocab);
      if (spec.ignore_eos) {  // as llama-server: the end-of-generation tokens are banned
        for (int32_t id : tokenizer_.eog_ids()) s.biased[static_cast<size_t>(id)] = -INFINITY;
      }
      row = s.biased.data();
    }
    token = s.sampler->sample(row, n_vocab);
    sampled = true;
  }
  if (spec.constraint && !spec.constraint->accept(token)) {
    finish(s, FinishReason::kError, "the output could not continue within the grammar");
    return;
  }
  s.sampler->accept(token);
  ++s.timings.n_generated;
  s.event.tokens.push_back(token);
  if (spec.n_logprobs >= 0) {
    if (spec.post_sampling_probs && sampled) {
      // The distribution the token was drawn from, most likely first.
      const auto cands = s.sampler->candidates();
      PositionLogprobs& p = s.scratch_logprobs;
      p.chosen = {.token = token, .logprob = std::log(cands[s.sampler->selected_index()].prob)};
      p.top.clear();
      for (const auto& c : cands) p.top.push_back({.token = c.token, .logprob = std::log(c.prob)});
      // Only the top n_logprobs are kept: a partial sort, not a sort of every candidate.
      const size_t n_top = std::min(p.top.size(), static_cast<size_t>(spec.n_logprobs));
      std::partial_sort(p.top.begin(), p.top.begin() + static_cast<std::ptrdiff_t>(n_top), p.top.end(),
                        [](const TokenLogprob& a, const TokenLogprob& b) {
                          return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
                        });
      p.top.resize(n_top);
    } else {
      compute_logprobs({logits, static_cast<size_t>(n_vocab)}, token, spec.n_logprobs, &s.scratch_logprobs);
    }
    s.event.logprobs.push_back(s.scratch_logprobs);
  }
  if (!spec.ignore_eos && tokenizer_.is_eog(token)) {
    finish(s, FinishReason::kStop);
    return;
  }
  const bool was_reasoning = s.split.in_reasoning();
  const std::string text = s.stop.push(s.detok->push(token));
  const auto delta = s.split.push(text);
  if (spec.split_reasoning) {
    s.event.reasoning += delta.reasoning;
    s.event.content += delta.content;
  } else {
    s.event.content += text;
  }
  if (was_reasoning && s.forced.empty()) ++s.reasoning_tokens;
  if (s.stop.stopped()) {
    finish(s, FinishReason::kStop);
    return;
  }
  if (spec.max_tokens >= 0 && s.timings.n_generated >= spec.max_tokens) {
    finish(s, FinishReason::kLength);
    return;
  }
  if (pos >= s.seq.n_ctx()) {  // no room to feed this token
    s.truncated = true;
    if (!options_.context_shift) {
      finish(s, FinishReason::kLength);
      return;
    }  // else the next step shifts the context before feeding it
  }
  s.pending = token;
  if (!s.event.content.empty() || !s.event.reasoning.empty() || !s.event.logprobs.empty() || !s.event.tokens.empty()) {
    s.event.timings = s.timings;  // so far (llama-server's timings_per_token)
    s.event.timings.generation_ms = ms_between(s.t_first, Clock::now());
    s.task->push(std::move(s.event));
    s.event = {};
  }
}

void Scheduler::shift_context(Slot& s) {
  // As llama-server: keep the first n_keep tokens (at most n_ctx − 4), drop n_discard of the
  // rest (half by default, never all of them), and move the others down.
  const GenerationSpec& spec = s.task->spec();
  const int64_t n_ctx = s.seq.n_ctx(), n_past = s.seq.n_past();
  // n_keep counts the prompt's text tokens; a BOS the tokenizer added stays as well.
  int64_t n_keep = spec.n_keep < 0 ? static_cast<int64_t>(spec.prompt.size()) : spec.n_keep + (tokenizer_.add_bos() ? 1 : 0);
  n_keep = std::clamp<int64_t>(n_keep, 0, std::max<int64_t>(0, std::min(n_ctx - 4, n_past)));
  const int64_t n_left = n_past - n_keep;
  const int64_t n_discard = std::clamp<int64_t>(spec.n_discard > 0 ? spec.n_discard : n_left / 2, 0,
                                                std::max<int64_t>(0, n_left - 1));
  if (n_discard == 0) {  // nothing can go: the reply ends as without the flag
    finish(s, FinishReason::kLength);
    return;
  }
  if (const Status st = s.seq.shift(n_keep, n_discard); !st.is_ok()) {
    s.seq.clear();
    s.cached.clear();
    finish(s, FinishReason::kError, "context shift failed: " + st.message());
    return;
  }
  s.cached.erase(s.cached.begin() + static_cast<std::ptrdiff_t>(n_keep),
                 s.cached.begin() + static_cast<std::ptrdiff_t>(n_keep + n_discard));
  std::fprintf(stderr, "moetier serve: slot %d: context shift, n_keep = %lld, n_left = %lld, n_discard = %lld\n", s.id,
               static_cast<long long>(n_keep), static_cast<long long>(n_left), static_cast<long long>(n_discard));
}

void Scheduler::finish(Slot& s, FinishReason reason, std::string error) {
  const GenerationSpec& spec = s.task->spec();
  const auto now = Clock::now();
  if (s.generating) {
    s.timings.generation_ms = ms_between(s.t_first, now);
  } else {
    s.timings.prompt_ms = ms_between(s.t_start, now);
  }
  TaskEvent e = std::move(s.event);
  s.event = {};
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) {
    // Release what each stage still holds: an incomplete character (as U+FFFD), a tail that
    // was not a stop string after all, a partial tag.
    std::string text = s.stop.stopped() ? std::string() : s.stop.push(s.detok->finish());
    text += s.stop.finish();
    auto d1 = s.split.push(text);
    auto d2 = s.split.finish();
    if (spec.split_reasoning) {
      e.reasoning += d1.reasoning + d2.reasoning;
      e.content += d1.content + d2.content;
    } else {
      e.content += text;
    }
  }
  if (s.spec) {
    s.timings.draft_n = s.spec->stats().n_drafted - s.spec_at_start.n_drafted;
    s.timings.draft_n_accepted = s.spec->stats().n_accepted - s.spec_at_start.n_accepted;
  }
  e.final = true;
  e.finish = reason;
  e.error = std::move(error);
  if (reason == FinishReason::kStop) {
    e.stop_type = s.stop.stopped() ? StopType::kWord : StopType::kEos;
    if (const std::string* word = s.stop.matched()) e.stopping_word = *word;
  } else if (reason == FinishReason::kLength) {
    e.stop_type = StopType::kLimit;
  }
  e.timings = s.timings;
  e.slot = s.id;
  e.truncated = s.truncated;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.tasks_finished += 1;
    if (reason == FinishReason::kCancelled) stats_.tasks_cancelled += 1;
    stats_.prompt_tokens_cached += static_cast<uint64_t>(s.timings.n_cached);
    stats_.generated_tokens += static_cast<uint64_t>(s.timings.n_generated);
    stats_.prompt_seconds += s.timings.prompt_ms / 1000.0;
    stats_.generation_seconds += s.timings.generation_ms / 1000.0;
    if (s.spec) {
      stats_.draft_tokens += static_cast<uint64_t>(s.timings.draft_n);
      stats_.draft_accepted += static_cast<uint64_t>(s.timings.draft_n_accepted);
      stats_.draft_steps += static_cast<uint64_t>(s.spec->stats().n_steps - s.spec_at_start.n_steps);
    }
    s.info.busy = false;
    s.info.n_prompt = 0;
    s.info.n_generated = 0;
    s.info.n_cached = static_cast<int64_t>(s.cached.size());
    auto task = std::move(s.task);
    s.task.reset();
    stats_.busy_slots = static_cast<int>(
        std::count_if(slots_.begin(), slots_.end(), [](const auto& x) { return x->task != nullptr; }));
    task->push(std::move(e));
  }
  s.sampler.reset();
  s.generating = false;
}

}  // namespace moetier::server
