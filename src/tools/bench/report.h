// Results of `moetier bench` and their output formats, laid out like llama-bench's: a
// markdown table (md), a JSON array (json), one JSON object per line (jsonl) and CSV.
// Field names and order follow llama-bench where a field applies; moetier's own fields
// (weight_bytes_per_token, achieved_gbps, peak_rss_bytes, cpu_isa) come after stddev_ts.
#pragma once

#include "core/gpu_census.h"
#include "model/model.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/bench/bench_params.h"

namespace moetier::bench {

// Facts of the machine and build, the same for every record.
struct Environment {
  std::string build_commit;   // git commit when the build defines one, else the version
  int64_t build_number = 0;
  std::string cpu_info;       // /proc/cpuinfo "model name"
  std::string gpu_info;       // "" (no GPU backend)
  std::string backends = "CPU";
  std::string cpu_isa;        // cpu_features().describe()
};

// Facts of one model file.
struct ModelInfo {
  std::string filename;              // as given with -m
  std::string type;                  // "qwen35moe 7.8B.A0.9B Q4_K - Medium"
  int64_t size_bytes = 0;            // bytes of all tensors (llama-bench's model_size)
  int64_t n_params = 0;              // elements of all tensors
  int64_t weight_bytes_per_token = 0;  // weight bytes one generated token reads
  int64_t n_layer = 0;                 // compute layers (for --scale-layers)
};

// --scale-layers: the test's speed extrapolated to a model with more (or fewer) layers.
struct LayerEstimate {
  int64_t n_layer = 0;   // the N asked for
  double ts = 0;         // estimated tokens per second
};

// Time per block type, averaged over the timed repetitions.
struct ProfileRow {
  std::string block;     // profile_block_name(), or "other" for time outside any block
  double ms = 0;         // per repetition
  double percent = 0;    // of the repetition's wall time
  double calls = 0;      // per repetition (0 for "other")
};

struct TestResult {
  TestSpec spec;
  ModelInfo model;
  std::string test_time;             // RFC 3339 UTC, at the start of the test
  std::vector<int64_t> samples_ns;   // one per timed repetition
  std::optional<int64_t> peak_rss_bytes;  // VmHWM after the test
  std::vector<ProfileRow> profile;   // empty without --profile
  std::optional<double> machine_read_gbps;  // --membw
  std::optional<LayerEstimate> estimate;    // --scale-layers
  std::optional<GpuMemoryReport> gpu;       // the GPU part, when the test placed layers there
  std::optional<int64_t> vram_used_delta_bytes;
  std::string backend = "CPU";              // "Vulkan" when layers ran on the GPU
  std::string gpu_backend;                  // "Vulkan, fast kernels: <device>" ("" without a GPU part)
  std::optional<GpuCensus> gpu_census;      // --profile with a GPU part: the timed repetitions' census
  int64_t census_tokens = 0;                // tokens those repetitions processed (the census' "per token")
  // --spec-replay tests: the timed repetitions' drafted / accepted counts.
  int64_t spec_n_drafted = 0, spec_n_accepted = 0;
  double spec_draft_ms_per_token = 0;  // the drafter's own time per drafted token (draft-mtp)

  // llama-bench's statistics: tokens per second per sample = 1e9 * (n_prompt + n_gen) / ns;
  // averages are plain means, deviations are sample standard deviations (n - 1; 0 for one sample).
  int64_t avg_ns() const;
  int64_t stddev_ns() const;
  std::vector<double> samples_ts() const;
  double avg_ts() const;
  double stddev_ts() const;
  // weight_bytes_per_token * avg_ts / 1e9 for tg tests (n_prompt == 0); nullopt otherwise.
  std::optional<double> achieved_gbps() const;
  // achieved_gbps / machine_read_gbps when both are known.
  std::optional<double> bandwidth_fraction() const;
};

double mean(const std::vector<double>& v);
double sample_stddev(const std::vector<double>& v);

class Printer {
 public:
  virtual ~Printer() = default;
  virtual void header() {}
  virtual void test(const TestResult& result) = 0;
  virtual void footer() {}
};

// A printer for `params.output` writing to `out` (not owned). `params` must be finalized;
// the md table shows the columns of parameters that differ from llama-bench's defaults.
std::unique_ptr<Printer> make_printer(const BenchParams& params, const Environment& env, std::FILE* out);

}  // namespace moetier::bench
