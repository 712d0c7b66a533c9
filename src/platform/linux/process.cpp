// platform/process.h on Linux: /proc/self/exe, PATH, posix_spawn, waitpid, kill, execv.
#include "platform/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "platform/linux/proc_text.h"
#include "platform/linux/util.h"

extern char** environ;

namespace moetier::platform {

using linux_impl::errno_text;

namespace {

ProcessExit exit_from_wait_status(int status) {
  if (WIFEXITED(status)) return {.code = WEXITSTATUS(status), .signal = 0};
  if (WIFSIGNALED(status)) return {.code = -1, .signal = WTERMSIG(status)};
  return {};
}

// argv for exec: pointers into `args`, null-terminated.
std::vector<char*> c_argv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

// Frees posix_spawn's attribute objects on scope exit.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

}  // namespace

Result<std::filesystem::path> executable_path() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::runtime("cannot find this program's path (/proc/self/exe): " + ec.message());
  return exe;
}

std::vector<std::string> utf8_arguments(int argc, char** argv) { return std::vector<std::string>(argv, argv + argc); }

int64_t process_id() { return static_cast<int64_t>(::getpid()); }

std::filesystem::path find_program(const std::string& name) {
  const auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return runnable(name) ? std::filesystem::path(name) : std::filesystem::path();
  // Unset PATH: the usual folders of installed programs.
  const char* path = std::getenv("PATH");
  for (const std::string& folder : linux_impl::path_folders(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin")) {
    const std::string candidate = (folder.empty() ? std::string(".") : folder) + "/" + name;
    if (runnable(candidate)) return candidate;
  }
  return {};
}

Result<ChildProcess> ChildProcess::spawn(const SpawnParams& params) {
  if (params.args.empty()) return Status::bad_input("no program to run");
  const std::string& program = params.args[0];
  SpawnSetup setup;
  int out_fd = -1;
  if (!params.output_path.empty()) {
    out_fd = ::open(params.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      const int e = errno;
      return Status::runtime(
          fmt::format("cannot write {} (the output of {}): {}", params.output_path, program, errno_text(e)));
    }
    // dup2 clears close-on-exec on the child's copies.
    posix_spawn_file_actions_adddup2(&setup.actions, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&setup.actions, out_fd, STDERR_FILENO);
  }
  // A fresh signal state: nothing blocked (ShutdownSignals blocks SIGINT/SIGTERM here) and
  // the default action for what this process may ignore (SIGPIPE in the server).
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (const int sig : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&setup.attr, &none);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv = c_argv(params.args);
  pid_t pid = -1;
  // posix_spawnp looks a bare name up in PATH; glibc reports a failed exec here (not as a
  // child exiting with 127).
  const int rc = ::posix_spawnp(&pid, program.c_str(), &setup.actions, &setup.attr, argv.data(), environ);
  if (out_fd >= 0) ::close(out_fd);
  if (rc != 0) return Status::runtime(fmt::format("cannot run {}: {}", program, errno_text(rc)));
  return ChildProcess(static_cast<int64_t>(pid), 0);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : id_(std::exchange(other.id_, -1)), handle_(std::exchange(other.handle_, 0)), exit_(other.exit_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (id_ > 0 && !exit_) terminate();
    id_ = std::exchange(other.id_, -1);
    handle_ = std::exchange(other.handle_, 0);
    exit_ = other.exit_;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (id_ > 0 && !exit_) terminate();
}

std::optional<ProcessExit> ChildProcess::poll() {
  if (exit_ || id_ <= 0) return exit_;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(static_cast<pid_t>(id_), &status, WNOHANG);
    if (r == static_cast<pid_t>(id_)) {
      exit_ = exit_from_wait_status(status);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else if (r < 0) {
      exit_ = ProcessExit{};  // not our child any more (reaped elsewhere): its status is lost
    }
    return exit_;
  }
}

ProcessExit ChildProcess::wait() {
  if (exit_ || id_ <= 0) return exit_.value_or(ProcessExit{});
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(static_cast<pid_t>(id_), &status, 0);
    if (r < 0 && errno == EINTR) continue;
    exit_ = r == static_cast<pid_t>(id_) ? exit_from_wait_status(status) : ProcessExit{};
    return *exit_;
  }
}

ProcessExit ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (const auto done = poll()) return *done;
  if (id_ <= 0) return ProcessExit{};
  ::kill(static_cast<pid_t>(id_), SIGTERM);
  // Poll from 1 ms up to 100 ms apart: a quick exit is seen at once, a slow one costs little.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto step = std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    if (const auto done = poll()) return *done;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::this_thread::sleep_for(std::max(std::chrono::milliseconds(0), std::min(step, left)));
    step = std::min(step * 2, std::chrono::milliseconds(100));
  }
  if (const auto done = poll()) return *done;
  ::kill(static_cast<pid_t>(id_), SIGKILL);
  return wait();
}

ProcessMemory ChildProcess::memory() const {
  if (exit_ || id_ <= 0) return {};
  return procfs::parse_process_status(linux_impl::read_text_file(fmt::format("/proc/{}/status", id_).c_str()));
}

Result<ProcessExit> run_process(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::spawn({.args = args, .output_path = ""}));
  return child.wait();
}

Status replace_process(const std::vector<std::string>& args) {
  if (args.empty()) return Status::bad_input("no program to run");
  std::vector<char*> argv = c_argv(args);
  // Buffered output would be lost with this process image.
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(args[0].c_str(), argv.data());
  const int e = errno;
  return Status::runtime(fmt::format("cannot run {}: {}", args[0], errno_text(e)));
}

}  // namespace moetier::platform
