// The Scheduler's slots (server/scheduler.h): which free slot a queued task goes to (the
// prompt cache) and how the task starts there, context shift of a full slot, and slot files
// (POST /slots/N?action=save|restore|erase).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>

#include <fmt/format.h>

#include "server/scheduler.h"
#include "core/utf8_path.h"
#include "server/scheduler_slot.h"

namespace moetier::server {

void Scheduler::assign_queued() {
  // In queue order; a task that asked for a busy slot (id_slot) waits without holding back
  // the tasks behind it.
  for (size_t qi = 0; qi < queue_.size();) {
    const std::shared_ptr<GenerationTask> task = queue_[qi];
    const SlotChoice choice = choose_slot(*task);
    if (!choice.slot) {
      if (task->spec().id_slot >= 0) {
        ++qi;
        continue;
      }
      return;
    }
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(qi));
    stats_.queued = static_cast<int>(queue_.size());
    start_task(*choice.slot, task, choice.reuse);
  }
}

Scheduler::SlotChoice Scheduler::choose_slot(const GenerationTask& task) const {
  // The free slot with the longest reusable prefix; ties go to the least recently used.
  SlotChoice best;
  const auto& prompt = task.spec().prompt;
  const int wanted = task.spec().id_slot;
  for (const auto& s : slots_) {
    if (s->task || (wanted >= 0 && s->id != wanted)) continue;
    size_t common = 0;
    if (task.spec().cache_prompt) {
      const size_t n = std::min(s->cached.size(), prompt.size() - 1);  // at least one token to compute
      while (common < n && s->cached[common] == prompt[common]) ++common;
      if (s->seq.has_recurrent_state() && common != s->cached.size()) common = 0;
    }
    if (!best.slot || common > best.reuse || (common == best.reuse && s->last_used < best.slot->last_used)) {
      best = {.slot = s.get(), .reuse = common};
    }
  }
  return best;
}

void Scheduler::start_task(Slot& s, const std::shared_ptr<GenerationTask>& task, size_t reuse) {
  s.task = task;
  s.last_used = ++use_counter_;
  const bool kept = s.seq.truncate(static_cast<int64_t>(reuse));
  if (!kept) {  // cannot happen (reuse is chosen to be keepable); start over to be safe
    s.seq.clear();
    reuse = 0;
  }
  s.cached.resize(reuse);
  if (s.spec) {
    s.spec->drafter().on_truncate(static_cast<int64_t>(reuse));
    s.spec_at_start = s.spec->stats();
  }
  const GenerationSpec& spec = s.task->spec();
  const auto& prompt = spec.prompt;
  auto sampler = Sampler::create(spec.sampling);
  s.t_start = Clock::now();
  s.timings = {.n_prompt = static_cast<int64_t>(prompt.size()),
               .n_cached = static_cast<int64_t>(reuse),
               .queue_ms = ms_between(s.task->submitted_at, s.t_start)};
  s.event = {};
  if (!sampler) {  // validated by the HTTP layer; never leave a slot in a bad state
    s.task->push({.final = true, .finish = FinishReason::kError, .error = sampler.status().message()});
    s.task.reset();
    return;
  }
  s.sampler = std::move(sampler).value();
  for (int32_t t : prompt) s.sampler->accept(t);  // as `moetier run` and llama.cpp penalise the prompt
  s.detok.emplace(tokenizer_);
  s.stop = StopMatcher(spec.stop);
  s.split = ReasoningSplitter(spec.prompt_opens_reasoning);
  s.n_fed = reuse;
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
  stats_.busy_slots = count_busy();
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
        std::ofstream f(utf8_path(path), std::ios::binary | std::ios::trunc);
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
        std::ifstream f(utf8_path(path), std::ios::binary);
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

}  // namespace moetier::server
