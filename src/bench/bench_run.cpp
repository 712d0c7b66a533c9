#include "bench/bench_run.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "bench/configs.h"
#include "engine/disk_read.h"
#include "bench/stats.h"
#include "core/utf8_path.h"
#include "gguf/sha256_cache.h"

namespace moetier::bench {

namespace {

// The server's turns (--url): no model load here; each test's repetitions in a row.
Status run_server_group(const BenchRunParams& run, size_t begin, size_t end, std::vector<TestResult>& results) {
  const BenchParams& params = run.params;
  for (size_t i = begin; i < end; ++i) {
    const std::string prefix =
        fmt::format("[{}/{}] {} via {}", i + 1, run.tests.size(), test_name(run.tests[i]), run.server->url);
    run.events.note(prefix);
    ASSIGN_OR_RETURN(TestResult r, run_http_e2e_test(*run.server, run.tests[i],
                                                     {.repetitions = params.repetitions,
                                                      .warmup = !params.no_warmup,
                                                      .seed = params.seed + static_cast<uint32_t>(i)}));
    run.events.result(r, prefix, 0);
    run.printer.test(r);
    results.push_back(std::move(r));
  }
  return Status::ok();
}

// Tests [begin, end) share one model and mode: one load, then warm-ups (untimed) and the
// timed repetitions in the schedule's order; a test's record is printed as soon as it and
// every test before it are complete.
Status run_model_group(const BenchRunParams& run, size_t begin, size_t end, std::vector<TestResult>& results) {
  const BenchParams& params = run.params;
  const TestSpec& first = run.tests[begin];
  run.events.note(fmt::format("loading {} ({})", first.model, first.use_mmap ? "mmap" : "read into RAM"));
  const RunOptions placement_options{.device = params.device,
                                     .vram_budget_mib = params.vram_budget_mib,
                                     .exact_kernels = params.exact_kernels,
                                     .gpu_expert_cache_mib = params.gpu_expert_cache_mib};
  ASSIGN_OR_RETURN(LoadedModel loaded,
                   load_bench_model(first.model,
                                    {.use_mmap = first.use_mmap,
                                     .verbose = params.verbose,
                                     .expert_pages = params.expert_pages,
                                     .repack = !params.no_repack,
                                     .ram_budget_mib = params.ram_budget_mib,
                                     .expert_cache_policy = params.expert_cache_policy,
                                     .tests = std::span<const TestSpec>(run.tests.data() + begin, end - begin),
                                     .run = &placement_options}));
  for (const ModelFile& f : run.env.model_files) {
    if (f.path == first.model) {
      loaded.info.file_bytes = f.file_bytes;
      loaded.info.sha256 = f.sha256;
    }
  }

  std::optional<double> disk_gbps;  // --diskbw, once per model file
  if (params.measure_disk) {
    ASSIGN_OR_RETURN(const DiskReadResult disk, measure_disk_read(first.model, {}));
    disk_gbps = disk.gb_per_second;
    std::fprintf(stderr, "moetier bench: %s: %.2f GB/s of random 1 MiB %sreads, 4 in flight (--diskbw)\n",
                 first.model.c_str(), disk.gb_per_second, disk.unbuffered ? "unbuffered " : "buffered (no direct I/O here) ");
  }
  std::vector<TestRun> runs;
  std::vector<std::string> prefixes;
  for (size_t i = begin; i < end; ++i) {
    const TestSpec& test = run.tests[i];
    prefixes.push_back(fmt::format("[{}/{}] {} t={}", i + 1, run.tests.size(), test_name(test), test.n_threads));
    runs.emplace_back(test,
                      RunOptions{
                          .repetitions = params.repetitions,
                          .warmup = !params.no_warmup,
                          .profile = params.profile,
                          .scale_layers = params.scale_layers,
                          .verbose = params.verbose,
                          .seed = params.seed + static_cast<uint32_t>(i),
                          .progress_prefix = prefixes.back(),
                          .device = params.device,
                          .vram_budget_mib = params.vram_budget_mib,
                          .exact_kernels = params.exact_kernels,
                          .gpu_expert_cache_mib = params.gpu_expert_cache_mib,
                          .topology = run.env.cpu_topology,
                          .usable_cpus = run.env.usable_cpu_list,
                          .cpu = {.mask = params.cpu_mask, .strict = params.cpu_strict},
                      },
                      loaded.info);
  }
  const bool interleave = run.env.interleaved && runs.size() > 1;
  const auto pause = [&] {
    if (params.delay_seconds > 0) std::this_thread::sleep_for(std::chrono::seconds(params.delay_seconds));
  };
  for (size_t k = 0; k < runs.size(); ++k) {
    if (interleave || k == 0) {
      pause();
      RETURN_IF_ERROR(runs[k].prepare(loaded));
    }
  }
  std::vector<int64_t> done(runs.size(), 0);
  size_t next_to_print = 0;
  for (const Slot& slot : repetition_order(runs.size(), params.repetitions, interleave)) {
    TestRun& test_run = runs[slot.test];
    if (!interleave && slot.repetition == 0 && slot.test > 0) {  // in a row: each test's warm-up just before it
      pause();
      RETURN_IF_ERROR(test_run.prepare(loaded));
    }
    RETURN_IF_ERROR(test_run.repetition(loaded, slot.repetition));
    ++done[slot.test];
    while (next_to_print < runs.size() && done[next_to_print] == params.repetitions) {
      TestResult result = runs[next_to_print].finish(loaded);
      result.machine_read_gbps = run.machine_gbps;
      result.disk_read_gbps = disk_gbps;
      result.interleaved = interleave;
      run.events.result(result, prefixes[next_to_print], loaded.model->hparams().n_layer);
      run.printer.test(result);
      results.push_back(std::move(result));
      ++next_to_print;
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<TestResult>> run_bench(const BenchRunParams& run) {
  std::vector<TestResult> results;
  // Tests are ordered so that each model loads once per mode; a group's model is freed
  // before the next loads (two big models may not fit together).
  for (size_t begin = 0; begin < run.tests.size();) {
    const TestSpec& first = run.tests[begin];
    size_t end = begin;
    while (end < run.tests.size() && run.tests[end].model == first.model && run.tests[end].use_mmap == first.use_mmap) ++end;
    if (!first.e2e_url.empty()) {
      CHECK(run.server != nullptr);  // expand_tests makes server tests only with --url, which connects first
      RETURN_IF_ERROR(run_server_group(run, begin, end, results));
    } else {
      RETURN_IF_ERROR(run_model_group(run, begin, end, results));
    }
    begin = end;
  }
  return results;
}

Result<std::vector<ModelFile>> describe_model_files(const std::vector<std::string>& paths,
                                                    const DescribeFilesOptions& options) {
  std::vector<ModelFile> files;
  for (const std::string& path : paths) {
    if (std::any_of(files.begin(), files.end(), [&](const ModelFile& f) { return f.path == path; })) continue;
    std::error_code ec;
    const auto size = std::filesystem::file_size(utf8_path(path), ec);
    if (ec) return Status::bad_input(fmt::format("{}: {}", path, ec.message()));
    ASSIGN_OR_RETURN(CachedSha256 digest, cached_file_sha256(path, {.cache_dir = options.cache_dir, .log = options.log}));
    files.push_back({.path = path, .file_bytes = static_cast<int64_t>(size), .sha256 = digest.sha256});
  }
  return files;
}

std::vector<Comparison> compare_results(const std::vector<TestSpec>& tests, const std::vector<TestResult>& results,
                                        bool force) {
  std::vector<Comparison> comparisons;
  for (const ComparisonPair& pair : plan_comparisons(tests, force)) {
    comparisons.push_back({.a_name = test_name(tests[pair.a]),
                           .b_name = test_name(tests[pair.b]),
                           .what = pair.what,
                           .ci = ratio_ci(results[pair.a].ts_summary(), results[pair.b].ts_summary()),
                           .interleaved = results[pair.a].interleaved && results[pair.b].interleaved &&
                                          tests[pair.a].model == tests[pair.b].model &&
                                          tests[pair.a].use_mmap == tests[pair.b].use_mmap});
  }
  return comparisons;
}

}  // namespace moetier::bench
