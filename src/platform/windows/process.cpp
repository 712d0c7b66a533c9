// platform/process.h on Windows: GetModuleFileNameW, PATH + PATHEXT, CreateProcessW with an
// explicit list of inherited handles, Ctrl+Break as the polite stop, TerminateProcess.
#include "platform/process.h"

#include <windows.h>
#include <psapi.h>
#include <shellapi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "platform/windows/util.h"

namespace moetier::platform {

using windows_impl::error_text;
using windows_impl::last_error_text;
using windows_impl::narrow;
using windows_impl::widen;

namespace {

HANDLE as_handle(std::intptr_t h) { return reinterpret_cast<HANDLE>(h); }

bool is_regular_file(const std::wstring& path) {
  const DWORD a = ::GetFileAttributesW(path.c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) == 0;
}

// The extensions Windows runs without being told (PATHEXT), lower case, dot included.
std::vector<std::wstring> program_extensions() {
  const windows_impl::EnvValue pathext = windows_impl::get_env(L"PATHEXT");
  std::vector<std::wstring> out;
  for (const std::string& e : windows_impl::path_folders(pathext.found ? pathext.value : ".COM;.EXE;.BAT;.CMD")) {
    out.push_back(widen(e));
  }
  return out;
}

// `candidate` as it is when it names a file with an extension, else with each of PATHEXT's.
std::filesystem::path runnable_as(const std::wstring& candidate, const std::vector<std::wstring>& extensions) {
  if (std::filesystem::path(candidate).has_extension() && is_regular_file(candidate)) return candidate;
  for (const std::wstring& ext : extensions) {
    if (is_regular_file(candidate + ext)) return candidate + ext;
  }
  return {};
}

// One argument of a command line as the C runtime's parser (CommandLineToArgvW) reads it
// back: quoted when it holds blanks or quotes or is empty; a run of backslashes is doubled
// when a quote follows it (the argument's own or the closing one), and quotes are escaped.
void append_argument(std::wstring& line, const std::wstring& arg) {
  if (!line.empty()) line += L' ';
  if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) {
    line += arg;
    return;
  }
  line += L'"';
  size_t backslashes = 0;
  for (const wchar_t c : arg) {
    if (c == L'\\') {
      ++backslashes;
      continue;
    }
    line.append(c == L'"' ? 2 * backslashes + 1 : backslashes, L'\\');
    backslashes = 0;
    line += c;
  }
  line.append(2 * backslashes, L'\\');
  line += L'"';
}

// Handles a child inherits, closed on scope exit: inheritable copies of this process's
// standard handles (or the output file), listed for PROC_THREAD_ATTRIBUTE_HANDLE_LIST so the
// child gets those and no other inheritable handle this process has (e.g. sockets).
class ChildHandles {
 public:
  ~ChildHandles() {
    for (HANDLE h : owned_) ::CloseHandle(h);
    if (attributes_ != nullptr) ::DeleteProcThreadAttributeList(attributes_);
  }
  // An inheritable copy of one of this process's standard handles (nullptr when there is none).
  HANDLE copy_std(DWORD which) {
    HANDLE h = ::GetStdHandle(which);
    if (h == nullptr || h == INVALID_HANDLE_VALUE) return nullptr;
    HANDLE dup = nullptr;
    if (!::DuplicateHandle(::GetCurrentProcess(), h, ::GetCurrentProcess(), &dup, 0, TRUE, DUPLICATE_SAME_ACCESS)) {
      return nullptr;
    }
    return own(dup);
  }
  HANDLE own(HANDLE h) {
    owned_.push_back(h);
    return h;
  }
  // The attribute list naming every owned handle; nullptr when there are none or it fails.
  LPPROC_THREAD_ATTRIBUTE_LIST attribute_list() {
    if (owned_.empty()) return nullptr;
    SIZE_T bytes = 0;
    ::InitializeProcThreadAttributeList(nullptr, 1, 0, &bytes);
    storage_.resize(bytes);
    auto* list = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(storage_.data());
    if (!::InitializeProcThreadAttributeList(list, 1, 0, &bytes)) return nullptr;
    attributes_ = list;
    if (!::UpdateProcThreadAttribute(list, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, owned_.data(),
                                     owned_.size() * sizeof(HANDLE), nullptr, nullptr)) {
      return nullptr;
    }
    return list;
  }

 private:
  std::vector<HANDLE> owned_;
  std::vector<uint8_t> storage_;
  LPPROC_THREAD_ATTRIBUTE_LIST attributes_ = nullptr;
};

struct Started {
  DWORD id = 0;
  HANDLE process = nullptr;
};

// own_group: the child gets its own console process group, so that Ctrl+Break can be sent to
// it alone (ChildProcess::terminate) and the user's Ctrl+C reaches this process only (which
// then stops its children). Without it the child is in the foreground with this process.
Result<Started> start_process(const SpawnParams& params, bool own_group) {
  if (params.args.empty()) return Status::bad_input("no program to run");
  const std::string& program = params.args[0];
  const std::filesystem::path exe = find_program(program);
  if (exe.empty()) return Status::runtime(fmt::format("cannot run {}: {}", program, error_text(ERROR_FILE_NOT_FOUND)));
  std::wstring line;
  for (const std::string& a : params.args) append_argument(line, widen(a));

  ChildHandles handles;
  STARTUPINFOEXW si{};
  si.StartupInfo.cb = sizeof(si);
  si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  si.StartupInfo.hStdInput = handles.copy_std(STD_INPUT_HANDLE);
  if (!params.output_path.empty()) {
    SECURITY_ATTRIBUTES inheritable{.nLength = sizeof(SECURITY_ATTRIBUTES), .lpSecurityDescriptor = nullptr,
                                    .bInheritHandle = TRUE};
    HANDLE out = ::CreateFileW(widen(params.output_path).c_str(), GENERIC_WRITE,
                               FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, &inheritable, CREATE_ALWAYS,
                               FILE_ATTRIBUTE_NORMAL, nullptr);
    if (out == INVALID_HANDLE_VALUE) {
      return Status::runtime(
          fmt::format("cannot write {} (the output of {}): {}", params.output_path, program, last_error_text()));
    }
    si.StartupInfo.hStdOutput = si.StartupInfo.hStdError = handles.own(out);
  } else {
    si.StartupInfo.hStdOutput = handles.copy_std(STD_OUTPUT_HANDLE);
    si.StartupInfo.hStdError = handles.copy_std(STD_ERROR_HANDLE);
  }
  LPPROC_THREAD_ATTRIBUTE_LIST list = handles.attribute_list();
  si.lpAttributeList = list;
  const DWORD flags = CREATE_UNICODE_ENVIRONMENT | (list != nullptr ? EXTENDED_STARTUPINFO_PRESENT : 0) |
                      (own_group ? CREATE_NEW_PROCESS_GROUP : 0);
  PROCESS_INFORMATION pi{};
  if (!::CreateProcessW(exe.wstring().c_str(), line.data(), nullptr, nullptr, list != nullptr ? TRUE : FALSE, flags,
                        nullptr, nullptr, &si.StartupInfo, &pi)) {
    return Status::runtime(fmt::format("cannot run {}: {}", program, last_error_text()));
  }
  ::CloseHandle(pi.hThread);
  return Started{.id = pi.dwProcessId, .process = pi.hProcess};
}

ProcessExit exit_of(HANDLE process) {
  DWORD code = 0;
  if (!::GetExitCodeProcess(process, &code)) return ProcessExit{};
  // Crashes end with an NTSTATUS (0xC0000005 ...): negative as an int, as Windows shows them.
  return {.code = static_cast<int>(code), .signal = 0};
}

// Swallows Ctrl+C and console close while replace_process waits for its stand-in: the
// child gets them too and decides; this process ends with it.
BOOL WINAPI swallow_ctrl(DWORD) { return TRUE; }

}  // namespace

Result<std::filesystem::path> executable_path() {
  std::wstring buffer(MAX_PATH, L'\0');
  for (;;) {
    const DWORD n = ::GetModuleFileNameW(nullptr, buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0) return Status::runtime("cannot find this program's path (GetModuleFileNameW): " + last_error_text());
    if (n < buffer.size()) {
      buffer.resize(n);
      return std::filesystem::path(buffer);
    }
    buffer.resize(buffer.size() * 2);  // truncated: try a larger buffer
  }
}

std::vector<std::string> utf8_arguments(int argc, char** argv) {
  // The C runtime split the same command line into argv; CommandLineToArgvW splits it by the
  // same rules (quotes, backslashes before quotes), but in UTF-16.
  int n = 0;
  wchar_t** wide = ::CommandLineToArgvW(::GetCommandLineW(), &n);
  if (wide == nullptr || n != argc) {  // cannot happen in practice: keep what we were given
    if (wide != nullptr) ::LocalFree(wide);
    return std::vector<std::string>(argv, argv + argc);
  }
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(windows_impl::narrow(wide[i]));
  ::LocalFree(wide);
  return out;
}

int64_t process_id() { return static_cast<int64_t>(::GetCurrentProcessId()); }

std::filesystem::path find_program(const std::string& name) {
  if (name.empty()) return {};
  const std::vector<std::wstring> extensions = program_extensions();
  const std::wstring wide = widen(name);
  // A name with a folder (or a drive) in it is checked as it is.
  if (wide.find_first_of(L"/\\:") != std::wstring::npos) return runnable_as(wide, extensions);
  const windows_impl::EnvValue path = windows_impl::get_env(L"PATH");
  for (const std::string& folder : windows_impl::path_folders(path.found ? path.value : "")) {
    std::wstring candidate = widen(folder);
    if (candidate.back() != L'\\' && candidate.back() != L'/') candidate += L'\\';
    if (std::filesystem::path p = runnable_as(candidate + wide, extensions); !p.empty()) return p;
  }
  return {};
}

Result<ChildProcess> ChildProcess::spawn(const SpawnParams& params) {
  ASSIGN_OR_RETURN(const Started started, start_process(params, /*own_group=*/true));
  return ChildProcess(static_cast<int64_t>(started.id), reinterpret_cast<std::intptr_t>(started.process));
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : id_(std::exchange(other.id_, -1)), handle_(std::exchange(other.handle_, 0)), exit_(other.exit_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    if (id_ > 0 && !exit_) terminate();
    if (handle_ != 0) ::CloseHandle(as_handle(handle_));
    id_ = std::exchange(other.id_, -1);
    handle_ = std::exchange(other.handle_, 0);
    exit_ = other.exit_;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (id_ > 0 && !exit_) terminate();
  if (handle_ != 0) ::CloseHandle(as_handle(handle_));
}

std::optional<ProcessExit> ChildProcess::poll() {
  if (exit_ || id_ <= 0) return exit_;
  const DWORD r = ::WaitForSingleObject(as_handle(handle_), 0);
  if (r == WAIT_OBJECT_0) {
    exit_ = exit_of(as_handle(handle_));
  } else if (r == WAIT_FAILED) {
    exit_ = ProcessExit{};  // the handle is unusable: its status is lost
  }
  return exit_;
}

ProcessExit ChildProcess::wait() {
  if (exit_ || id_ <= 0) return exit_.value_or(ProcessExit{});
  const DWORD r = ::WaitForSingleObject(as_handle(handle_), INFINITE);
  exit_ = r == WAIT_OBJECT_0 ? exit_of(as_handle(handle_)) : ProcessExit{};
  return *exit_;
}

ProcessExit ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (const auto done = poll()) return *done;
  if (id_ <= 0) return ProcessExit{};
  // Ctrl+Break to the child's own process group is Windows' polite stop for a console
  // program (its ShutdownSignals reports kTerminate). It reaches the child only when both
  // share a console; without one there is no way to ask, and the child is ended at once.
  if (::GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, static_cast<DWORD>(id_))) {
    const auto ms = static_cast<DWORD>(std::clamp<int64_t>(grace.count(), 0, INFINITE - 1));
    if (::WaitForSingleObject(as_handle(handle_), ms) == WAIT_OBJECT_0) {
      exit_ = exit_of(as_handle(handle_));
      return *exit_;
    }
  }
  ::TerminateProcess(as_handle(handle_), 1);
  return wait();
}

ProcessMemory ChildProcess::memory() const {
  if (exit_ || id_ <= 0) return {};
  PROCESS_MEMORY_COUNTERS pmc{};
  pmc.cb = sizeof(pmc);
  if (!::GetProcessMemoryInfo(as_handle(handle_), &pmc, sizeof(pmc))) return {};
  return {.resident = static_cast<uint64_t>(pmc.WorkingSetSize),
          .peak_resident = static_cast<uint64_t>(pmc.PeakWorkingSetSize)};
}

Result<ProcessExit> run_process(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(const Started started, start_process({.args = args, .output_path = ""}, /*own_group=*/false));
  ::WaitForSingleObject(started.process, INFINITE);
  const ProcessExit exit = exit_of(started.process);
  ::CloseHandle(started.process);
  return exit;
}

// Windows cannot replace a process image: the program runs as a child in the foreground,
// with this process's standard handles, and this process exits with its exit status.
Status replace_process(const std::vector<std::string>& args) {
  if (args.empty()) return Status::bad_input("no program to run");
  std::fflush(stdout);
  std::fflush(stderr);
  ASSIGN_OR_RETURN(const Started started, start_process({.args = args, .output_path = ""}, /*own_group=*/false));
  ::SetConsoleCtrlHandler(swallow_ctrl, TRUE);
  ::WaitForSingleObject(started.process, INFINITE);
  DWORD code = 1;
  ::GetExitCodeProcess(started.process, &code);
  ::ExitProcess(code);
}

}  // namespace moetier::platform
