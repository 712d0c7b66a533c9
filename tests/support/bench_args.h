// bench's tests from a command line, for unit tests of what bench does with them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/bench_params.h"

namespace moetier::bench::testing {

// The tests `moetier bench -m x.gguf WORDS...` would run (empty, with a test failure, when
// the words do not parse).
inline std::vector<TestSpec> tests_of(std::vector<std::string> words) {
  std::vector<std::string> storage = {"bench", "-m", "x.gguf"};
  storage.insert(storage.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  bool help = false;
  auto p = parse_bench_args(static_cast<int>(argv.size()), argv.data(), 2, &help, nullptr);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  return p.is_ok() ? expand_tests(*p) : std::vector<TestSpec>{};
}

}  // namespace moetier::bench::testing
