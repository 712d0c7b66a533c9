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
  int64_t n_predict = -1;     // -n: the most tokens any reply gets (-1: no limit), as llama-server
  int64_t n_ctx_slot = 4096;  // a slot's context (repeat_last_n is capped by it)
  std::string reasoning_format = "auto";  // --reasoning-format
  bool verbose = false;       // -v: OpenAI responses carry `__verbose` unless the request says no
};

enum class ReasoningFormat {
  kAuto,  // <think> … </think> goes to reasoning_content
  kNone,  // left in content as the model wrote it
};

// One `logit_bias` entry before tokenization: a token id, or a string whose tokens all get
// the bias (llama-server's forms).
struct LogitBiasEntry {
  std::optional<int64_t> token;
  std::string text;
  float bias = 0.0f;  // -INFINITY: banned (the value false)
};

struct GenerationRequest {
  std::string model;  // as given ("" = not given; any name means the served model)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  SamplerParams sampling;
  int64_t max_tokens = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int n_logprobs = -1;  // -1: no logprobs; else the number of top alternatives per token
  bool cache_prompt = true;
  ReasoningFormat reasoning_format = ReasoningFormat::kAuto;
  int n_choices = 1;                       // OpenAI `n`
  std::vector<LogitBiasEntry> logit_bias;
  int id_slot = -1;                        // llama-server: run in this slot
  int64_t n_keep = 0;                      // llama-server: tokens a context shift keeps (-1: the prompt)
  int64_t n_discard = 0;                   // llama-server: tokens a context shift drops (0: half)
  bool post_sampling_probs = false;        // llama-server: probabilities after the sampler chain
  // Constrained output: a GBNF grammar, a JSON schema, or any JSON object (response_format
  // json_object). At most one is set.
  std::optional<std::string> grammar;
  std::optional<nlohmann::ordered_json> json_schema;
  bool json_object = false;

  // /v1/chat/completions
  nlohmann::ordered_json messages;              // array of message objects
  nlohmann::ordered_json tools;                 // null or array
  nlohmann::ordered_json chat_template_kwargs;  // object (may be empty)

  // /v1/completions: text, or token ids
  // /v1/completions, /completion: one or more prompts, each a string or an array of token ids
  // (for /completion, ids mixed with strings).
  std::vector<nlohmann::ordered_json> prompts;
  std::optional<std::string> prompt_text;  // /infill: text after <|fim_middle|>
  bool echo = false;

  // llama-server's native /completion and /infill
  bool return_tokens = false;       // the token ids of each chunk in `tokens`
  bool timings_per_token = false;   // timings in every streamed chunk
  bool return_progress = false;     // prompt-processing progress chunks
  bool verbose = false;             // llama-server: `__verbose` (the native result object) in OpenAI responses
  std::vector<std::string> response_fields;  // the final object holds only these paths
  std::string input_prefix, input_suffix;     // /infill
  nlohmann::ordered_json input_extra;         // /infill: [{filename, text}], or null
  bool continue_final_message = false;        // chat: the last (assistant) message is continued
  bool add_generation_prompt = true;          // /apply-template
  std::string tool_choice = "auto";           // auto | none | required | function
  std::string tool_choice_function;           // tool_choice {"type":"function","function":{"name"}}
  bool parallel_tool_calls = true;            // false: at most one call per reply
};

std::optional<ApiError> parse_chat_request(const nlohmann::ordered_json& body, const RequestDefaults& defaults,
                                           GenerationRequest& out);
std::optional<ApiError> parse_completion_request(const nlohmann::ordered_json& body, const RequestDefaults& defaults,
                                                 GenerationRequest& out);
// llama-server's native POST /completion (prompt: a string, token ids, or a mix of both)
// and POST /infill (input_prefix, input_suffix, input_extra; prompt optional).
std::optional<ApiError> parse_native_completion_request(const nlohmann::ordered_json& body,
                                                        const RequestDefaults& defaults, bool infill,
                                                        GenerationRequest& out);

// Parses an HTTP body as one JSON object; errors name the byte where parsing failed.
std::optional<ApiError> parse_json_body(const std::string& body, nlohmann::ordered_json& out);

}  // namespace moetier::server
