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

enum class Endpoint { kChat, kCompletion };

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

// One streamed chunk with new text (content and/or reasoning) and the logprobs of the tokens
// sampled since the previous chunk. Chat streams begin with a chunk whose delta is
// {"role": "assistant", "content": ""} (first_chat_chunk).
nlohmann::ordered_json first_chat_chunk(const ResponseMeta& meta);
nlohmann::ordered_json delta_chunk(const ResponseMeta& meta, const std::string& content, const std::string& reasoning,
                           const std::vector<PositionLogprobs>& logprobs);
// The last chunk: empty delta with the finish reason, and timings.
nlohmann::ordered_json finish_chunk(const ResponseMeta& meta, const TaskEvent& final_event);
// stream_options.include_usage: a chunk with no choices and the usage.
nlohmann::ordered_json usage_chunk(const ResponseMeta& meta, const TaskTimings& timings);

// The whole response of a non-streamed request.
nlohmann::ordered_json full_response(const ResponseMeta& meta, const std::string& content, const std::string& reasoning,
                             const std::vector<PositionLogprobs>& logprobs, const TaskEvent& final_event);

nlohmann::ordered_json usage_json(const TaskTimings& t);
nlohmann::ordered_json timings_json(const TaskTimings& t);

}  // namespace moetier::server
