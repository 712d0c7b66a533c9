// The HTTP side of `moetier serve` (cpp-httplib): routes, API-key check, CORS, JSON error
// bodies for every 4xx/5xx, socket timeouts and the body-size limit, and a graceful
// shutdown: refuse new work, give in-flight requests a grace period, cancel the rest.
//
// Endpoints (OpenAI paths also without the /v1 prefix, as llama-server):
//   POST /v1/chat/completions   POST /v1/completions      GET /v1/models
//   GET  /health                GET  /metrics (--metrics) GET /slots   GET /props
//   POST /tokenize              POST /detokenize          POST /apply-template
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/status.h"
#include "server/server_state.h"

namespace httplib {
class Server;
}

namespace moetier::server {

class HttpServer {
 public:
  explicit HttpServer(ServerState& state);
  ~HttpServer();

  // Binds config.host:config.port (port 0: any free port). Fails clearly when the address
  // is taken or invalid.
  Status bind();
  int port() const { return port_; }
  // Serves until stop(); returns then.
  void run();
  // Graceful: new generation requests get 503, queued ones end, in-flight ones get
  // config.shutdown_grace_s to finish and are then cancelled; then the listener stops.
  void shutdown();

 private:
  void routes();
  void widen_backlog();
  ServerState& state_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  int64_t listen_socket_ = -1;  // the socket bind() listens on, for its backlog
  std::atomic<bool> listener_done_{false};  // run() has returned
};

}  // namespace moetier::server
