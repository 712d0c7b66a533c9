// Small helpers for writing JSON responses with cpp-httplib.
#pragma once

#include <httplib.h>

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

}  // namespace moetier::server
