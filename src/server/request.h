// OpenAI request bodies → validated parameters, before anything touches the model: wrong
// types, out-of-range values and unsupported options become an ApiError naming the field.
// Unknown fields are ignored (clients send many); null counts as absent. No tokenizer or
// model is needed here, so this layer is fuzzed on its own (tests/fuzz/fuzz_openai_request.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "server/api_error.h"

namespace moetier::server {

// What the command line sets for requests that do not say.
struct RequestDefaults {
  SamplerParams sampling;
  int64_t n_predict = -1;     // -n: max_tokens when a request gives none (-1: no limit)
  int64_t n_ctx_slot = 4096;  // max_tokens above this are refused
  std::string reasoning_format = "auto";  // --reasoning-format
};

enum class ReasoningFormat {
  kAuto,  // <think> … </think> goes to reasoning_content
  kNone,  // left in content as the model wrote it
};

struct GenerationRequest {
  std::string model;  // as given ("" = not given)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  SamplerParams sampling;
  int64_t max_tokens = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int n_logprobs = -1;  // -1: no logprobs; else the number of top alternatives per token
  bool cache_prompt = true;
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;

  // /v1/chat/completions
  nlohmann::ordered_json messages;              // array of message objects
  nlohmann::ordered_json tools;                 // null or array
  nlohmann::ordered_json chat_template_kwargs;  // object (may be empty)

  // /v1/completions: text, or token ids
  std::optional<std::string> prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool echo = false;
};

std::optional<ApiError> parse_chat_request(const nlohmann::ordered_json& body, const RequestDefaults& defaults,
                                           GenerationRequest& out);
std::optional<ApiError> parse_completion_request(const nlohmann::ordered_json& body, const RequestDefaults& defaults,
                                                 GenerationRequest& out);

// Parses an HTTP body as one JSON object; errors name the byte where parsing failed.
std::optional<ApiError> parse_json_body(const std::string& body, nlohmann::ordered_json& out);

}  // namespace moetier::server
