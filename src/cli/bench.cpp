// moetier bench: llama-bench's flags, tests and output formats on moetier's engine, plus
// moetier's own figures (weight bytes per token, achieved GB/s, peak RSS, profile).
// Results go to stdout in the chosen format; progress and the profile go to stderr.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "bench/bench_params.h"
#include "bench/bench_run.h"
#include "bench/chart.h"
#include "bench/configs.h"
#include "bench/cpu_load.h"
#include "bench/e2e.h"
#include "bench/html_report.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "cli/commands.h"
#include "core/thread_pool.h"
#include "core/utf8_path.h"
#include "engine/cpu_threads.h"
#include "cpu/membw.h"
#include "gguf/sha256_cache.h"
#include "platform/cpu.h"
#include "platform/memory.h"

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

// The stderr line after a test: t/s with its statistics, bandwidth, memory, drafts.
void print_summary(const bench::TestResult& result, const bench::Environment& env, const std::string& prefix,
                   int64_t model_n_layer) {
  const bench::Summary s = result.ts_summary();
  std::string summary = fmt::format("{:.2f} ± {:.2f} t/s (min {:.2f}, max {:.2f}, cv {:.1f}%", s.mean, s.sd, s.min, s.max,
                                    100 * s.cv);
  if (result.interleaved) {
    if (auto d = result.drift_percent()) summary += fmt::format(", drift {:+.1f}%", *d);
  }
  summary += ")";
  if (auto gbps = result.achieved_gbps()) {
    summary += fmt::format(", {:.2f} GB/s of weights ({:.1f} MB per token)", *gbps,
                           static_cast<double>(result.model.weight_bytes_per_token) / 1e6);
  }
  if (auto fraction = result.bandwidth_fraction()) summary += fmt::format(" = {:.0f}% of measured bandwidth", 100 * *fraction);
  if (!result.ttft_ns.empty()) {
    std::vector<double> ttft(result.ttft_ns.begin(), result.ttft_ns.end());
    const bench::Summary t = bench::summarize(ttft);
    summary += fmt::format(", time to first token {:.1f} ± {:.1f} ms, {} prompt tokens", t.mean / 1e6, t.sd / 1e6,
                           result.spec.n_prompt);
  }
  if (auto mem = result.rss_peak_minus_idle_bytes(env)) {
    summary += fmt::format(", peak - idle RSS {:.1f} MiB", static_cast<double>(*mem) / 1048576.0);
  }
  if (result.vram_peak_minus_idle_bytes) {
    summary += fmt::format(", VRAM {:.1f} MiB ({})", static_cast<double>(*result.vram_peak_minus_idle_bytes) / 1048576.0,
                           result.vram_source);
  }
  const bench::TestSpec& test = result.spec;
  if (test.spec && result.spec_n_drafted > 0) {
    summary += fmt::format(", {} of {} drafted tokens accepted ({:.1f}%)", result.spec_n_accepted, result.spec_n_drafted,
                           100.0 * static_cast<double>(result.spec_n_accepted) / static_cast<double>(result.spec_n_drafted));
  }
  if (result.other_busy_cpus) summary += fmt::format(", other processes {:.2f} CPUs busy", *result.other_busy_cpus);
  std::fprintf(stderr, "moetier bench: %s: %s\n", prefix.c_str(), summary.c_str());
  if (result.other_busy_cpus && oversubscribed(*result.other_busy_cpus, test.n_threads, env.usable_cpus)) {
    std::fprintf(stderr, "moetier bench: warning: %s\n",
                 oversubscribed_warning(bench::test_name(test), *result.other_busy_cpus, test.n_threads, env.usable_cpus)
                     .c_str());
  }
  if (s.cv > bench::kNoisyCv) {
    std::fprintf(stderr, "moetier bench: warning: %s varies by %.1f%% (cv above %.0f%%): too noisy to compare differences "
                 "of that size\n", bench::test_name(test).c_str(), 100 * s.cv, 100 * bench::kNoisyCv);
  }
  if (result.estimate) {
    std::fprintf(stderr,
                 "moetier bench: ESTIMATE, not measured: %s on the same model with %lld layers instead of %lld "
                 "≈ %.2f t/s (per-layer time scaled by %lld/%lld)\n",
                 bench::test_name(test).c_str(), static_cast<long long>(result.estimate->n_layer),
                 static_cast<long long>(model_n_layer), result.estimate->ts,
                 static_cast<long long>(result.estimate->n_layer), static_cast<long long>(model_n_layer));
  }
}

// Progress lines and each test's summary (and profile) on stderr.
class StderrBenchEvents : public bench::BenchEvents {
 public:
  StderrBenchEvents(const bench::Environment& env, bool profile) : env_(env), profile_(profile) {}
  void note(const std::string& line) override { std::fprintf(stderr, "moetier bench: %s\n", line.c_str()); }
  void result(const bench::TestResult& result, const std::string& prefix, int64_t model_n_layer) override {
    print_summary(result, env_, prefix, model_n_layer);
    if (profile_ && model_n_layer > 0) {
      print_profile(result);
      print_census(result);
    }
  }

 private:
  const bench::Environment& env_;
  bool profile_;
};

}  // namespace

int cmd_bench(int argc, char** argv) {
  // The idle baseline of the memory figure (peak - idle RSS): after start-up, before any model is read.
  const std::optional<uint64_t> idle_rss = platform::process_memory().resident;
  bool help = false;
  std::string help_text;
  // -t's default: engine/cpu_threads.h's choice for the machine and --cpu-mask (a hybrid CPU's
  // performance cores, else every core of the process's CPUs).
  const auto default_threads = [](const bench::BenchParams& p) -> int64_t {
    const auto c = choose_cpu_threads(platform::cpu_topology(), platform::usable_cpus(), {.mask = p.cpu_mask});
    return c ? c->threads : platform::cpu_topology().physical;
  };
  auto parsed = bench::parse_bench_args(argc, argv, default_threads, &help, &help_text);
  if (!parsed) return report_error(parsed.status());
  if (help) {
    std::fputs(help_text.c_str(), stdout);
    return 0;
  }
  const bench::BenchParams params = std::move(parsed).value();

  const std::vector<bench::TestSpec> tests = bench::expand_tests(params);
  bench::Environment env = bench::detect_environment();
  env.idle_rss_bytes = idle_rss;
  env.n_threads = params.n_threads;
  env.interleaved = params.interleave == 1 || (params.interleave == -1 && bench::count_configurations(tests) > 1);
  env.peak_rss_resettable = platform::reset_peak_resident();
  // Outputs that need a tool or a folder fail before any time is spent measuring.
  if (auto st = bench::check_chart_output(params.chart_path); !st.is_ok()) return report_error(st);
  if (!params.report_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(utf8_path(params.report_dir), ec);
    if (ec) return report_error(Status::bad_input(fmt::format("--report {}: {}", params.report_dir, ec.message())));
  }
  // A server for --url answers before anything is measured (a wrong URL fails at once).
  std::optional<bench::E2eServer> server;
  if (!params.e2e_url.empty()) {
    auto s = bench::connect_e2e_server(params.e2e_url);
    if (!s) return report_error(s.status());
    server = std::move(s).value();
    std::fprintf(stderr, "moetier bench: --url %s serves '%s'\n", server->url.c_str(), server->model_id.c_str());
  }
  {
    auto files = bench::describe_model_files(params.models, {.cache_dir = default_cache_dir(), .log = stderr});
    if (!files) return report_error(files.status());
    env.model_files = std::move(files).value();
  }

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
  StderrBenchEvents events(env, params.profile);
  auto run = bench::run_bench({.params = params,
                               .tests = tests,
                               .env = env,
                               .machine_gbps = machine_gbps,
                               .server = server ? &*server : nullptr,
                               .printer = *printer,
                               .events = events});
  if (!run) {
    printer->footer();
    return report_error(run.status());
  }
  const std::vector<bench::TestResult> results = std::move(run).value();
  const std::vector<bench::Comparison> comparisons = bench::compare_results(tests, results, params.compare);
  for (const bench::Comparison& c : comparisons) {
    std::fprintf(stderr, "moetier bench: compare %s\n", bench::describe_comparison(c).c_str());
  }
  printer->comparisons(comparisons);
  printer->footer();

  const bench::ChartData chart = bench::chart_from_results(results, env);
  if (!params.chart_path.empty()) {
    if (auto st = bench::write_chart(chart, params.chart_path); !st.is_ok()) return report_error(st);
    std::fprintf(stderr, "moetier bench: chart written to %s\n", params.chart_path.c_str());
  }
  if (!params.report_dir.empty()) {
    const std::string path = params.report_dir + "/index.html";
    const std::string page = bench::render_html_report({.env = env, .results = results, .comparisons = comparisons,
                                                        .chart = chart, .command_line = bench::command_line(argc, argv)});
    if (auto st = bench::write_text_file(path, page); !st.is_ok()) return report_error(st);
    std::fprintf(stderr, "moetier bench: report written to %s\n", path.c_str());
  }
  return 0;
}

}  // namespace moetier
