// The decode loop shared by `run`, `chat` and (later) the server: prefill a prompt, then
// sample one token at a time until the token budget, an end-of-generation token or a
// cancel request; text is streamed as complete UTF-8 pieces.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "text/tokenizer.h"

namespace moetier {

struct GenerationParams {
  int64_t n_predict = 128;        // tokens to generate at most; < 0: until EOG or the context is full
  bool stop_at_eog = true;        // stop at the model's end-of-generation tokens
  bool render_special = false;    // include control-token text (e.g. <|im_end|>) in the output
  const std::atomic<bool>* cancel = nullptr;  // set to stop after the current token
  // Speculative decoding (runtime/speculative.h): drafts verified in batches; the output is
  // the same as without it. nullptr: one token per forward pass.
  Speculator* speculator = nullptr;
  // Tokens already in the sequence before `prompt` (earlier chat turns), for drafters that
  // look back over the conversation (ngram-simple). Empty: the prompt is the whole history.
  std::span<const int32_t> earlier_tokens;
};

enum class StopReason { kLength, kEog, kContextFull, kCancelled };

struct GenerationStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;
  double prompt_seconds = 0;
  double generation_seconds = 0;
  StopReason stop = StopReason::kLength;
  SpecStats spec;  // this generation's drafted / accepted counts (zero without a speculator)
  double prompt_tokens_per_second() const { return prompt_seconds > 0 ? n_prompt / prompt_seconds : 0; }
  double generation_tokens_per_second() const {
    return generation_seconds > 0 ? n_generated / generation_seconds : 0;
  }
};

// Appends `prompt` to `seq` (which may already hold earlier turns) and generates.
// on_text receives each newly completed piece of text; on_token each sampled id.
Result<GenerationStats> generate(Model& model, SequenceState& seq, const text::Tokenizer& tokenizer,
                                 Sampler& sampler, std::span<const int32_t> prompt, const GenerationParams& params,
                                 ThreadPool& pool, const std::function<void(std::string_view)>& on_text,
                                 const std::function<void(int32_t)>& on_token = nullptr);

}  // namespace moetier
