// OpenAI-style error responses: {"error": {"message", "type", "param", "code"}} with the
// HTTP status that goes with them. Every error the server returns has this shape.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace moetier::server {

struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the offending request field; "" = null
  std::string code;   // a machine-readable code ("context_length_exceeded"); "" = null
  nlohmann::json extra = nullptr;  // more fields of the error object (llama-server's n_ctx, …)

  static ApiError bad_request(std::string message, std::string param = {}) {
    return {.http_status = 400, .message = std::move(message), .param = std::move(param)};
  }
  nlohmann::json to_json() const;
};

// Serialises `j` for the wire: never throws on text that is not valid UTF-8 (invalid bytes
// become U+FFFD), so no generated output can break a response.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace moetier::server
