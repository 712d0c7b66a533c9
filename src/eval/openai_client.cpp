#include "eval/openai_client.h"

#include <chrono>

#include <fmt/format.h>
#include <httplib.h>

namespace moetier::eval {

Result<ServerUrl> parse_server_url(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) {
    return Status::bad_input("https URLs are not supported: give the server's http://host:port address");
  }
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  ServerUrl out;
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) out.base = rest.substr(slash);
  while (!out.base.empty() && out.base.back() == '/') out.base.pop_back();
  if (out.base.size() >= 3 && out.base.substr(out.base.size() - 3) == "/v1") out.base.resize(out.base.size() - 3);
  const size_t colon = hostport.rfind(':');
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      out.port = std::stoi(hostport.substr(colon + 1), &used);
      if (used != hostport.size() - colon - 1 || out.port <= 0 || out.port > 65535) throw std::invalid_argument("port");
    } catch (const std::exception&) {
      return Status::bad_input(fmt::format("bad port in the server URL '{}'", url));
    }
    hostport.resize(colon);
  }
  if (hostport.empty()) return Status::bad_input(fmt::format("no host in the server URL '{}'", url));
  out.host = hostport;
  return out;
}

Result<ChatReply> chat(const ServerUrl& server, const ChatRequest& request) {
  httplib::Client cli(server.host, server.port);
  const auto secs = static_cast<time_t>(request.timeout_s);
  cli.set_read_timeout(secs, 0);
  cli.set_write_timeout(60, 0);
  cli.set_connection_timeout(10, 0);
  nlohmann::json body = {{"model", request.model},
                         {"messages", nlohmann::json::array({{{"role", "user"}, {"content", request.user_message}}})},
                         {"max_tokens", request.max_tokens},
                         {"temperature", request.temperature},
                         {"stream", false}};
  if (request.seed) body["seed"] = *request.seed;
  const auto t0 = std::chrono::steady_clock::now();
  auto res = cli.Post(server.base + "/v1/chat/completions", body.dump(), "application/json");
  ChatReply reply;
  reply.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!res) {
    return Status::runtime(fmt::format("no reply from {}:{} ({})", server.host, server.port, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Status::runtime(fmt::format("the server answered HTTP {}: {}", res->status, res->body.substr(0, 400)));
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(res->body);
    const nlohmann::json& choice = j.at("choices").at(0);
    const nlohmann::json& msg = choice.at("message");
    if (msg.contains("content") && msg["content"].is_string()) reply.content = msg["content"];
    if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string()) reply.reasoning_content = msg["reasoning_content"];
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) reply.finish_reason = choice["finish_reason"];
    if (j.contains("usage") && j["usage"].is_object()) {
      reply.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{-1});
      reply.completion_tokens = j["usage"].value("completion_tokens", int64_t{-1});
    }
    if (j.contains("timings")) reply.timings = j["timings"];
  } catch (const std::exception& e) {
    return Status::runtime(fmt::format("the server's reply is not an OpenAI chat completion ({})", e.what()));
  }
  return reply;
}

std::optional<nlohmann::json> get_json(const ServerUrl& server, const std::string& path) {
  httplib::Client cli(server.host, server.port);
  cli.set_read_timeout(10, 0);
  cli.set_connection_timeout(5, 0);
  auto res = cli.Get(server.base + path);
  if (!res || res->status != 200) return std::nullopt;
  try {
    return nlohmann::json::parse(res->body);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace moetier::eval
