// The chat page of `moetier serve` (GET /): static files from src/server/webui/, embedded in
// the binary at build time (cmake/embed_webui.cmake writes webui_files()). The page itself is
// public, so a browser can load it; the API calls it makes carry the key (Authorization).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace httplib {
class Server;
struct Request;
}  // namespace httplib

namespace moetier::server {

struct WebUiFile {
  std::string_view name;  // file name in src/server/webui/, served at /NAME
  std::string_view body;
  std::string_view etag;  // quoted, from the file's SHA-256
};

// Every embedded file (generated source in the build folder).
std::span<const WebUiFile> webui_files();

struct WebUiOptions {
  bool enabled = true;  // false (--no-ui): GET / answers a note that the UI is off
};

// GET / and /index.html (the page) and /NAME for each other file, with Content-Type, ETag and
// 304 answers to If-None-Match; or, when disabled, the note at GET /.
void register_webui(httplib::Server& http, const WebUiOptions& options);

// Whether a request is for the page or its files, which need no API key.
bool is_webui_request(const httplib::Request& req);

}  // namespace moetier::server
