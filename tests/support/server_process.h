// A `moetier serve` process for tests: started on a free port (--port 0), ready once it
// prints "listening on http://HOST:PORT"; stopped with SIGTERM (the destructor does it if
// the test did not). stderr goes to a file the test can read.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "support/cli.h"

namespace moetier::testing {

class ServerProcess {
 public:
  // args: everything after `moetier serve` (the test adds --port 0 and --host 127.0.0.1).
  explicit ServerProcess(std::vector<std::string> args, std::chrono::seconds startup = std::chrono::seconds(60)) {
    stderr_path_ = temp_file("serve.stderr");
    args.insert(args.begin(), {"serve", "--host", "127.0.0.1", "--port", "0"});
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      std::string bin = MOETIER_BINARY;
      argv.push_back(bin.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      FILE* err = std::freopen(stderr_path_.c_str(), "w", stderr);
      FILE* out = std::freopen("/dev/null", "w", stdout);
      (void)err;
      (void)out;
      ::execv(bin.c_str(), argv.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + startup;
    const std::regex listening("listening on http://[^:]+:([0-9]+)");
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string err = log();
      if (std::regex_search(err, m, listening)) {
        port_ = std::stoi(m[1]);
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  ~ServerProcess() {
    if (pid_ > 0) stop();
    std::filesystem::remove(stderr_path_);
  }

  bool ready() const { return port_ > 0; }
  int port() const { return port_; }
  std::string log() const { return slurp_file(stderr_path_); }

  httplib::Client client(int timeout_s = 120) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(timeout_s, 0);
    c.set_write_timeout(timeout_s, 0);
    c.set_connection_timeout(10, 0);
    return c;
  }

  // Sends `sig` and waits up to `timeout` for the process to exit; returns its exit status
  // (128 + signal when killed by one; -1 if it had to be SIGKILLed).
  int stop(int sig = SIGTERM, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        return exit_status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    exit_status_ = -1;
    return exit_status_;
  }

  int exit_status() const { return exit_status_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string stderr_path_;
};

}  // namespace moetier::testing
