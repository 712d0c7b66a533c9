// POST /v1/chat/completions and /v1/completions: validate, render and tokenize the prompt
// on the HTTP thread (errors are answered right away with 4xx), queue the task, then stream
// its events to the client as SSE chunks, or collect them into one JSON response. Either way
// the body is written from a chunked content provider, so a client that goes away is noticed
// within ~100 ms (a failed write or a closed socket) and its task is cancelled.
#pragma once

#include <httplib.h>

#include "server/responses.h"
#include "server/server_state.h"

namespace moetier::server {

void handle_generation(ServerState& state, Endpoint endpoint, const httplib::Request& req, httplib::Response& res);

// The prompt a chat request renders to (also /apply-template): messages through the chat
// template with the server's and the request's template variables.
std::optional<ApiError> render_chat_prompt(const ServerState& state, const GenerationRequest& request,
                                           std::string& prompt);

}  // namespace moetier::server
