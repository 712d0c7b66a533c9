// The Scheduler's per-slot output (server/scheduler.h): sampling the logit rows a slot got
// from the step's forward pass (verifying its drafts and rolling back what was rejected),
// turning tokens into text and events, and finishing a task.
#include <algorithm>
#include <cmath>

#include "server/scheduler.h"
#include "server/scheduler_slot.h"

namespace moetier::server {

void Scheduler::sample_batch(double step_seconds) {
  const int64_t n_vocab = model_.hparams().n_vocab;
  int64_t row = 0;  // logit rows come in entry order: a verify batch has one per token
  for (size_t i = 0; i < entries_.size(); ++i) {
    const BatchEntry& e = entries_[i];
    if (!e.want_logits) continue;
    Slot& s = *entry_slots_[i];
    const float* logits = logits_.data() + row * n_vocab;
    row += e.all_logits ? static_cast<int64_t>(e.tokens.size()) : 1;
    if (!s.generating) {  // the prompt is in: its first token
      s.generating = true;
      s.t_first = Clock::now();
      s.timings.prompt_ms = ms_between(s.t_start, s.t_first);
      emit_token(s, logits, s.seq.n_past());
    } else if (s.draft.empty()) {
      emit_token(s, logits, s.seq.n_past());
      if (s.spec) s.spec->record(0, 0, 1, step_seconds);
    } else {
      verify_drafts(s, logits, step_seconds);
    }
  }
}

void Scheduler::verify_drafts(Slot& s, const float* logits, double step_seconds) {
  const int64_t n_vocab = model_.hparams().n_vocab;
  // Row i holds the logits after batch[i], i.e. for draft[i]. Each row is sampled in order
  // (the sampler draws once per emitted token, as without speculation); a draft the sample
  // equals was already fed, so the next row follows it.
  const auto k = static_cast<int64_t>(s.draft.size());
  const int64_t pos0 = s.seq.n_past() - (k + 1);  // where the batch's first token went
  int64_t accepted = 0;
  for (int64_t i = 0; i <= k; ++i) {
    emit_token(s, logits + i * n_vocab, pos0 + 1 + i);
    if (!s.task) break;  // finished at this token (it is not kept when it was a draft)
    if (i == k || s.pending != s.draft[static_cast<size_t>(i)]) break;
    ++accepted;
  }
  const int64_t keep = pos0 + 1 + accepted;
  const bool cut = s.seq.truncate(keep);
  if (s.journal) s.seq.end_journal();
  s.journal = false;
  s.cached.resize(static_cast<size_t>(keep));
  s.spec->drafter().on_truncate(keep);
  s.spec->record(k, accepted, k + 1, step_seconds);
  if (!cut) {  // cannot happen (the journal covers the batch); start the slot over to be safe
    s.start_over();
    if (s.task) finish(s, FinishReason::kError, "speculative decoding could not roll the sequence back");
  }
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
    stats_.busy_slots = count_busy();
    task->push(std::move(e));
  }
  s.sampler.reset();
  s.generating = false;
}

}  // namespace moetier::server
