// Small helpers for writing JSON responses with cpp-httplib.
#pragma once

#include <httplib.h>

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace moetier::server {

inline void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200) {
  res.status = status;
  res.set_content(dump_json(body), "application/json; charset=utf-8");
}

inline void send_json(httplib::Response& res, const nlohmann::ordered_json& body, int status = 200) {
  res.status = status;
  res.set_content(dump_json(body), "application/json; charset=utf-8");
}

inline void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.to_json(), e.http_status); }

// Runs `handler` on a request made inside the server and returns its status and whole body
// (a streamed or chunked answer read to its end).
inline std::pair<int, std::string> run_inside(const httplib::Server::Handler& handler, httplib::Request& req) {
  httplib::Response res;
  handler(req, res);
  std::string body = res.body;
  if (res.content_provider_) {
    bool done = false;
    httplib::DataSink sink;
    sink.write = [&body](const char* data, size_t size) {
      body.append(data, size);
      return true;
    };
    sink.is_writable = [] { return true; };
    sink.done = [&done] { done = true; };
    size_t offset = 0;
    while (!done) {
      const size_t before = body.size();
      if (!res.content_provider_(offset, res.content_length_ > 0 ? res.content_length_ - offset : 0, sink)) break;
      offset += body.size() - before;
      if (res.content_length_ > 0 && offset >= res.content_length_) break;
    }
    res.content_provider_success_ = done || (res.content_length_ > 0 && offset >= res.content_length_);
  }
  return {res.status, std::move(body)};
}

}  // namespace moetier::server
