// The Measurer `moetier tune` uses: bench's runner (bench/runner.h) on a real model.
// A candidate is two bench tests, ppN and tgM, whose repetitions alternate with the other
// candidates' (bench's interleaving); a set of one load mode shares one model load, kept
// for the next set of the same mode (placements are switched by re-placing, untimed).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench/runner.h"
#include "engine/cpu_threads.h"
#include "tune/search.h"

namespace moetier::tune {

struct BenchMeasurerParams {
  std::string model_path;
  int device = -1;              // -dev
  int64_t vram_budget_mib = 0;  // --vram-budget: the GPU allocation ceiling while measuring
  uint32_t seed = 1234;         // random token ids
  bench::Environment env;       // idle RSS, for peak − idle; the CPUs (topology, the process's)
  CpuThreadsRequest cpu;        // --cpu-mask / --cpu-strict (threads: each candidate's -t)
};

class BenchMeasurer final : public Measurer {
 public:
  explicit BenchMeasurer(BenchMeasurerParams params) : params_(std::move(params)) {}
  Status open(std::span<const Candidate> set, RunSize size, int64_t repetitions) override;
  Result<RepTiming> repetition(size_t i, int64_t rep) override;
  Result<std::vector<Measurement>> close() override;
  // The model facts of the last load (type string, sizes) for the report.
  const std::optional<bench::ModelInfo>& model_info() const { return info_; }

 private:
  struct Entry {
    std::unique_ptr<bench::TestRun> pp, tg;
    bool prepared = false;
    bool ran = false;
    bool failed = false;
  };
  BenchMeasurerParams params_;
  std::optional<bench::LoadedModel> loaded_;
  std::optional<bench::ModelInfo> info_;
  std::vector<Entry> entries_;
  int64_t repetitions_ = 0;
};

// A candidate as a bench test (kind set by the caller through n_prompt / n_gen).
bench::TestSpec to_test_spec(const Candidate& c, const std::string& model, int64_t n_prompt, int64_t n_gen);

}  // namespace moetier::tune
