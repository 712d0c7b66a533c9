#include "eval/server_child.h"
#include "core/utf8_path.h"

#include <chrono>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

namespace moetier::eval {

namespace {

int64_t bytes_or_minus_one(const std::optional<uint64_t>& bytes) { return bytes ? static_cast<int64_t>(*bytes) : -1; }

std::string log_tail(const std::string& path, size_t max_lines) {
  std::ifstream f(utf8_path(path));
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
  std::vector<std::string> args = {params.executable, "serve"};
  args.insert(args.end(), params.args.begin(), params.args.end());
  args.insert(args.end(), {"--host", "127.0.0.1", "--port", "0"});
  auto process = platform::ChildProcess::spawn({.args = args, .output_path = params.log_path});
  if (!process) return process.status().with_context("cannot start the server");
  ServerChild child(std::move(*process));
  const std::regex listening("listening on http://[^:\\s]+:([0-9]+)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(params.start_timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (const std::optional<platform::ProcessExit> exit = child.process_.poll()) {
      return Status::runtime(fmt::format("the server exited before it was ready ({}); its log {}:{}", exit->describe(),
                                         params.log_path, log_tail(params.log_path, 12)));
    }
    if (child.port_ == 0) {
      std::ifstream f(utf8_path(params.log_path));
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

int64_t ServerChild::peak_rss_bytes() const { return bytes_or_minus_one(process_.memory().peak_resident); }

int64_t ServerChild::rss_bytes() const { return bytes_or_minus_one(process_.memory().resident); }

}  // namespace moetier::eval
