#include "eval/server_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

namespace moetier::eval {

namespace {

int64_t status_kib(pid_t pid, const char* key) {
  std::ifstream f(fmt::format("/proc/{}/status", pid));
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(f, line)) {
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size()));
  }
  return -1;
}

std::string log_tail(const std::string& path, size_t max_lines) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(f, line)) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) out += "\n  " + lines[i];
  return out;
}

}  // namespace

Result<ServerChild> ServerChild::start(const ServerChildParams& params) {
  // --port 0: the server binds any free port and prints it ("listening on http://HOST:PORT"),
  // read back from its log (no race with another process taking a port chosen here).
  std::vector<std::string> argv_s = {params.executable, "serve"};
  argv_s.insert(argv_s.end(), params.args.begin(), params.args.end());
  argv_s.insert(argv_s.end(), {"--host", "127.0.0.1", "--port", "0"});
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = open(params.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::runtime(fmt::format("cannot write the server log {}", params.log_path));
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return Status::runtime("cannot start the server process (fork failed)");
  }
  if (pid == 0) {
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(log_fd);
  ServerChild child(pid, 0);
  const std::regex listening("listening on http://[^:\\s]+:([0-9]+)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(params.start_timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid, &wstatus, WNOHANG) == pid) {
      child.pid_ = -1;  // already reaped
      return Status::runtime(fmt::format("the server exited before it was ready ({}); its log {}:{}",
                                         WIFEXITED(wstatus) ? fmt::format("status {}", WEXITSTATUS(wstatus))
                                                            : fmt::format("signal {}", WTERMSIG(wstatus)),
                                         params.log_path, log_tail(params.log_path, 12)));
    }
    if (child.port_ == 0) {
      std::ifstream f(params.log_path);
      const std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      std::smatch m;
      if (std::regex_search(log, m, listening)) child.port_ = std::stoi(m[1]);
    }
    if (child.port_ > 0) {
      httplib::Client cli("127.0.0.1", child.port_);
      cli.set_connection_timeout(1, 0);
      cli.set_read_timeout(5, 0);
      if (auto res = cli.Get("/health"); res && res->status == 200) return child;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::runtime(fmt::format("the server did not answer /health within {:.0f} s; its log {}:{}", params.start_timeout_s,
                                     params.log_path, log_tail(params.log_path, 12)));
}

ServerChild::ServerChild(ServerChild&& other) noexcept : pid_(other.pid_), port_(other.port_) { other.pid_ = -1; }

ServerChild::~ServerChild() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {  // 10 s grace
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

int64_t ServerChild::peak_rss_bytes() const {
  const int64_t kib = pid_ > 0 ? status_kib(pid_, "VmHWM") : -1;
  return kib < 0 ? -1 : kib * 1024;
}

int64_t ServerChild::rss_bytes() const {
  const int64_t kib = pid_ > 0 ? status_kib(pid_, "VmRSS") : -1;
  return kib < 0 ? -1 : kib * 1024;
}

}  // namespace moetier::eval
