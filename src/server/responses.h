// OpenAI response bodies for one generation: the streamed chunks (SSE `data:` payloads) and
// the complete, non-streamed response, for /v1/chat/completions and /v1/completions.
// Beyond OpenAI's fields they carry llama-server's `timings`, so tools written for it work.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/task.h"
#include "text/tokenizer.h"

namespace moetier::server {

enum class Endpoint {
  kChat,        // POST /v1/chat/completions (OpenAI)
  kCompletion,  // POST /v1/completions (OpenAI)
  kNative,      // POST /completion (llama-server's own format)
  kInfill,      // POST /infill (llama-server's format, fill-in-the-middle)
};

struct ResponseMeta {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;       // "chatcmpl-…" / "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;
  const text::Tokenizer* tokenizer = nullptr;  // token pieces for logprobs
};

// A new id for a response: prefix + 24 random alphanumerics.
std::string new_response_id(const char* prefix);

// The output of one choice so far (a chat reply's text, split from its reasoning and tool calls).
struct ChoiceOutput {
  std::string content;
  std::string reasoning;
  nlohmann::ordered_json tool_calls;  // null, or OpenAI's [{id, type, function: {name, arguments}}]
  std::vector<PositionLogprobs> logprobs;
};

// Streamed chunks of OpenAI's formats. Chat streams begin, per choice, with a chunk whose
// delta is {"role": "assistant", "content": null} (as llama-server and OpenAI).
nlohmann::ordered_json first_chat_chunk(const ResponseMeta& meta, int index);
// New text (content and/or reasoning) and the logprobs of the tokens since the last chunk;
// `tool_call_deltas`: null or OpenAI's delta.tool_calls array.
nlohmann::ordered_json delta_chunk(const ResponseMeta& meta, int index, const std::string& content,
                                   const std::string& reasoning, const std::vector<PositionLogprobs>& logprobs,
                                   const nlohmann::ordered_json& tool_call_deltas = nullptr);
// The last chunk of a choice: empty delta with the finish reason ("tool_calls" when the
// reply was tool calls), and timings.
nlohmann::ordered_json finish_chunk(const ResponseMeta& meta, int index, const TaskEvent& final_event, bool tool_calls);
// stream_options.include_usage: a chunk with no choices, the usage and llama-server's timings.
nlohmann::ordered_json usage_chunk(const ResponseMeta& meta, const TaskTimings& usage, const TaskTimings& timings);

// One choice of a non-streamed response.
nlohmann::ordered_json choice_json(const ResponseMeta& meta, int index, const ChoiceOutput& out, const TaskEvent& final_event);
// The whole response of a non-streamed request; `usage` sums the choices.
nlohmann::ordered_json full_response(const ResponseMeta& meta, nlohmann::ordered_json choices, const TaskTimings& usage,
                                     const TaskTimings& timings);

nlohmann::ordered_json usage_json(const TaskTimings& t);
nlohmann::ordered_json timings_json(const TaskTimings& t);
// llama-server's completion_probabilities: per token {id, token, bytes, logprob|prob,
// top_logprobs|top_probs}.
nlohmann::ordered_json completion_probabilities(const text::Tokenizer& tokenizer,
                                                const std::vector<PositionLogprobs>& lps, bool post_sampling);

}  // namespace moetier::server
