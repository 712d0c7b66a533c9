// Anthropic's Messages API on top of the chat endpoint, as llama-server serves it:
// POST /v1/messages (system, content blocks text / tool_use / tool_result, tools with
// input_schema, tool_choice auto|any|tool|none, stop_sequences, max_tokens, streaming as
// message_start / content_block_* / message_delta / message_stop events) and
// POST /v1/messages/count_tokens. Each request is translated to an OpenAI chat request, run
// by the chat handler, and its answer translated back; the translation is the only logic here.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/server_state.h"

namespace moetier::server {

// The OpenAI chat request for an Anthropic one; nullopt and `error` set when it is malformed.
std::optional<nlohmann::json> anthropic_to_chat(const nlohmann::json& body, std::string& error);

// The Anthropic message for an OpenAI chat completion.
nlohmann::json chat_to_anthropic(const nlohmann::json& completion);

// count_tokens: the chat handler's /chat/completions/input_tokens.
void register_anthropic_routes(ServerState& st, httplib::Server& h, httplib::Server::Handler count_chat_tokens);

}  // namespace moetier::server
