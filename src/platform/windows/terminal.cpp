// platform/terminal.h on Windows: console handles, code pages and modes, and console input
// read as UTF-16.
#include "platform/terminal.h"

#include <windows.h>
#include <fcntl.h>
#include <io.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <iostream>

#include "platform/windows/util.h"

namespace moetier::platform {

namespace {

DWORD std_handle_id(StandardStream stream) {
  switch (stream) {
    case StandardStream::kStdin: return STD_INPUT_HANDLE;
    case StandardStream::kStdout: return STD_OUTPUT_HANDLE;
    case StandardStream::kStderr: return STD_ERROR_HANDLE;
  }
  return STD_OUTPUT_HANDLE;
}

// The console's settings before prepare_console, put back at exit (0: nothing to restore).
// A global because an atexit handler takes no arguments; written once at start, before
// any thread exists, and read once by that handler.
struct ConsoleSettings {
  UINT output_cp = 0;
  UINT input_cp = 0;
  DWORD out_mode = 0;
  DWORD err_mode = 0;
  bool out_console = false;
  bool err_console = false;
};
ConsoleSettings g_saved_console;

void restore_console() {
  const ConsoleSettings& s = g_saved_console;
  if (s.output_cp != 0) ::SetConsoleOutputCP(s.output_cp);
  if (s.input_cp != 0) ::SetConsoleCP(s.input_cp);
  if (s.out_console) ::SetConsoleMode(::GetStdHandle(STD_OUTPUT_HANDLE), s.out_mode);
  if (s.err_console) ::SetConsoleMode(::GetStdHandle(STD_ERROR_HANDLE), s.err_mode);
}

}  // namespace

// A console handle has a console mode; files, pipes and NUL do not.
bool is_terminal(StandardStream stream) {
  HANDLE h = ::GetStdHandle(std_handle_id(stream));
  DWORD mode = 0;
  return h != nullptr && h != INVALID_HANDLE_VALUE && ::GetConsoleMode(h, &mode) != 0;
}

void prepare_console() {
  // 0 when there is no console (e.g. started by a service or with output redirected from a
  // GUI program): nothing to change or restore then.
  ConsoleSettings& s = g_saved_console;
  s.output_cp = ::GetConsoleOutputCP();
  s.input_cp = ::GetConsoleCP();
  // The program writes UTF-8: the console shows it as such.
  if (s.output_cp != 0) ::SetConsoleOutputCP(CP_UTF8);
  if (s.input_cp != 0) ::SetConsoleCP(CP_UTF8);
  // Progress bars and colours use escape sequences (Windows 10 1511 and later take them).
  for (const DWORD id : {STD_OUTPUT_HANDLE, STD_ERROR_HANDLE}) {
    HANDLE h = ::GetStdHandle(id);
    DWORD mode = 0;
    if (h != nullptr && h != INVALID_HANDLE_VALUE && ::GetConsoleMode(h, &mode)) {
      (id == STD_OUTPUT_HANDLE ? s.out_mode : s.err_mode) = mode;
      (id == STD_OUTPUT_HANDLE ? s.out_console : s.err_console) = true;
      ::SetConsoleMode(h, mode | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING);
    }
  }
  // The code pages belong to the console, which the user's shell keeps using after us: a
  // cmd.exe left at code page 65001 shows its own ANSI text wrongly. (A process killed from
  // outside skips this.)
  std::atexit(restore_console);
  // The standard streams carry bytes as read and written: no "\n" <-> "\r\n" and no Ctrl+Z
  // end of input in files and pipes, so the bytes are the same as on Linux (the console
  // starts a new line at "\n" either way; read_input_line drops a line's "\r").
  ::_setmode(::_fileno(stdin), _O_BINARY);
  ::_setmode(::_fileno(stdout), _O_BINARY);
  ::_setmode(::_fileno(stderr), _O_BINARY);
}

bool read_input_line(std::string* line) {
  line->clear();
  HANDLE in = ::GetStdHandle(STD_INPUT_HANDLE);
  DWORD mode = 0;
  if (in == nullptr || in == INVALID_HANDLE_VALUE || !::GetConsoleMode(in, &mode)) {
    // A file or a pipe: its bytes, as on Linux.
    if (!std::getline(std::cin, *line)) return false;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    return true;
  }
  // The console in line mode hands out the typed line, "\r\n" included, once Enter is
  // pressed; a long line comes in several reads.
  std::wstring wide;
  for (;;) {
    wchar_t buffer[1024];
    DWORD n = 0;
    ::SetLastError(ERROR_SUCCESS);
    const BOOL ok = ::ReadConsoleW(in, buffer, static_cast<DWORD>(std::size(buffer)), &n, nullptr);
    // Ctrl+C (with a handler that took it) cancels the read: the line typed so far is gone,
    // the prompt keeps waiting, as Linux's restarted read does.
    if (::GetLastError() == ERROR_OPERATION_ABORTED) {
      wide.clear();
      continue;
    }
    if (!ok || n == 0) break;  // the console is gone: what was read is the last line
    wide.append(buffer, n);
    if (wide.back() == L'\n') break;
  }
  if (wide.empty() || wide.front() == L'\x1a') return false;  // Ctrl+Z: the console's end of input
  while (!wide.empty() && (wide.back() == L'\n' || wide.back() == L'\r')) wide.pop_back();
  *line = windows_impl::narrow(wide);
  return true;
}

}  // namespace moetier::platform
