// platform/terminal.h on Linux.
#include "platform/terminal.h"

#include <unistd.h>

#include <iostream>

namespace moetier::platform {

bool is_terminal(StandardStream stream) {
  switch (stream) {
    case StandardStream::kStdin: return ::isatty(STDIN_FILENO) != 0;
    case StandardStream::kStdout: return ::isatty(STDOUT_FILENO) != 0;
    case StandardStream::kStderr: return ::isatty(STDERR_FILENO) != 0;
  }
  return false;
}

// Linux terminals take UTF-8 and escape sequences as they are.
void prepare_console() {}

bool read_input_line(std::string* line) {
  if (!std::getline(std::cin, *line)) return false;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return true;
}

}  // namespace moetier::platform
