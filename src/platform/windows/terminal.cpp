// platform/terminal.h on Windows: console handles, code pages and modes.
#include "platform/terminal.h"

#include <windows.h>
#include <fcntl.h>
#include <io.h>

#include <cstdio>
#include <initializer_list>

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
}  // namespace

// A console handle has a console mode; files, pipes and NUL do not.
bool is_terminal(StandardStream stream) {
  HANDLE h = ::GetStdHandle(std_handle_id(stream));
  DWORD mode = 0;
  return h != nullptr && h != INVALID_HANDLE_VALUE && ::GetConsoleMode(h, &mode) != 0;
}

void prepare_console() {
  // The program writes UTF-8: the console shows it as such (and reads typed text as UTF-8).
  ::SetConsoleOutputCP(CP_UTF8);
  ::SetConsoleCP(CP_UTF8);
  // Progress bars and colours use escape sequences (Windows 10 1511 and later take them).
  for (const DWORD id : {STD_OUTPUT_HANDLE, STD_ERROR_HANDLE}) {
    HANDLE h = ::GetStdHandle(id);
    DWORD mode = 0;
    if (h != nullptr && h != INVALID_HANDLE_VALUE && ::GetConsoleMode(h, &mode)) {
      ::SetConsoleMode(h, mode | ENABLE_PROCESSED_OUTPUT | ENABLE_VIRTUAL_TERMINAL_PROCESSING);
    }
  }
  // stdout and stderr carry bytes as written: no "\n" -> "\r\n" in files and pipes, so the
  // output is the same as on Linux (the console starts a new line at "\n" either way).
  ::_setmode(::_fileno(stdout), _O_BINARY);
  ::_setmode(::_fileno(stderr), _O_BINARY);
}

}  // namespace moetier::platform
