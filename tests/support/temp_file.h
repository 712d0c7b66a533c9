// Unique temporary file names for tests, on every OS the tests run on (Windows under Wine too).
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "platform/process.h"

namespace moetier::testing {

// A path under the temp directory that no other test process uses: the process id and a
// per-process counter; `stem` ends the name (an extension there is kept). Nothing is created.
inline std::string temp_file(const std::string& stem) {
  static int counter = 0;
  return (std::filesystem::temp_directory_path() /
          fmt::format("moetier_test_{}_{}_{}", platform::process_id(), ++counter, stem))
      .string();
}

// A temp_file() path removed (with anything under it) when the guard goes out of scope, also
// when a failed assertion ends the test early.
class TempPath {
 public:
  explicit TempPath(const std::string& stem) : path_(temp_file(stem)) {}
  ~TempPath() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace moetier::testing
