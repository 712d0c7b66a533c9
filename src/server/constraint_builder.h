// What a chat or completion request asks of its output beyond sampling, built once per
// request on the HTTP thread:
//   * a constraint on the tokens (GBNF `grammar`, `json_schema`, `response_format`
//     json_object/json_schema, and tool_choice required or a named function), compiled
//     once and instantiated per choice (each holds its own grammar state);
//   * for chat requests with tools, a parser that turns the model's tool-call markup into
//     OpenAI `tool_calls`, streamed as deltas.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/request.h"
#include "server/task.h"

namespace moetier::server {

struct ServerState;

class ConstraintFactory {
 public:
  virtual ~ConstraintFactory() = default;
  virtual std::shared_ptr<TokenConstraint> make() const = 0;
};

// The request constrains its output (grammar, schema, JSON mode, forced tool calls).
bool output_constrained(const GenerationRequest& r);

// Compiles the request's constraint; null when it has none. Errors (an invalid grammar or
// schema, an unknown tool name) are 400s naming the field. `prompt_opens_reasoning`: the
// chat prompt ends inside an open think block; forced tool calls then come after "</think>".
std::optional<ApiError> build_constraint(const ServerState& st, const GenerationRequest& r,
                                         std::shared_ptr<const ConstraintFactory>& out, bool prompt_opens_reasoning = false);

// Splits a chat reply into text and tool calls, as the model writes them.
class ChatOutputParser {
 public:
  virtual ~ChatOutputParser() = default;
  struct Delta {
    std::string content;
    nlohmann::ordered_json tool_call_deltas = nullptr;  // OpenAI delta.tool_calls, or null
  };
  virtual Delta push(const std::string& text) = 0;
  virtual Delta finish(const std::string& text) = 0;  // the last text; releases what is held
  virtual bool saw_tool_calls() const = 0;
  struct Parsed {
    std::string content;
    nlohmann::ordered_json tool_calls = nullptr;  // null or [{id, type, function}]
  };
  virtual Parsed parse_full(const std::string& text) const = 0;
};

// Null when the request has no tools (or tool_choice none).
std::unique_ptr<ChatOutputParser> make_chat_output_parser(const ServerState& st, const GenerationRequest& r);

}  // namespace moetier::server
