// A minimal OpenAI-compatible chat client for the evaluation suites: one non-streamed
// POST /v1/chat/completions per call, against moetier serve, llama-server or any server
// speaking the same API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace moetier::eval {

struct ServerUrl {
  std::string host;
  int port = 80;
  std::string base;  // path prefix before /v1 (usually empty)
};
// "http://host:port", "http://host:port/v1" or "host:port". kBadInput otherwise (https is
// not supported: evaluate a local server, or put a local proxy in front of a remote one).
Result<ServerUrl> parse_server_url(const std::string& url);

struct ChatRequest {
  std::string user_message;
  std::string model = "moetier-eval";  // servers with one model accept any name
  int64_t max_tokens = 512;
  double temperature = 0;
  std::optional<int64_t> seed;
  double timeout_s = 3600;
};

struct ChatReply {
  std::string content;            // message.content
  std::string reasoning_content;  // message.reasoning_content (when the server separates it)
  std::string finish_reason;
  int64_t prompt_tokens = -1, completion_tokens = -1;  // usage
  nlohmann::json timings;         // the server's timings object, if any (llama-server / moetier)
  double wall_s = 0;              // request to reply, measured here
};

Result<ChatReply> chat(const ServerUrl& server, const ChatRequest& request);

// GET path → JSON (nullopt on any failure: optional information such as /props).
std::optional<nlohmann::json> get_json(const ServerUrl& server, const std::string& path);

}  // namespace moetier::eval
