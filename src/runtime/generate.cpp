#include "runtime/generate.h"

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

  auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(model.forward(prompt, seq, {}, logits, pool));
  for (int32_t t : prompt) sampler.accept(t);
  stats.prompt_seconds = seconds_since(t0);

  text::Detokenizer detok(tokenizer, params.render_special);
  t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (params.n_predict >= 0 && stats.n_generated >= params.n_predict) {
      stats.stop = StopReason::kLength;
      break;
    }
    if (params.cancel && params.cancel->load()) {
      stats.stop = StopReason::kCancelled;
      break;
    }
    const int32_t token = sampler.sample(logits.data(), n_vocab);
    sampler.accept(token);
    ++stats.n_generated;
    if (on_token) on_token(token);
    if (params.stop_at_eog && tokenizer.is_eog(token)) {
      stats.stop = StopReason::kEog;
      break;
    }
    const std::string piece = detok.push(token);
    if (!piece.empty()) on_text(piece);
    if (seq.n_past() >= seq.n_ctx()) {
      stats.stop = StopReason::kContextFull;
      break;
    }
    RETURN_IF_ERROR(model.forward({&token, 1}, seq, {}, logits, pool));
  }
  const std::string tail = detok.finish();
  if (!tail.empty()) on_text(tail);
  stats.generation_seconds = seconds_since(t0);
  return stats;
}

}  // namespace moetier
