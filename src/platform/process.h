// Processes: this program's own path and id, programs on PATH, child processes (started
// with their output in a log file, polled, stopped gracefully), running a program to
// completion, and handing this process over to another program. The OS side (Linux:
// /proc/self/exe, access, posix_spawn, waitpid, kill, execv; Windows: GetModuleFileNameW,
// CommandLineToArgvW, CreateProcessW, TerminateProcess) lives in platform/<os>/. Arguments
// and paths are UTF-8.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "platform/memory.h"

namespace moetier::platform {

// The running program's file (Linux: /proc/self/exe), for starting it again or finding
// files installed beside it. kRuntime when the OS does not say.
Result<std::filesystem::path> executable_path();

// This program's command-line arguments as UTF-8, given main()'s: Linux's are already the
// bytes the user typed (UTF-8); Windows hands main() the arguments in the ANSI code page
// (a "模型.gguf" there becomes "??.gguf"), so they are read again from the wide command
// line (GetCommandLineW, CommandLineToArgvW). Call once at the start of main().
std::vector<std::string> utf8_arguments(int argc, char** argv);

// This process's id (e.g. to make temporary file names unique).
int64_t process_id();

// Where a program would be found when run by a bare name (SpawnParams::args[0]): the first
// executable regular file of that name in the folders of PATH (Linux: the system's default
// folders when PATH is unset; Windows: also with the extensions of PATHEXT). A name with a
// folder in it is checked as it is. Empty when not found.
std::filesystem::path find_program(const std::string& name);

// How a child ended.
struct ProcessExit {
  int code = -1;   // its exit status; -1 when a signal ended it
  int signal = 0;  // the signal that ended it (Linux), 0 otherwise
  bool success() const { return signal == 0 && code == 0; }
  // "status 3" or "signal 9", for messages.
  std::string describe() const;
};

struct SpawnParams {
  // args[0]: the program, a path, or a bare name looked up in PATH; then its arguments.
  std::vector<std::string> args;
  // The file that receives the child's stdout and stderr (created or truncated); "": the
  // child shares this process's.
  std::string output_path;
};

// A started child process. Move-only. The destructor stops a child still running as
// terminate(kDefaultGrace) does (so it can wait up to that long) and reaps it.
class ChildProcess {
 public:
  static constexpr std::chrono::milliseconds kDefaultGrace{10'000};

  // The child starts with default signal handling and no blocked signals, whatever this
  // process has. kRuntime naming args[0] when the output file cannot be written or the
  // program cannot be run (not found, not executable); kBadInput for empty args.
  static Result<ChildProcess> spawn(const SpawnParams& params);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  int64_t id() const { return id_; }
  // Has it ended? Returns its exit without waiting (and from then on, every time).
  std::optional<ProcessExit> poll();
  // Waits for it to end.
  ProcessExit wait();
  // Asks it to end (Linux: SIGTERM), waits up to `grace`, then ends it (SIGKILL) and waits.
  // Returns at once with the exit when it has ended already.
  ProcessExit terminate(std::chrono::milliseconds grace = kDefaultGrace);
  // Its memory in RAM now and at its peak (nullopt: ended, or unknown).
  ProcessMemory memory() const;

 private:
  ChildProcess(int64_t id, std::intptr_t handle) : id_(id), handle_(handle) {}
  int64_t id_ = -1;  // -1: moved from
  std::intptr_t handle_ = 0;  // the OS's handle besides the id where it has one (Windows); 0 on Linux
  std::optional<ProcessExit> exit_;  // set once reaped
};

// Runs a program (args as in SpawnParams, sharing this process's stdin, stdout and stderr)
// and waits for it. kRuntime "cannot run <program>: <reason>" when it cannot be started; a
// program that runs and fails is a ProcessExit, not an error.
Result<ProcessExit> run_process(const std::vector<std::string>& args);

// Replaces this process with the program args[0] (a path) given args, as the same process
// (Linux: execv; stdout and stderr are flushed first). Returns only when that fails:
// kRuntime "cannot run <program>: <reason>".
Status replace_process(const std::vector<std::string>& args);

}  // namespace moetier::platform
