// The standard streams and the console: whether one is a terminal (progress bars and
// prompts only then), console setup at start, and reading a line of input as UTF-8. The OS
// side (Linux: isatty; Windows: GetConsoleMode, SetConsoleOutputCP, ReadConsoleW) lives in
// platform/<os>/.
#pragma once

#include <string>

namespace moetier::platform {

enum class StandardStream { kStdin, kStdout, kStderr };

// True when the stream is an interactive terminal (not a file, pipe or /dev/null).
bool is_terminal(StandardStream stream);

// Once at program start, before any output: makes the console show UTF-8 text and the
// escape sequences progress bars use, and the standard streams carry bytes unchanged (no
// "\n" <-> "\r\n" in files and pipes). Windows: the console's code pages and modes are
// restored when the program exits (they belong to the console, which the user's shell goes
// on using). Nothing to do on Linux, whose terminals take UTF-8 and escape sequences.
void prepare_console();

// Reads one line of standard input into *line: UTF-8, without its "\n" or "\r\n". false at
// the end of input (Windows console: Ctrl+Z then Enter). A file or pipe is read byte for
// byte; a Windows console is read as UTF-16 (ReadConsoleW) and converted, so typed text
// arrives as UTF-8 whatever the console's code page. A Ctrl+C while waiting (handled by an
// InterruptScope) does not end the wait.
bool read_input_line(std::string* line);

}  // namespace moetier::platform
