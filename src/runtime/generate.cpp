#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace moetier {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Result<GenerationStats> generate(Model& model, SequenceState& seq, const text::Tokenizer& tokenizer,
                                 Sampler& sampler, std::span<const int32_t> prompt, const GenerationParams& params,
                                 ThreadPool& pool, const std::function<void(std::string_view)>& on_text,
                                 const std::function<void(int32_t)>& on_token) {
  GenerationStats stats;
  stats.n_prompt = static_cast<int64_t>(prompt.size());
  std::vector<float> logits;
  const int32_t n_vocab = static_cast<int32_t>(model.hparams().n_vocab);
  Speculator* spec = params.speculator;
  const SpecStats spec_before = spec ? spec->stats() : SpecStats{};
  // The sequence's tokens so far, for drafters that look back (only kept with a speculator).
  std::vector<int32_t> history;
  if (spec) {
    history.assign(params.earlier_tokens.begin(), params.earlier_tokens.end());
    history.insert(history.end(), prompt.begin(), prompt.end());
  }

  // A model drafter (draft-mtp) sees the target's hidden state of every token fed.
  Drafter* drafter = spec ? &spec->drafter() : nullptr;
  const HiddenSink hidden_sink = [drafter](std::span<const int32_t> tokens, int64_t first_pos, const float* hidden) {
    drafter->on_hidden(tokens, first_pos, hidden);
  };
  const HiddenSink* on_hidden = drafter && drafter->wants_hidden() ? &hidden_sink : nullptr;
  if (drafter) drafter->on_truncate(seq.n_past());  // in step with the sequence (chat may have cut it)

  auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(model.forward(prompt, seq, {.on_hidden = on_hidden}, logits, pool));
  for (int32_t t : prompt) sampler.accept(t);
  stats.prompt_seconds = seconds_since(t0);

  text::Detokenizer detok(tokenizer, params.render_special);
  // Emits a sampled token; true when generation stops at it (it is then not fed).
  const auto emit = [&](int32_t token, int64_t pos) {
    sampler.accept(token);
    ++stats.n_generated;
    if (on_token) on_token(token);
    if (spec) history.push_back(token);
    if (params.stop_at_eog && tokenizer.is_eog(token)) {
      stats.stop = StopReason::kEog;
      return true;
    }
    const std::string piece = detok.push(token);
    if (!piece.empty()) on_text(piece);
    if (pos >= seq.n_ctx()) {  // no room to feed it
      stats.stop = StopReason::kContextFull;
      return true;
    }
    return false;
  };
  const auto budget_left = [&] { return params.n_predict < 0 || stats.n_generated < params.n_predict; };
  const auto cancelled = [&] { return params.cancel && params.cancel->load(); };

  t0 = std::chrono::steady_clock::now();
  const float* row = logits.data();  // the logits the next token is sampled from
  bool have_pending = false;         // a token already sampled (a verify's correction) waits to be emitted
  int32_t pending = 0;
  std::vector<int32_t> draft, batch;
  for (;;) {
    int32_t token = pending;
    if (!have_pending) {
      if (!budget_left()) {
        stats.stop = StopReason::kLength;
        break;
      }
      if (cancelled()) {
        stats.stop = StopReason::kCancelled;
        break;
      }
      token = sampler.sample(row, n_vocab);
    }
    have_pending = false;
    const int64_t pos = seq.n_past();  // where `token` goes
    if (emit(token, pos)) break;

    // Feed `token`, with drafts after it when the speculator has some. Drafts are limited to
    // the budget (a draft past it would be cut anyway) and to the context.
    draft.clear();
    if (spec) {
      int64_t room = seq.n_ctx() - pos - 1;
      if (params.n_predict >= 0) room = std::min(room, params.n_predict - stats.n_generated);
      if (room > 0) spec->propose(history, room, draft);
      RETURN_IF_ERROR(drafter->status());
    }
    const auto step0 = std::chrono::steady_clock::now();
    if (draft.empty()) {
      RETURN_IF_ERROR(model.forward({&token, 1}, seq, {.on_hidden = on_hidden}, logits, pool));
      if (spec) spec->record(0, 0, 1, seconds_since(step0));
      row = logits.data();
      continue;
    }
    batch.assign(1, token);
    batch.insert(batch.end(), draft.begin(), draft.end());
    const bool journal = seq.has_recurrent_state();
    if (journal) RETURN_IF_ERROR(seq.begin_journal(static_cast<int64_t>(batch.size())));
    const Status fwd = model.forward(batch, seq, {.all_logits = true, .on_hidden = on_hidden}, logits, pool);
    if (!fwd.is_ok()) {
      if (journal) seq.end_journal();
      return fwd;
    }
    const double verify_seconds = seconds_since(step0);
    // Verify in order: row i holds the logits after batch[i], i.e. for draft[i].
    int64_t keep = pos + 1;  // positions that stay in the sequence: `token` and the accepted drafts
    int64_t accepted = 0;
    bool stop = false;
    for (size_t i = 0; i < draft.size(); ++i) {
      if (!budget_left()) break;  // the loop top stops (kLength)
      if (cancelled()) break;     // likewise (kCancelled)
      const int32_t y = sampler.sample(logits.data() + i * static_cast<size_t>(n_vocab), n_vocab);
      if (y != draft[i]) {
        pending = y, have_pending = true;
        break;
      }
      ++accepted;
      if (emit(y, keep)) {
        stop = true;  // an end-of-generation token: not kept, as if it had not been fed
        break;
      }
      ++keep;
    }
    spec->record(static_cast<int64_t>(draft.size()), accepted, static_cast<int64_t>(batch.size()), verify_seconds);
    const bool cut = seq.truncate(keep);
    if (journal) seq.end_journal();
    drafter->on_truncate(keep);
    if (!cut) return Status::runtime("speculative decoding could not roll the sequence back");
    if (stop) break;
    if (!have_pending) row = logits.data() + static_cast<size_t>(accepted) * static_cast<size_t>(n_vocab);
  }
  const std::string tail = detok.finish();
  if (!tail.empty()) on_text(tail);
  stats.generation_seconds = seconds_since(t0);
  if (spec) {
    stats.spec.n_steps = spec->stats().n_steps - spec_before.n_steps;
    stats.spec.n_drafted = spec->stats().n_drafted - spec_before.n_drafted;
    stats.spec.n_accepted = spec->stats().n_accepted - spec_before.n_accepted;
  }
  return stats;
}

}  // namespace moetier
