// platform/signals.h on Linux: a SIGINT handler that sets a flag; SIGINT/SIGTERM blocked in
// every thread and taken by sigtimedwait.
#include "platform/signals.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <ctime>

namespace moetier::platform {

namespace {

// The flag of the innermost InterruptScope. A signal handler may only touch lock-free
// atomics, hence a process-wide pointer (the signal disposition is process-wide too).
std::atomic<std::atomic<bool>*> g_interrupt_flag{nullptr};
static_assert(std::atomic<std::atomic<bool>*>::is_always_lock_free);

extern "C" void on_interrupt(int) {
  if (std::atomic<bool>* flag = g_interrupt_flag.load()) flag->store(true);
}

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

struct InterruptScope::Saved {
  std::atomic<bool>* flag = nullptr;
  struct sigaction action {};
};

InterruptScope::InterruptScope(std::atomic<bool>* flag) : saved_(new Saved) {
  saved_->flag = g_interrupt_flag.exchange(flag);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  // Restart interrupted reads (a chat prompt waiting for a line keeps waiting).
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, &saved_->action);
}

InterruptScope::~InterruptScope() {
  ::sigaction(SIGINT, &saved_->action, nullptr);
  g_interrupt_flag.store(saved_->flag);
}

std::string_view shutdown_request_name(ShutdownRequest request) {
  switch (request) {
    case ShutdownRequest::kNone: return "";
    case ShutdownRequest::kInterrupt: return "SIGINT";
    case ShutdownRequest::kTerminate: return "SIGTERM";
  }
  return "";
}

struct ShutdownSignals::Saved {
  sigset_t mask;
  struct sigaction pipe_action {};
};

ShutdownSignals::ShutdownSignals() : saved_(new Saved) {
  const sigset_t set = shutdown_set();
  // Blocked here, and so in every thread started from here on (they inherit the mask):
  // the signals stay pending until wait() takes them.
  ::pthread_sigmask(SIG_BLOCK, &set, &saved_->mask);
  // A client that hangs up must not kill the server: the write fails with EPIPE instead.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &saved_->pipe_action);
}

ShutdownSignals::~ShutdownSignals() {
  // Take what is pending first, or unblocking would deliver it (and end the process).
  const sigset_t set = shutdown_set();
  const timespec now{.tv_sec = 0, .tv_nsec = 0};
  while (::sigtimedwait(&set, nullptr, &now) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &saved_->mask, nullptr);
  ::sigaction(SIGPIPE, &saved_->pipe_action, nullptr);
}

ShutdownRequest ShutdownSignals::wait(std::chrono::milliseconds timeout) {
  const sigset_t set = shutdown_set();
  const int64_t ms = std::max<int64_t>(0, timeout.count());
  const timespec wait{.tv_sec = static_cast<time_t>(ms / 1000), .tv_nsec = static_cast<long>(ms % 1000) * 1'000'000};
  const int sig = ::sigtimedwait(&set, nullptr, &wait);
  if (sig == SIGINT) return ShutdownRequest::kInterrupt;
  if (sig == SIGTERM) return ShutdownRequest::kTerminate;
  return ShutdownRequest::kNone;  // timed out, or another signal's handler ran (EINTR)
}

}  // namespace moetier::platform
