// A `moetier serve` child process for the evaluation suites: started on a free local port
// (--port 0, the port read back from its log)
// with the user's model and server flags, waited for until /health answers, stopped
// (asked to end, then ended after a grace period: platform::ChildProcess) when the object
// goes away. Its output goes to a log file so the suite's progress bar stays readable.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "platform/process.h"

namespace moetier::eval {

struct ServerChildParams {
  std::string executable;           // the moetier binary (usually platform::executable_path())
  std::vector<std::string> args;    // after "serve": -m MODEL, -c N, the user's flags
  std::string log_path;             // the child's stdout and stderr
  double start_timeout_s = 1800;    // loading a large model can take minutes
};

class ServerChild {
 public:
  // Starts the child on a free port and waits until GET /health answers 200. kRuntime
  // (with the log's last lines) if it exits or does not answer in time.
  static Result<ServerChild> start(const ServerChildParams& params);
  ServerChild(ServerChild&& other) noexcept = default;
  ServerChild& operator=(ServerChild&&) = delete;
  ServerChild(const ServerChild&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The child's peak resident memory so far, bytes; -1 if it cannot be read.
  int64_t peak_rss_bytes() const;
  // The child's resident memory now, bytes; -1 if it cannot be read.
  int64_t rss_bytes() const;

 private:
  explicit ServerChild(platform::ChildProcess process) : process_(std::move(process)) {}
  platform::ChildProcess process_;  // its destructor stops and reaps the server
  int port_ = 0;
};

}  // namespace moetier::eval
