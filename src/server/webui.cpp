#include "server/webui.h"

#include <httplib.h>

#include "server/http_util.h"

namespace moetier::server {

namespace {

std::string_view content_type(std::string_view name) {
  auto ends_with = [name](std::string_view ext) { return name.ends_with(ext); };
  if (ends_with(".html")) return "text/html; charset=utf-8";
  if (ends_with(".js")) return "text/javascript; charset=utf-8";
  if (ends_with(".css")) return "text/css; charset=utf-8";
  if (ends_with(".svg")) return "image/svg+xml";
  if (ends_with(".png")) return "image/png";
  if (ends_with(".ico")) return "image/x-icon";
  if (ends_with(".json")) return "application/json; charset=utf-8";
  return "application/octet-stream";
}

const WebUiFile* find_file(std::string_view path) {
  if (path == "/") path = "/index.html";
  if (path.empty() || path[0] != '/') return nullptr;
  path.remove_prefix(1);
  for (const WebUiFile& f : webui_files()) {
    if (f.name == path) return &f;
  }
  return nullptr;
}

void serve_file(const WebUiFile& f, const httplib::Request& req, httplib::Response& res) {
  res.set_header("ETag", std::string(f.etag));
  // The browser may keep a copy but must ask again (a cheap 304), so a new build's page is
  // seen at the next reload.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (f.name.ends_with(".html")) {
    // Scripts and styles from this server only, no inline script: a reply that slipped past
    // the markdown renderer's escaping still could not run code.
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                   "frame-ancestors 'none'");
    res.set_header("Referrer-Policy", "no-referrer");
  }
  if (req.get_header_value("If-None-Match") == f.etag) {
    res.status = 304;
    return;
  }
  const std::string type(content_type(f.name));
  res.set_content(f.body.data(), f.body.size(), type.c_str());
}

}  // namespace

bool is_webui_request(const httplib::Request& req) {
  return (req.method == "GET" || req.method == "HEAD") && find_file(req.path) != nullptr;
}

void register_webui(httplib::Server& http, const WebUiOptions& options) {
  if (!options.enabled) {
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      send_error(res, {.http_status = 404,
                       .type = "not_found_error",
                       .message = "the web UI is off (--no-ui); the API is at /v1/chat/completions"});
    });
    return;
  }
  auto handler = [](const httplib::Request& req, httplib::Response& res) {
    if (const WebUiFile* f = find_file(req.path)) return serve_file(*f, req, res);
    res.status = 404;
  };
  http.Get("/", handler);
  for (const WebUiFile& f : webui_files()) {
    // A route is a regular expression: escape the dots of the file name.
    std::string pattern = "/";
    for (char c : f.name) {
      if (c == '.') pattern += '\\';
      pattern += c;
    }
    http.Get(pattern, handler);
  }
}

}  // namespace moetier::server
