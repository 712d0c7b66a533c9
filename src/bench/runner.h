// Running one `moetier bench` test the way llama-bench does: an untimed warm-up, then r
// timed repetitions, each on a fresh sequence with an optional untimed depth fill,
// processing random token ids. A test is a TestRun object so that the repetitions of
// several tests can be interleaved (bench.cpp runs them round-robin).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "bench/bench_params.h"
#include "bench/report.h"
#include "core/gpu_census.h"
#include "core/profiler.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/cpu_threads.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "platform/cpu.h"
#include "runtime/speculative.h"
#include "text/chat_prompt.h"
#include "text/tokenizer.h"

namespace moetier::bench {

struct LoadedModel {
  std::unique_ptr<gguf::ModelFile> file;
  std::unique_ptr<ExpertStore> experts;  // the CPU's experts when they do not fit in RAM (before model: outlives it)
  std::unique_ptr<Model> model;
  ModelInfo info;
  int32_t bos_token = -1;  // >= 0 when the model's metadata asks for BOS at the start
  std::string path;
  bool use_mmap = true;
  std::string placement;  // the GPU layout now in place ("" = all on the CPU)
  std::unique_ptr<text::Tokenizer> tokenizer;  // loaded for --spec-replay and --e2e tests (the generation loop's)
  std::unique_ptr<ChatPrompt> chat;            // the chat template, for --e2e tests
  // When the layout has a GPU part: the device's memory in use by every process just before
  // placing it (nullopt: the driver does not say) and the device's one-line description.
  std::optional<uint64_t> vram_used_before;
  std::string gpu_description;
};

struct RunOptions;
struct BenchLoadOptions {
  bool use_mmap = true;
  bool verbose = false;  // the load summary line
  gguf::ExpertPages expert_pages = gguf::ExpertPages::kAuto;
  // Repack the routed experts that every test's placement computes on the CPU (engine/repack.h).
  bool repack = true;
  int64_t ram_budget_mib = 0;               // --ram-budget (engine/expert_streaming.h)
  std::string expert_cache_policy = "lru";
  // The tests this load serves and their run options (device, VRAM budget): with mmap, the
  // routed experts that any of their placements keeps on the CPU are moved into huge pages.
  std::span<const TestSpec> tests;
  const RunOptions* run = nullptr;
};

// Opens `path` (mmap or read into RAM) and binds the model. Errors name the file. The line
// on the routed experts (moved, or why not) goes to stderr.
Result<LoadedModel> load_bench_model(const std::string& path, const BenchLoadOptions& options);

// Facts of the file for the records: llama-bench-like type string, sizes, weight bytes
// per generated token.
ModelInfo describe_model(const gguf::GgufFile& file, const std::string& filename);

struct RunOptions {
  int64_t repetitions = 5;
  bool warmup = true;
  bool profile = false;
  int64_t scale_layers = 0;  // > 0: estimate t/s for this many layers (profiles the run)
  bool verbose = false;      // every repetition's time on stderr
  uint32_t seed = 1234;      // random token ids
  std::string progress_prefix;  // "[2/6] tg128" for the progress lines on stderr
  int device = -1;              // -dev
  int64_t vram_budget_mib = 0;  // --vram-budget
  bool exact_kernels = false;   // --gpu-kernels exact
  int64_t gpu_expert_cache_mib = -1;  // --gpu-expert-cache
  bool quiet = false;           // no progress lines on stderr (tune draws its own progress bar)
  // The test's CPUs (engine/cpu_threads.h): the machine's topology, the process's CPUs taken
  // before any test pinned its threads (empty: unknown, nothing is pinned unless a mask or
  // strict asks), and --cpu-mask / --cpu-strict (cpu.threads is ignored: the test's -t).
  platform::CpuTopology topology;
  std::vector<int> usable_cpus;
  CpuThreadsRequest cpu;
};

// Random token ids for one test; the first token of a sequence is BOS when the model asks
// for one (as llama-bench does), so the model sees a realistic start.
class TokenSource {
 public:
  TokenSource(uint32_t seed, int64_t n_vocab, int32_t bos)
      : rng_(seed), dist_(0, static_cast<int32_t>(n_vocab - 1)), bos_(bos) {}
  void fill(std::vector<int32_t>& tokens, int64_t n, bool sequence_start) {
    tokens.resize(static_cast<size_t>(n));
    for (auto& t : tokens) t = dist_(rng_);
    if (sequence_start && bos_ >= 0 && n > 0) tokens[0] = bos_;
  }

 private:
  std::mt19937 rng_;
  std::uniform_int_distribution<int32_t> dist_;
  int32_t bos_;
};

// One test across its repetitions. prepare() once (placement, warm-up: untimed), then
// repetition() r times, possibly with other tests' repetitions in between, then finish().
// Its sequence exists only during a repetition (each makes a fresh one), so another test's
// peak memory never includes this one's KV cache; its thread pool (the same threads for the
// warm-up and the repetitions) lives from prepare() to finish().
class TestRun {
 public:
  TestRun(const TestSpec& test, const RunOptions& options, const ModelInfo& info);
  Status prepare(LoadedModel& loaded);
  // Re-places the model if another test changed the placement, resets the process's peak
  // RSS (memory.h), fills the depth untimed and times one repetition.
  Status repetition(LoadedModel& loaded, int64_t rep);
  TestResult finish(const LoadedModel& loaded);
  const TestSpec& spec() const { return test_; }
  const std::vector<int64_t>& samples_ns() const { return result_.samples_ns; }  // the timed repetitions so far

 private:
  void configure(Model& model) const;
  void progress(const std::string& what) const;
  TestSpec test_;
  RunOptions options_;
  TestResult result_;
  TokenSource tokens_;
  std::unique_ptr<ThreadPool> pool_;
  Profiler profiler_;
  GpuCensus census_;
  int64_t total_ns_ = 0;
  double other_busy_cpu_seconds_ = 0, sampled_wall_seconds_ = 0;  // cpu_load.h, over the timed repetitions
  bool cpu_sampled_ = true;  // false once a sample could not be taken
  std::vector<int> cpus_ = platform::usable_cpus();  // whose busy time is sampled (RunOptions::usable_cpus when given)
  SpecStats spec_stats_;
  double draft_seconds_ = 0;  // summed over repetitions
  std::vector<int32_t> spec_prompt_, spec_expected_;
  bool peak_rss_reset_ = false;
};

// Runs `test` on `loaded` (all repetitions in a row). Errors (context allocation, forward
// failures) are values.
Result<TestResult> run_test(LoadedModel& loaded, const TestSpec& test, const RunOptions& options);

// The machine and build facts for every record.
Environment detect_environment();

}  // namespace moetier::bench
