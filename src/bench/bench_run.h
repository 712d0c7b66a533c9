// A whole `moetier bench` run after its flags are parsed: the model files' provenance, the
// tests in load groups (one model load per model and mode; the repetitions of a group
// interleaved or in a row), the server's turns for --url, and the comparisons afterwards.
// The command renders what happens through BenchEvents and the chosen Printer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_params.h"
#include "bench/e2e.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "core/status.h"

namespace moetier::bench {

// What a run tells its caller as it goes. `note` is a progress line ("loading FILE");
// `result` comes once per test, in the tests' order, before the printer sees it.
class BenchEvents {
 public:
  virtual ~BenchEvents() = default;
  virtual void note(const std::string& line) = 0;
  // `prefix` names the test ("[2/4] tg128 t=2"); `model_n_layer` is the loaded model's
  // layer count (0 for a server's test), for the --scale-layers estimate.
  virtual void result(const TestResult& result, const std::string& prefix, int64_t model_n_layer) = 0;
};

struct BenchRunParams {
  const BenchParams& params;
  const std::vector<TestSpec>& tests;  // expand_tests(params)
  const Environment& env;              // model_files filled (describe_model_files)
  std::optional<double> machine_gbps;  // --measure-bandwidth's figure, copied into each result
  E2eServer* server = nullptr;         // --url's server, connected; null without --url
  Printer& printer;
  BenchEvents& events;
};

// Runs every test; the results are in the tests' order. Stops at the first failure.
Result<std::vector<TestResult>> run_bench(const BenchRunParams& run);

// File size and SHA-256 of every model (each path once), the digest from the cache in
// `cache_dir` when the file is unchanged; hashing progress goes to `log`.
struct DescribeFilesOptions {
  std::string cache_dir;
  std::FILE* log = nullptr;
};
Result<std::vector<ModelFile>> describe_model_files(const std::vector<std::string>& paths,
                                                    const DescribeFilesOptions& options);

// The comparisons plan_comparisons chooses (`force`: --compare), each as a ratio of mean
// t/s with its 95% interval; `results[i]` belongs to `tests[i]`.
std::vector<Comparison> compare_results(const std::vector<TestSpec>& tests, const std::vector<TestResult>& results,
                                        bool force);

}  // namespace moetier::bench
