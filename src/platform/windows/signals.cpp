// platform/signals.h on Windows: console control handlers (SetConsoleCtrlHandler). Windows
// runs a handler on a thread of its own, not inside an interrupted thread, so it may wait.
//   Ctrl+C, console close             -> interrupt (run/chat: the flag; serve: kInterrupt)
//   Ctrl+Break, logoff, shutdown      -> kTerminate (Ctrl+Break is what a parent process
//                                        sends to stop a child: ChildProcess::terminate)
// Closing the console, logoff and shutdown end the process as soon as the handler returns
// (or after Windows' time limit, about 5 s): the server's handler waits there until the
// ShutdownSignals is destroyed, so the server stops cleanly first.
#include "platform/signals.h"

#include <windows.h>

#include <algorithm>
#include <cstdint>

namespace moetier::platform {

namespace {

// The flag of the innermost InterruptScope (the handler is process-wide, like Linux's).
std::atomic<std::atomic<bool>*> g_interrupt_flag{nullptr};

BOOL WINAPI on_interrupt(DWORD event) {
  if (event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT && event != CTRL_CLOSE_EVENT) return FALSE;
  if (std::atomic<bool>* flag = g_interrupt_flag.load()) flag->store(true);
  return TRUE;
}

// The server's requests: counts of each kind not yet returned by wait(), an event that
// wakes wait(), and an event set when the ShutdownSignals is gone (the close/logoff handler
// waits for it). One ShutdownSignals at a time per process, so one state, kept for the
// process's life: a handler still running on Windows' thread never sees it freed.
struct ShutdownState {
  std::atomic<bool> active{false};
  std::atomic<int> interrupts{0};
  std::atomic<int> terminates{0};
  HANDLE wake = ::CreateEventW(nullptr, FALSE, FALSE, nullptr);     // auto-reset
  HANDLE finished = ::CreateEventW(nullptr, TRUE, FALSE, nullptr);  // manual-reset
};
ShutdownState& shutdown_state() {
  static ShutdownState state;
  return state;
}

BOOL WINAPI on_shutdown_event(DWORD event) {
  ShutdownState& s = shutdown_state();
  if (!s.active.load()) return FALSE;
  switch (event) {
    case CTRL_C_EVENT:
    case CTRL_CLOSE_EVENT: s.interrupts.fetch_add(1); break;
    case CTRL_BREAK_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT: s.terminates.fetch_add(1); break;
    default: return FALSE;
  }
  ::SetEvent(s.wake);
  // The process ends when this returns from these three: give the server time to stop.
  if (event == CTRL_CLOSE_EVENT || event == CTRL_LOGOFF_EVENT || event == CTRL_SHUTDOWN_EVENT) {
    ::WaitForSingleObject(s.finished, 4'500);
  }
  return TRUE;
}

}  // namespace

struct InterruptScope::Saved {
  std::atomic<bool>* flag = nullptr;
};

// Each scope adds the handler once and removes one registration on exit, so nested scopes
// keep it registered until the outermost ends.
InterruptScope::InterruptScope(std::atomic<bool>* flag) : saved_(new Saved) {
  saved_->flag = g_interrupt_flag.exchange(flag);
  ::SetConsoleCtrlHandler(on_interrupt, TRUE);
}

InterruptScope::~InterruptScope() {
  ::SetConsoleCtrlHandler(on_interrupt, FALSE);
  g_interrupt_flag.store(saved_->flag);
}

std::string_view shutdown_request_name(ShutdownRequest request) {
  switch (request) {
    case ShutdownRequest::kNone: return "";
    case ShutdownRequest::kInterrupt: return "Ctrl+C";
    case ShutdownRequest::kTerminate: return "Ctrl+Break";
  }
  return "";
}

struct ShutdownSignals::Saved {};

ShutdownSignals::ShutdownSignals() : saved_(new Saved) {
  ShutdownState& s = shutdown_state();
  s.interrupts.store(0);
  s.terminates.store(0);
  ::ResetEvent(s.finished);
  s.active.store(true);
  ::SetConsoleCtrlHandler(on_shutdown_event, TRUE);
  // No SIGPIPE on Windows: a send to a closed socket fails with an error code.
}

ShutdownSignals::~ShutdownSignals() {
  ShutdownState& s = shutdown_state();
  s.active.store(false);
  ::SetEvent(s.finished);  // a waiting close/logoff handler may return now
  ::SetConsoleCtrlHandler(on_shutdown_event, FALSE);
  s.interrupts.store(0);  // pending requests are discarded
  s.terminates.store(0);
}

ShutdownRequest ShutdownSignals::wait(std::chrono::milliseconds timeout) {
  ShutdownState& s = shutdown_state();
  const auto take = [&]() -> ShutdownRequest {
    for (std::atomic<int>* counter : {&s.interrupts, &s.terminates}) {
      int n = counter->load();
      while (n > 0) {
        if (counter->compare_exchange_weak(n, n - 1)) {
          return counter == &s.interrupts ? ShutdownRequest::kInterrupt : ShutdownRequest::kTerminate;
        }
      }
    }
    return ShutdownRequest::kNone;
  };
  if (const ShutdownRequest r = take(); r != ShutdownRequest::kNone) return r;
  const int64_t ms = std::clamp<int64_t>(timeout.count(), 0, INFINITE - 1);
  ::WaitForSingleObject(s.wake, static_cast<DWORD>(ms));
  return take();
}

}  // namespace moetier::platform
