// moetier bench: llama-bench's flags, tests and output formats on moetier's engine, plus
// moetier's own figures (weight bytes per token, achieved GB/s, peak RSS, profile).
// Results go to stdout in the chosen format; progress and the profile go to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "cpu/membw.h"
#include "tools/bench/bench_params.h"
#include "tools/bench/report.h"
#include "tools/bench/runner.h"
#include "tools/commands.h"

namespace moetier {

namespace {

void print_profile(const bench::TestResult& r) {
  std::fprintf(stderr, "moetier bench: profile of %s (per repetition, %.3f ms):\n", bench::test_name(r.spec).c_str(),
               static_cast<double>(r.avg_ns()) / 1e6);
  for (const auto& row : r.profile) {
    if (row.ms == 0 && row.calls == 0 && row.block != "other") continue;
    std::fprintf(stderr, "  %-14s %10.3f ms %6.1f%%", row.block.c_str(), row.ms, row.percent);
    if (row.block != "other") std::fprintf(stderr, "  %8.1f calls", row.calls);
    std::fputc('\n', stderr);
  }
}

// The GPU census of a profiled test, per token: what decides speed on a real GPU, counted
// on whatever device ran it.
void print_census(const bench::TestResult& r) {
  if (!r.gpu_census) return;
  const GpuCensus& c = *r.gpu_census;
  const double n = static_cast<double>(std::max<int64_t>(r.census_tokens, 1));
  std::fprintf(stderr,
               "moetier bench: GPU census of %s (%s), per token: %.1f dispatches, %.1f barriers, %.1f copies/fills, "
               "%.2f submits, %.2f host waits (%.2f fence syncs), %.1f KiB up, %.1f KiB down, %.2f MiB of weights read\n",
               bench::test_name(r.spec).c_str(), r.gpu_backend.c_str(), c.dispatches / n, c.barriers / n,
               c.transfers / n, c.submits / n, c.host_waits / n, c.syncs / n, c.bytes_up / n / 1024.0, c.bytes_down / n / 1024.0,
               c.weight_bytes / n / 1048576.0);
  // Shaders by GPU time (or by dispatches without timestamps), the top 12.
  std::vector<std::pair<std::string, GpuCensus::Op>> ops(c.ops.begin(), c.ops.end());
  std::sort(ops.begin(), ops.end(), [&](const auto& a, const auto& b) {
    return c.timed ? a.second.gpu_ns > b.second.gpu_ns : a.second.dispatches > b.second.dispatches;
  });
  double total_ns = 0;
  for (const auto& [name, op] : ops) total_ns += op.gpu_ns;
  for (size_t i = 0; i < ops.size() && i < 12; ++i) {
    const auto& [name, op] = ops[i];
    if (c.timed) {
      // Achieved bandwidth of the weight reads (matmul shaders): bytes / GPU time.
      const std::string gbps =
          op.weight_bytes > 0 && op.gpu_ns > 0 ? fmt::format("  {:7.1f} GB/s of weights", op.weight_bytes / op.gpu_ns) : "";
      std::fprintf(stderr, "  %-28s %8.2f dispatches/token %10.3f ms/token %6.1f%%%s\n", name.c_str(), op.dispatches / n,
                   op.gpu_ns / n / 1e6, total_ns > 0 ? 100.0 * op.gpu_ns / total_ns : 0.0, gbps.c_str());
    } else {
      std::fprintf(stderr, "  %-28s %8.2f dispatches/token\n", name.c_str(), op.dispatches / n);
    }
  }
  if (!c.timed) std::fprintf(stderr, "  (no GPU timestamps on this device)\n");
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  bool help = false;
  std::string help_text;
  auto parsed = bench::parse_bench_args(argc, argv, cpu_features().physical_cores, &help, &help_text);
  if (!parsed) return report_error(parsed.status());
  if (help) {
    std::fputs(help_text.c_str(), stdout);
    return 0;
  }
  const bench::BenchParams params = std::move(parsed).value();

  const std::vector<bench::TestSpec> tests = bench::expand_tests(params);
  const bench::Environment env = bench::detect_environment();

  std::optional<double> machine_gbps;
  if (params.measure_bandwidth) {
    const int64_t threads = *std::max_element(params.n_threads.begin(), params.n_threads.end());
    ThreadPool pool(static_cast<int>(threads));
    const auto bw = cpu::measure_read_bandwidth({}, pool);
    machine_gbps = bw.best_gbps;
    std::fprintf(stderr, "moetier bench: memory read bandwidth %.2f GB/s (best of 5 passes over 1 GiB, %lld threads; median %.2f)\n",
                 bw.best_gbps, static_cast<long long>(threads), bw.median_gbps);
  }

  auto printer = bench::make_printer(params, env, stdout);
  printer->header();
  std::optional<bench::LoadedModel> loaded;
  for (size_t i = 0; i < tests.size(); ++i) {
    const bench::TestSpec& test = tests[i];
    // Load a model only when the file or the load mode changes (tests are ordered so that
    // each model loads once per mode).
    if (!loaded || loaded->path != test.model || loaded->use_mmap != test.use_mmap) {
      loaded.reset();  // free the previous model first: two big models may not fit together
      std::fprintf(stderr, "moetier bench: loading %s (%s)\n", test.model.c_str(),
                   test.use_mmap ? "mmap" : "read into RAM");
      // The tests this load serves: the run of tests with the same file and load mode.
      size_t end = i;
      while (end < tests.size() && tests[end].model == test.model && tests[end].use_mmap == test.use_mmap) ++end;
      const bench::RunOptions placement_options{.device = params.device,
                                                .vram_budget_mib = params.vram_budget_mib,
                                                .exact_kernels = params.exact_kernels};
      auto m = bench::load_bench_model(
          test.model, {.use_mmap = test.use_mmap,
                       .verbose = params.verbose,
                       .expert_pages = params.expert_pages,
                       .tests = std::span<const bench::TestSpec>(tests.data() + i, end - i),
                       .run = &placement_options});
      if (!m) {
        printer->footer();
        return report_error(m.status());
      }
      loaded = std::move(m).value();
    }
    if (params.delay_seconds > 0) std::this_thread::sleep_for(std::chrono::seconds(params.delay_seconds));
    const std::string name = bench::test_name(test);
    const bench::RunOptions options{
        .repetitions = params.repetitions,
        .warmup = !params.no_warmup,
        .profile = params.profile,
        .scale_layers = params.scale_layers,
        .verbose = params.verbose,
        .seed = params.seed + static_cast<uint32_t>(i),
        .progress_prefix = fmt::format("[{}/{}] {} t={}", i + 1, tests.size(), name, test.n_threads),
        .device = params.device,
        .vram_budget_mib = params.vram_budget_mib,
        .exact_kernels = params.exact_kernels,
    };
    auto result = bench::run_test(*loaded, test, options);
    if (!result) {
      printer->footer();
      return report_error(result.status());
    }
    result->machine_read_gbps = machine_gbps;
    std::string summary = fmt::format("{:.2f} ± {:.2f} t/s", result->avg_ts(), result->stddev_ts());
    if (auto gbps = result->achieved_gbps()) {
      summary += fmt::format(", {:.2f} GB/s of weights ({:.1f} MB per token)", *gbps,
                             static_cast<double>(result->model.weight_bytes_per_token) / 1e6);
    }
    if (auto fraction = result->bandwidth_fraction()) summary += fmt::format(" = {:.0f}% of measured bandwidth", 100 * *fraction);
    if (test.spec && result->spec_n_drafted > 0) {
      summary += fmt::format(", {} of {} drafted tokens accepted ({:.1f}%)", result->spec_n_accepted,
                             result->spec_n_drafted,
                             100.0 * static_cast<double>(result->spec_n_accepted) / static_cast<double>(result->spec_n_drafted));
    }
    std::fprintf(stderr, "moetier bench: %s: %s\n", options.progress_prefix.c_str(), summary.c_str());
    if (result->estimate) {
      std::fprintf(stderr,
                   "moetier bench: ESTIMATE, not measured: %s on the same model with %lld layers instead of %lld "
                   "≈ %.2f t/s (per-layer time scaled by %lld/%lld)\n",
                   name.c_str(), static_cast<long long>(result->estimate->n_layer),
                   static_cast<long long>(loaded->model->hparams().n_layer), result->estimate->ts,
                   static_cast<long long>(result->estimate->n_layer),
                   static_cast<long long>(loaded->model->hparams().n_layer));
    }
    if (params.profile) {
      print_profile(*result);
      print_census(*result);
    }
    printer->test(*result);
  }
  printer->footer();
  return 0;
}

}  // namespace moetier
