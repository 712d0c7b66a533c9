// Running one `moetier bench` test the way llama-bench does: a fresh sequence, an untimed
// warm-up, then r timed repetitions, each on a cleared sequence with an optional untimed
// depth fill, processing random token ids.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "tools/bench/bench_params.h"
#include "tools/bench/report.h"

namespace moetier::bench {

struct LoadedModel {
  std::unique_ptr<gguf::ModelFile> file;
  std::unique_ptr<Model> model;
  ModelInfo info;
  int32_t bos_token = -1;  // >= 0 when the model's metadata asks for BOS at the start
  std::string path;
  bool use_mmap = true;
  std::string placement;  // the GPU layout now in place ("" = all on the CPU)
  std::unique_ptr<text::Tokenizer> tokenizer;  // loaded for --spec-replay tests (the generation loop's)
};

struct RunOptions;
struct BenchLoadOptions {
  bool use_mmap = true;
  bool verbose = false;  // the load summary line
  gguf::ExpertPages expert_pages = gguf::ExpertPages::kAuto;
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
};

// Runs `test` on `loaded`. Errors (context allocation, forward failures) are values.
Result<TestResult> run_test(LoadedModel& loaded, const TestSpec& test, const RunOptions& options);

// The machine and build facts for every record.
Environment detect_environment();

// VmHWM of this process in bytes (nullopt where /proc is missing).
std::optional<int64_t> peak_rss_bytes();

}  // namespace moetier::bench
