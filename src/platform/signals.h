// The user's "stop" from outside the process: Ctrl+C in the terminal (Linux: SIGINT; on
// Windows also closing the console window, the same interrupt) and a service manager's
// SIGTERM. Two shapes: a scope during which an interrupt sets a flag instead of ending the
// process (run, chat), and a waiter for the server's main thread. The OS side (Linux:
// sigaction, pthread_sigmask, sigtimedwait; Windows: SetConsoleCtrlHandler) lives in
// platform/<os>/.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string_view>

namespace moetier::platform {

// While alive, each interrupt sets *flag to true (and nothing else: a flag is all an OS
// signal handler may safely touch; the code that polls it decides what stopping means).
// Interrupted reads and waits are restarted, so a prompt waiting for input keeps waiting.
// The destructor restores the handler that was there before. Scopes nest (last in, first
// out), one thread creates and destroys them; *flag must outlive the scope.
class InterruptScope {
 public:
  explicit InterruptScope(std::atomic<bool>* flag);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  struct Saved;  // the OS's previous handler, defined by the implementation
  std::unique_ptr<Saved> saved_;
};

enum class ShutdownRequest {
  kNone,       // wait() timed out
  kInterrupt,  // Ctrl+C (SIGINT; Windows: also the console closing)
  kTerminate,  // SIGTERM (Windows: system shutdown or logoff)
};
// "SIGINT", "SIGTERM" on Linux (the names in the server's log); "" for kNone.
std::string_view shutdown_request_name(ShutdownRequest request);

// The server's shutdown signals, received by one thread that waits for them. Create it on
// the main thread before any other thread starts: from then on no thread is interrupted by
// SIGINT/SIGTERM (the threads started later inherit that), they wait for wait(). A client
// that hangs up (a write to a closed socket: SIGPIPE) no longer kills the process; the write
// fails instead. The destructor discards pending requests and restores the calling thread's
// previous signal state. One per process.
class ShutdownSignals {
 public:
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Waits up to `timeout` for a request. Each signal is returned once (a second Ctrl+C is a
  // second kInterrupt); requests that arrive between waits are kept, though two of the same
  // kind before the next wait may count as one.
  ShutdownRequest wait(std::chrono::milliseconds timeout);

 private:
  struct Saved;  // the signal state to restore, defined by the implementation
  std::unique_ptr<Saved> saved_;
};

}  // namespace moetier::platform
