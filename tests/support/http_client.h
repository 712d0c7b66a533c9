// HTTP helpers for the server tests: JSON requests and SSE streams over loopback.
#pragma once

#include <httplib.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moetier::testing {

struct HttpReply {
  int status = 0;        // 0: no response (connection failed)
  std::string error;     // with status 0: why, in cpp-httplib's words (Read, Connection, ...)
  std::string body;
  nlohmann::json json;   // parsed body (discarded when not JSON)
  httplib::Headers headers;
};

inline HttpReply to_reply(const httplib::Result& r) {
  HttpReply out;
  if (!r) {
    out.error = httplib::to_string(r.error());
    return out;
  }
  out.headers = r->headers;
  out.status = r->status;
  out.body = r->body;
  out.json = nlohmann::json::parse(out.body, nullptr, false);
  return out;
}

inline HttpReply post_raw(httplib::Client& c, const std::string& path, const std::string& body,
                          const httplib::Headers& headers = {}) {
  return to_reply(c.Post(path.c_str(), headers, body, "application/json"));
}

inline HttpReply post_json(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                           const httplib::Headers& headers = {}) {
  return post_raw(c, path, body.dump(), headers);
}

inline HttpReply get(httplib::Client& c, const std::string& path, const httplib::Headers& headers = {}) {
  return to_reply(c.Get(path.c_str(), headers));
}

struct SseReply {
  int status = 0;
  std::string error;                   // with status 0: why (cpp-httplib's words)
  std::vector<nlohmann::json> events;  // the `data:` payloads before [DONE], parsed
  bool done = false;                   // saw `data: [DONE]`
  bool all_json = true;                // every payload parsed as JSON
  std::string raw;
};

// POSTs `body` and reads the SSE stream. on_event (optional) sees each event as it arrives;
// returning false from it closes the connection (a client going away).
inline SseReply post_sse(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                         const std::function<bool(const nlohmann::json&)>& on_event = nullptr,
                         const httplib::Headers& headers = {}) {
  SseReply out;
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = headers;
  req.headers.emplace("Content-Type", "application/json");
  req.body = body.dump();
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    out.raw.append(data, len);
    buffer.append(data, len);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        out.done = true;
        continue;
      }
      auto j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded()) {
        out.all_json = false;
        continue;
      }
      out.events.push_back(j);
      if (on_event && !on_event(j)) return false;
    }
    return true;
  };
  auto res = c.send(req);
  if (res && out.status == 0) out.status = res->status;
  if (!res) out.error = httplib::to_string(res.error());
  return out;
}

// Concatenated delta fields ("content" / "reasoning_content" for chat, "text" for
// completions) of a stream's events.
inline std::string stream_text(const SseReply& r, const std::string& field) {
  std::string out;
  for (const auto& e : r.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const auto& c = e["choices"][0];
    if (field == "text") {
      if (c.contains("text") && c["text"].is_string()) out += c["text"].get<std::string>();
    } else if (c.contains("delta") && c["delta"].contains(field) && c["delta"][field].is_string()) {
      out += c["delta"][field].get<std::string>();
    }
  }
  return out;
}

inline std::string stream_finish_reason(const SseReply& r) {
  for (const auto& e : r.events) {
    if (e.contains("choices") && !e["choices"].empty() && e["choices"][0]["finish_reason"].is_string()) {
      return e["choices"][0]["finish_reason"].get<std::string>();
    }
  }
  return "";
}

}  // namespace moetier::testing
