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

#include "bench/bench_params.h"
#include "bench/stats.h"
#include "engine/expert_store.h"
#include "platform/cpu.h"

namespace moetier::bench {

// A model file as cited in the records and the md header ("cite what was measured").
struct ModelFile {
  std::string path;              // as given with -m
  int64_t file_bytes = 0;        // size of the file
  std::string sha256;            // "" when it could not be computed
};

// Facts of the machine, build and run, the same for every record.
struct Environment {
  std::string build_commit;   // git commit of the build (core/build_info.h), else the version
  int64_t build_number = 0;
  std::string version;        // moetier's version (MOETIER_VERSION)
  std::string date;           // start of the run, UTC ISO-8601 ("2026-12-02T03:46:06Z")
  std::string cpu_info;       // /proc/cpuinfo "model name"
  std::string gpu_info;       // "" (no GPU backend)
  std::string backends = "CPU";
  std::string cpu_isa;        // cpu_features().describe()
  std::optional<int64_t> idle_rss_bytes;  // VmRSS after start-up, before any model is loaded
  std::vector<ModelFile> model_files;     // every -m file, in order
  std::vector<int64_t> n_threads;         // the -t list
  bool interleaved = false;               // repetitions run round-robin over the tests
  bool peak_rss_resettable = false;       // /proc/self/clear_refs accepted "5" (memory.h)
  int usable_cpus = 0;                    // CPUs of the process's affinity mask; 0 when unknown
  // The machine's cores (engine/cpu_threads.h chooses each test's CPUs from them) and the
  // process's CPUs, taken before any test pinned its threads.
  platform::CpuTopology cpu_topology;
  std::vector<int> usable_cpu_list;
};

// The md header: version and commit, date, every model file with size and SHA-256, CPU and
// ISA, threads, GPU, the memory method and whether repetitions were interleaved.
std::vector<std::string> provenance_lines(const Environment& env);

// Facts of one model file.
struct ModelInfo {
  std::string filename;              // as given with -m
  std::string type;                  // "qwen35moe 7.8B.A0.9B Q4_K - Medium"
  int64_t size_bytes = 0;            // bytes of all tensors (llama-bench's model_size)
  int64_t n_params = 0;              // elements of all tensors
  int64_t weight_bytes_per_token = 0;  // weight bytes one generated token reads
  int64_t n_layer = 0;                 // compute layers (for --scale-layers)
  int64_t file_bytes = 0;              // size of the file
  std::string sha256;                  // of the whole file ("" when not computed)
  int64_t repacked_bytes = 0;          // routed-expert bytes repacked at load (engine/repack.h)
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
  // The highest VmHWM at the end of any repetition; "test" scope: VmHWM was reset before
  // each repetition (so this is the test's own peak), "cumulative": it could not be reset.
  std::optional<int64_t> peak_rss_bytes;
  std::string peak_rss_scope = "cumulative";
  bool interleaved = false;                 // its repetitions alternated with other tests'
  std::string gpu_info;                     // the GPU's description incl. driver ("" without a GPU part)
  // GPU memory peak - idle: the driver's usage after a repetition minus before placing
  // ("driver", VK_EXT_memory_budget), else moetier's own allocations ("allocator").
  std::optional<int64_t> vram_peak_minus_idle_bytes;
  std::string vram_source;                  // "driver", "allocator" or "" (no GPU part)
  std::vector<ProfileRow> profile;   // empty without --profile
  // --profile: distinct routed experts the CPU read per MoE block call, and pairs per call
  // (0 when no MoE block ran on the CPU).
  double moe_experts_per_call = 0, moe_pairs_per_call = 0;
  std::optional<double> machine_read_gbps;  // --membw
  std::optional<double> disk_read_gbps;     // --diskbw (the model file's storage)
  // CPUs that other processes (and a VM's steal) kept busy while the timed repetitions ran,
  // averaged over their wall time (cpu_load.h); nullopt without /proc/stat or when the
  // repetitions took too little time to tell (min_cpu_sample_seconds).
  std::optional<double> other_busy_cpus;
  std::optional<LayerEstimate> estimate;    // --scale-layers
  std::optional<GpuMemoryReport> gpu;       // the GPU part, when the test placed layers there
  std::optional<int64_t> vram_used_delta_bytes;
  std::string backend = "CPU";              // "Vulkan" when layers ran on the GPU
  // The CPUs the test's threads ran on (engine/cpu_threads.h): cpu_cores is "all",
  // "performance" (a hybrid CPU's P-cores) or "mask" (--cpu-mask); cpus a CPU list ("0-11").
  std::string cpu_cores = "all";
  std::string cpus;
  std::string gpu_backend;                  // "Vulkan, fast kernels: <device>" ("" without a GPU part)
  std::optional<GpuCensus> gpu_census;      // --profile with a GPU part: the timed repetitions' census
  int64_t census_tokens = 0;                // tokens those repetitions processed (the census' "per token")
  // --spec-replay tests: the timed repetitions' drafted / accepted counts.
  int64_t spec_n_drafted = 0, spec_n_accepted = 0;
  int64_t spec_n_steps = 0;  // verify steps (forward calls with drafts)
  double spec_draft_ms_per_token = 0;  // the drafter's own time per drafted token (draft-mtp)
  std::vector<int64_t> ttft_ns;        // e2e tests: time to the first sampled token, per repetition
  // Models bigger than RAM (experts read from the file, engine/expert_store.h): the store's
  // counters over the timed repetitions, and those repetitions' tokens and seconds.
  std::optional<ExpertStoreStats> experts;
  int64_t expert_tokens = 0;
  double expert_seconds = 0;
  // The VRAM expert cache's counters over the timed repetitions (null without one), and
  // those repetitions' tokens.
  std::optional<GpuExpertCacheStats> gpu_expert_cache;
  int64_t gpu_expert_cache_tokens = 0;

  // llama-bench's statistics: tokens per second per sample = 1e9 * (n_prompt + n_gen) / ns
  // (e2e tests: 1e9 * n_gen / ns, the answer's tokens per second of the whole turn);
  // averages are plain means, deviations are sample standard deviations (n - 1; 0 for one sample).
  int64_t avg_ns() const;
  int64_t stddev_ns() const;
  std::vector<double> samples_ts() const;
  double avg_ts() const;
  double stddev_ts() const;
  Summary ts_summary() const;  // mean, sd, min, max, cv of samples_ts()
  // Drift of t/s over the repetitions in the order they ran (stats.h); nullopt below 2.
  std::optional<double> drift_percent() const;
  // peak_rss_bytes - the run's idle baseline (the footprint users compare).
  std::optional<int64_t> rss_peak_minus_idle_bytes(const Environment& env) const;
  // weight_bytes_per_token * avg_ts / 1e9 for tg tests (n_prompt == 0); nullopt otherwise.
  std::optional<double> achieved_gbps() const;
  // achieved_gbps / machine_read_gbps when both are known.
  std::optional<double> bandwidth_fraction() const;
};

double mean(const std::vector<double>& v);
double sample_stddev(const std::vector<double>& v);

// The ratio of two tests' mean t/s (b / a) with its 95% interval (stats.h).
// Tokens a verify step of k drafts yields on average when each drafted token is accepted with
// probability a, given all before it were: the accepted run plus the target's own next token,
// 1 + a + a² + … + a^k. Speculation pays when a verify step costs less than this many decode steps.
double spec_expected_tokens_per_step(double acceptance, int64_t k);

// A step test's time per step in ms (TestSpec::n_step; 0 for other tests).
double step_ms(const TestResult& r);

struct Comparison {
  std::string a_name, b_name;   // test names
  std::string what;             // the knobs that differ: "n_threads 1 -> 2"
  std::optional<RatioCi> ci;    // nullopt: fewer than 2 repetitions
  bool interleaved = true;      // false: the two ran one after the other (e.g. different files)
};
// "tg4: n_threads 1 -> 2: t/s ratio 1.034, 95% CI [0.981, 1.087]: no difference" (names
// differ only when the knob is the depth: "tg4 @ d512 vs tg4: n_depth 0 -> 512: ...").
std::string describe_comparison(const Comparison& c);

class Printer {
 public:
  virtual ~Printer() = default;
  virtual void header() {}
  virtual void test(const TestResult& result) = 0;
  virtual void comparisons(const std::vector<Comparison>& list) {}
  virtual void footer() {}
};

// A printer for `params.output` writing to `out` (not owned). `params` must be finalized;
// the md table shows the columns of parameters that differ from llama-bench's defaults.
std::unique_ptr<Printer> make_printer(const BenchParams& params, const Environment& env, std::FILE* out);

}  // namespace moetier::bench
