// The standard streams and the console: whether one is a terminal (progress bars and
// prompts only then), and console setup at start. The OS side (Linux: isatty; Windows:
// GetConsoleMode, SetConsoleOutputCP) lives in platform/<os>/.
#pragma once

namespace moetier::platform {

enum class StandardStream { kStdin, kStdout, kStderr };

// True when the stream is an interactive terminal (not a file, pipe or /dev/null).
bool is_terminal(StandardStream stream);

// Once at program start, before any output: makes the console show UTF-8 text and the
// escape sequences progress bars use (Windows; nothing to do on Linux, where terminals do).
void prepare_console();

}  // namespace moetier::platform
