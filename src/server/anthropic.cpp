#include "server/anthropic.h"

#include <memory>
#include <string>
#include <utility>

#include "server/generation_endpoint.h"
#include "server/http_util.h"

namespace moetier::server {

using nlohmann::json;

namespace {

// A block list's text ("text" blocks joined); a string is its own text.
std::string blocks_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (!content.is_array()) return out;
  for (const json& b : content) {
    if (b.is_object() && b.value("type", "") == "text" && b.contains("text") && b["text"].is_string()) {
      out += b["text"].get<std::string>();
    }
  }
  return out;
}

json anthropic_error(int status, const std::string& message) {
  const char* type = status == 401 ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status >= 500 ? "api_error"
                                     : "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

void send_anthropic_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, anthropic_error(status, message), status);
}

// The error message of an OpenAI error body (or the body itself).
std::string error_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message")) {
    return j["error"]["message"].get<std::string>();
  }
  return body;
}

std::string stop_reason(const json& finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  return "end_turn";
}

json usage_of(const json& usage) {
  json out = {{"input_tokens", usage.value("prompt_tokens", 0)},
              {"output_tokens", usage.value("completion_tokens", 0)},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", 0}};
  if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object()) {
    out["cache_read_input_tokens"] = usage["prompt_tokens_details"].value("cached_tokens", 0);
  }
  return out;
}

std::string sse_event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

// Turns the chat handler's SSE chunks into Anthropic's stream events, block by block.
class StreamTranslator {
 public:
  StreamTranslator(std::string id, std::string model, int input_tokens)
      : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}

  // Feeds raw SSE bytes; appends the events they complete to `out`.
  void feed(const char* data, size_t size, std::string& out) {
    buffer_.append(data, size);
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;  // heartbeats
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        finish(out);
        continue;
      }
      on_chunk(json::parse(payload, nullptr, false), out);
    }
  }
  void finish(std::string& out) {
    if (stopped_) return;
    start(out);
    close_block(out);
    out += sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", nullptr}}},
                                       {"usage", {{"output_tokens", output_tokens_}}}});
    out += sse_event("message_stop", {{"type", "message_stop"}});
    stopped_ = true;
  }

 private:
  void start(std::string& out) {
    if (started_) return;
    started_ = true;
    out += sse_event("message_start",
                     {{"type", "message_start"},
                      {"message", {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_},
                                   {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                                   {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}}}});
  }
  void open_block(const std::string& kind, const json& block, std::string& out) {
    if (block_ == kind && kind != "tool_use") return;
    close_block(out);
    block_ = kind;
    out += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
  }
  void close_block(std::string& out) {
    if (block_.empty()) return;
    out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    block_.clear();
    ++index_;
  }
  void delta(const json& d, std::string& out) {
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }
  void on_chunk(const json& j, std::string& out) {
    if (!j.is_object()) return;
    if (!started_ && j.contains("id") && j["id"].is_string()) {  // the chat's id, as the unstreamed message has it
      const std::string id = j["id"].get<std::string>();
      id_ = id.rfind("chatcmpl-", 0) == 0 ? "msg_" + id.substr(9) : id;
    }
    start(out);
    if (j.contains("error")) {
      out += sse_event("error", anthropic_error(500, error_message(j.dump())));
      return;
    }
    if (j.contains("usage") && j["usage"].is_object()) output_tokens_ = j["usage"].value("completion_tokens", output_tokens_);
    if (!j.contains("choices") || j["choices"].empty()) return;
    const json& c = j["choices"][0];
    const json d = c.value("delta", json::object());
    if (d.contains("reasoning_content") && d["reasoning_content"].is_string() && !d["reasoning_content"].get<std::string>().empty()) {
      open_block("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}, out);
      delta({{"type", "thinking_delta"}, {"thinking", d["reasoning_content"]}}, out);
    }
    if (d.contains("content") && d["content"].is_string() && !d["content"].get<std::string>().empty()) {
      open_block("text", {{"type", "text"}, {"text", ""}}, out);
      delta({{"type", "text_delta"}, {"text", d["content"]}}, out);
    }
    if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
      for (const json& tc : d["tool_calls"]) {
        const json f = tc.value("function", json::object());
        if (f.contains("name") && f["name"].is_string()) {
          open_block("tool_use",
                     {{"type", "tool_use"}, {"id", tc.value("id", "")}, {"name", f["name"]}, {"input", json::object()}},
                     out);
        }
        if (f.contains("arguments") && f["arguments"].is_string() && !f["arguments"].get<std::string>().empty()) {
          delta({{"type", "input_json_delta"}, {"partial_json", f["arguments"]}}, out);
        }
      }
    }
    if (c.contains("finish_reason") && !c["finish_reason"].is_null()) stop_reason_ = stop_reason(c["finish_reason"]);
  }

  std::string id_, model_;
  int input_tokens_ = 0;
  std::string buffer_;
  bool started_ = false, stopped_ = false;
  std::string block_;  // the open block's kind ("" when none)
  int index_ = 0;
  int output_tokens_ = 0;
  std::string stop_reason_ = "end_turn";
};

}  // namespace

std::optional<json> anthropic_to_chat(const json& body, std::string& error) {
  if (!body.is_object()) {
    error = "the body is not a JSON object";
    return std::nullopt;
  }
  if (!body.contains("messages") || !body["messages"].is_array()) {
    error = "'messages' must be an array";
    return std::nullopt;
  }
  json messages = json::array();
  if (body.contains("system")) {
    const std::string system = blocks_text(body["system"]);
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  }
  for (const json& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      error = "each message needs a 'role'";
      return std::nullopt;
    }
    const std::string role = m["role"].get<std::string>();
    const json content = m.value("content", json(""));
    if (content.is_string()) {
      messages.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) {
      error = "'content' must be a string or an array of blocks";
      return std::nullopt;
    }
    json parts = json::array();
    json tool_calls = json::array();
    for (const json& b : content) {
      const std::string type = b.is_object() ? b.value("type", "") : "";
      if (type == "text") {
        parts.push_back({{"type", "text"}, {"text", b.value("text", "")}});
      } else if (type == "image") {
        const json src = b.value("source", json::object());
        const std::string url = src.value("type", "") == "base64"
                                    ? "data:" + src.value("media_type", "image/png") + ";base64," + src.value("data", "")
                                    : src.value("url", "");
        parts.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
      } else if (type == "tool_use") {
        tool_calls.push_back({{"id", b.value("id", "")},
                              {"type", "function"},
                              {"function", {{"name", b.value("name", "")}, {"arguments", b.value("input", json::object()).dump()}}}});
      } else if (type == "tool_result") {
        // A tool's result is its own message in the OpenAI shape.
        std::string text = blocks_text(b.value("content", json("")));
        if (b.value("is_error", false)) text = "Error: " + text;
        if (!parts.empty()) {
          messages.push_back({{"role", role}, {"content", parts}});
          parts = json::array();
        }
        messages.push_back({{"role", "tool"}, {"tool_call_id", b.value("tool_use_id", "")}, {"content", text}});
      } else if (type == "thinking" || type == "redacted_thinking") {
        continue;  // earlier thoughts are not sent back to the model
      } else {
        error = "unsupported content block type '" + type + "'";
        return std::nullopt;
      }
    }
    if (!tool_calls.empty()) {
      json msg = {{"role", role}, {"content", parts.empty() ? json(nullptr) : json(blocks_text(parts))}, {"tool_calls", tool_calls}};
      messages.push_back(std::move(msg));
    } else if (!parts.empty()) {
      messages.push_back({{"role", role}, {"content", parts}});
    }
  }
  json chat = {{"messages", messages}};
  for (const char* k : {"model", "max_tokens", "temperature", "top_p", "top_k", "stream"}) {
    if (body.contains(k)) chat[k] = body[k];
  }
  if (body.contains("stop_sequences")) chat["stop"] = body["stop_sequences"];
  if (body.contains("tools") && body["tools"].is_array()) {
    json tools = json::array();
    for (const json& t : body["tools"]) {
      if (!t.is_object()) continue;
      tools.push_back({{"type", "function"},
                       {"function", {{"name", t.value("name", "")},
                                     {"description", t.value("description", "")},
                                     {"parameters", t.value("input_schema", json{{"type", "object"}})}}}});
    }
    chat["tools"] = tools;
  }
  if (body.contains("tool_choice") && body["tool_choice"].is_object()) {
    const std::string type = body["tool_choice"].value("type", "auto");
    if (type == "any") chat["tool_choice"] = "required";
    if (type == "none") chat["tool_choice"] = "none";
    if (type == "auto") chat["tool_choice"] = "auto";
    if (type == "tool") chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", body["tool_choice"].value("name", "")}}}};
    if (body["tool_choice"].value("disable_parallel_tool_use", false)) chat["parallel_tool_calls"] = false;
  }
  if (body.contains("thinking") && body["thinking"].is_object()) {
    chat["chat_template_kwargs"] = {{"enable_thinking", body["thinking"].value("type", "") == "enabled"}};
  }
  return chat;
}

json chat_to_anthropic(const json& completion) {
  json content = json::array();
  const json& choice = completion["choices"][0];
  const json& msg = choice["message"];
  if (msg.contains("reasoning_content") && msg["reasoning_content"].is_string()) {
    content.push_back({{"type", "thinking"}, {"thinking", msg["reasoning_content"]}, {"signature", ""}});
  }
  const std::string text = msg.contains("content") && msg["content"].is_string() ? msg["content"].get<std::string>() : "";
  const bool calls = msg.contains("tool_calls") && msg["tool_calls"].is_array() && !msg["tool_calls"].empty();
  if (!text.empty() || !calls) content.push_back({{"type", "text"}, {"text", text}});
  if (calls) {
    for (const json& tc : msg["tool_calls"]) {
      json input = json::parse(tc["function"].value("arguments", "{}"), nullptr, false);
      if (!input.is_object()) input = json::object();
      content.push_back({{"type", "tool_use"}, {"id", tc.value("id", "")}, {"name", tc["function"].value("name", "")}, {"input", input}});
    }
  }
  std::string id = completion.value("id", "");
  if (id.rfind("chatcmpl-", 0) == 0) id = "msg_" + id.substr(9);
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", completion.value("model", "")},
          {"content", content},
          {"stop_reason", stop_reason(choice.value("finish_reason", json("stop")))},
          {"stop_sequence", nullptr},
          {"usage", usage_of(completion.value("usage", json::object()))}};
}

void register_anthropic_routes(ServerState& st, httplib::Server& h, httplib::Server::Handler count_chat_tokens) {
  const httplib::Server::Handler chat = [&st](const httplib::Request& req, httplib::Response& res) {
    handle_generation(st, Endpoint::kChat, req, res);
  };
  auto count = [count_chat_tokens](const json& request, const httplib::Request& req) -> std::pair<int, std::string> {
    httplib::Request inner;
    inner.method = "POST";
    inner.path = "/v1/chat/completions/input_tokens";
    inner.headers = req.headers;
    inner.body = request.dump();
    return run_inside(count_chat_tokens, inner);
  };
  h.Post("/v1/messages", [chat, count](const httplib::Request& req, httplib::Response& res) {
    std::string error;
    const json body = json::parse(req.body, nullptr, false);
    auto request = anthropic_to_chat(body, error);
    if (!request) return send_anthropic_error(res, 400, error);
    if (!request->value("stream", false)) {
      request->erase("stream");
      httplib::Request inner;
      inner.method = "POST";
      inner.path = "/v1/chat/completions";
      inner.headers = req.headers;
      inner.body = request->dump();
      auto [status, text] = run_inside(chat, inner);
      if (status >= 400) return send_anthropic_error(res, status, error_message(text));
      const json completion = json::parse(text, nullptr, false);
      if (!completion.is_object() || !completion.contains("choices")) return send_anthropic_error(res, 500, text);
      return send_json(res, chat_to_anthropic(completion));
    }
    // Streamed: the chat handler's stream, translated chunk by chunk.
    auto [count_status, count_text] = count(*request, req);
    const json counted = json::parse(count_text, nullptr, false);
    const int input_tokens = count_status == 200 && counted.is_object() ? counted.value("input_tokens", 0) : 0;
    (*request)["stream_options"] = {{"include_usage", true}};
    auto inner_req = std::make_shared<httplib::Request>();
    inner_req->method = "POST";
    inner_req->path = "/v1/chat/completions";
    inner_req->headers = req.headers;
    inner_req->body = request->dump();
    auto inner = std::make_shared<httplib::Response>();
    chat(*inner_req, *inner);
    if (!inner->content_provider_) return send_anthropic_error(res, inner->status, error_message(inner->body));
    auto translator = std::make_shared<StreamTranslator>("msg_", request->value("model", ""), input_tokens);
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [inner, inner_req, translator](size_t, httplib::DataSink& sink) {
      bool done = false, client = true;
      httplib::DataSink relay;
      relay.write = [&](const char* data, size_t size) {
        std::string out;
        translator->feed(data, size, out);
        if (!out.empty() && !sink.write(out.data(), out.size())) client = false;
        return client;
      };
      relay.is_writable = [&] { return client && sink.is_writable(); };
      relay.done = [&] { done = true; };
      inner->content_provider_(0, 0, relay);
      inner->content_provider_success_ = done;
      if (!client) return false;
      std::string tail;
      translator->finish(tail);
      if (!tail.empty() && !sink.write(tail.data(), tail.size())) return false;
      sink.done();
      return true;
    });
  });
  h.Post("/v1/messages/count_tokens", [count](const httplib::Request& req, httplib::Response& res) {
    std::string error;
    auto request = anthropic_to_chat(json::parse(req.body, nullptr, false), error);
    if (!request) return send_anthropic_error(res, 400, error);
    auto [status, text] = count(*request, req);
    if (status >= 400) return send_anthropic_error(res, status, error_message(text));
    const json counted = json::parse(text, nullptr, false);
    send_json(res, json{{"input_tokens", counted.value("input_tokens", 0)}});
  });
}

}  // namespace moetier::server
