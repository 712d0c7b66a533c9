// Running the built `moetier` binary from tests: exit status, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "support/temp_file.h"

namespace moetier::testing {

struct CliResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Lines of a text (a last line without a newline counts).
inline size_t count_lines(const std::string& text) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Runs `moetier <args>` through the shell (quote paths in args); stdin from `stdin_file`
// when given, else /dev/null. XDG_CACHE_HOME points at a directory under the temp
// directory, so tests never write the user's ~/.cache (bench's SHA-256 cache).
inline CliResult run_moetier(const std::string& args, const std::string& stdin_file = "") {
  const std::string out = temp_file("stdout"), err = temp_file("stderr");
  const std::string in = stdin_file.empty() ? "/dev/null" : stdin_file;
  const std::string cache = (std::filesystem::temp_directory_path() / "moetier_test_cache").string();
  const std::string cmd =
      fmt::format("XDG_CACHE_HOME='{}' '{}' {} <'{}' >'{}' 2>'{}'", cache, MOETIER_BINARY, args, in, out, err);
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp_file(out);
  r.err = slurp_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace moetier::testing
