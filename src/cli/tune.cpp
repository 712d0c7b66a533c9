// moetier tune: searches the placement and runtime knobs (-ngl, -ncmoe/-cmoe, -t, -ub, mmap,
// KV type where allowed) within the memory the plan allows, measures them with bench's
// runner (short interleaved runs, then the best two again at full size) and prints the
// winning command line with its speed, memory and how sure the choice is. The search
// itself is tune/search.* (unit-tested on made-up speeds); this file is the I/O.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "bench/bench_params.h"
#include "bench/bench_run.h"
#include "cli/commands.h"
#include "console/progress.h"
#include "core/args.h"
#include "engine/cpu_threads.h"
#include "engine/session.h"
#include "gguf/sha256_cache.h"
#include "platform/cpu.h"
#include "platform/memory.h"
#include "platform/terminal.h"
#include "tune/bench_measurer.h"
#include "tune/candidates.h"
#include "tune/report.h"
#include "tune/search.h"
#include "tune/space_plan.h"

namespace moetier {

namespace {

constexpr int64_t kMiB = 1 << 20;

struct TuneParams {
  std::string model;
  int64_t vram_budget_mib = 0;   // --vram-budget: plan as if the GPU had this much (0: what it has)
  int64_t fit_margin_mib = 1536; // --fit-margin: GPU memory kept free, as --fit keeps it
  int64_t n_ctx = 4096;          // -c: the context the command will run with (KV cache in the plan)
  tune::Purpose purpose = tune::Purpose::kServe;
  double time_budget_s = 300;    // --time-budget
  std::vector<int64_t> threads;  // -t LIST (empty: physical, physical - 1, physical / 2)
  std::optional<std::vector<int>> cpu_mask;  // --cpu-mask / --cpu-range
  bool cpu_strict = false;                   // --cpu-strict
  std::vector<DType> kv_types = {DType::F16};
  int device = -1;
  bool json = false;
  uint32_t seed = 1234;
};

constexpr const char* kSummary =
    "Find the fastest configuration of a model on this machine: candidates from the memory plan (--fit's\n"
    "placement and its -ncmoe neighbours that fit, -cmoe, CPU only; thread counts; -ub for serve; mmap or\n"
    "not; the KV types allowed), each measured short with bench's runner (interleaved), the best two again\n"
    "at full size; prints the winning command line with its speed, peak - idle memory and the 95% interval\n"
    "of its ratio to the runner-up. Progress on stderr; stops adding candidates at --time-budget.";

constexpr const char* kEpilog =
    "scores:\n"
    "  --for serve   chat turn time T = 512/pp + 128/tg seconds at the measured pp and tg speeds (a 512-token\n"
    "                prompt and a 128-token answer; lower is better, compared as 1/T)\n"
    "  --for bench   generation speed (tg t/s); -ub is not searched (it only changes prompt speed)\n"
    "method:\n"
    "  phase 1: every candidate with -r 2 of pp128 and tg32, one repetition of each per round (interleaved),\n"
    "           one model load per mmap mode; a candidate is admitted while its runs and phase 2 fit the budget\n"
    "  phase 2: the best two with up to -r 5 of pp512 and tg128 (fewer when the budget is short; skipped below 2)\n"
    "  verdict: when the ratio's 95% interval holds 1 the two are not distinguishable and the one with less\n"
    "           peak - idle memory (then fewer flags) is reported, saying so\n"
    "examples:\n"
    "  moetier tune -m model.gguf --vram-budget 6144 -c 65536 --for serve --time-budget 600\n"
    "  moetier tune -m model.gguf --for bench -t 1,2 --allow-kv-types f16,q8_0 -o json";

Result<TuneParams> parse_args(int argc, char** argv, bool* help, std::string* help_text) {
  TuneParams p;
  ArgParser parser("tune", kSummary);
  parser.option({"-m", "--model"}, "FILE", "GGUF model file", &p.model);
  parser.option({"--for"}, "serve|bench", "what the winner is for: serve (a chat turn, default) or bench (tg)",
                [&p](std::string_view v) -> Status {
                  if (v == "serve") p.purpose = tune::Purpose::kServe;
                  else if (v == "bench") p.purpose = tune::Purpose::kBench;
                  else return Status::bad_input(fmt::format("flag '--for': '{}' is not one of serve, bench", v));
                  return Status::ok();
                });
  parser.option({"-c", "--ctx-size"}, "N", "context of the command to tune (its KV cache counts in the plan; default 4096)",
                &p.n_ctx);
  parser.option({"--vram-budget"}, "MiB", "plan as if the GPU had this much memory (default: what it has free)",
                &p.vram_budget_mib);
  parser.option({"--fit-margin"}, "MiB", "GPU memory kept free, as --fit keeps it (default 1536)", &p.fit_margin_mib);
  parser.option({"--time-budget"}, "SECONDS", "stop adding candidates when the search would take longer (default 300)",
                [&p](std::string_view v) -> Status {
                  char* end = nullptr;
                  const std::string s(v);
                  const double x = std::strtod(s.c_str(), &end);
                  if (s.empty() || end != s.c_str() + s.size() || !(x > 0) || x > 7 * 24 * 3600.0) {
                    return Status::bad_input(fmt::format("flag '--time-budget': '{}' is not a number of seconds above 0", v));
                  }
                  p.time_budget_s = x;
                  return Status::ok();
                });
  add_cpu_set_flags(parser, p.cpu_mask, p.cpu_strict);
  parser.option({"-t", "--threads"}, "LIST",
                "thread counts to try (default: the cores run's default uses (a hybrid CPU's performance cores, else "
                "all), one less, half)",
                [&p](std::string_view v) -> Status {
                  ASSIGN_OR_RETURN(std::vector<int64_t> list, bench::parse_int_list(v, "-t"));
                  for (int64_t t : list) {
                    if (t < 1 || t > 1024) return Status::bad_input(fmt::format("flag '-t': {} is not in 1..1024", t));
                    p.threads.push_back(t);
                  }
                  return Status::ok();
                });
  parser.option({"--allow-kv-types"}, "LIST",
                "KV cache types tune may choose, the first being the default (f32, f16, q8_0, q4_0; default f16 only: "
                "a quantized cache changes the model's output slightly, so it is the user's call)",
                [&p](std::string_view v) -> Status {
                  p.kv_types.clear();
                  size_t start = 0;
                  while (true) {
                    const size_t comma = v.find(',', start);
                    const std::string item(v.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
                    ASSIGN_OR_RETURN(DType t, parse_cache_type(item, "flag '--allow-kv-types'"));
                    if (std::find(p.kv_types.begin(), p.kv_types.end(), t) == p.kv_types.end()) p.kv_types.push_back(t);
                    if (comma == std::string_view::npos) break;
                    start = comma + 1;
                  }
                  return Status::ok();
                });
  parser.option({"-dev", "--device"}, "N", "Vulkan device (default: the first hardware GPU)", &p.device);
  parser.option({"-o", "--output"}, "md|json", "output format on stdout (default md; json has every candidate's samples)",
                [&p](std::string_view v) -> Status {
                  if (v != "md" && v != "json") return Status::bad_input(fmt::format("flag '-o': '{}' is not one of md, json", v));
                  p.json = v == "json";
                  return Status::ok();
                });
  parser.option({"--cpu-isa"}, "TIER", "CPU kernels up to this ISA: auto (default), avx512, avx2, avx2-novnni, scalar",
                [](std::string_view) { return Status::ok(); });  // applied by main() before anything runs
  parser.epilog(kEpilog);
  RETURN_IF_ERROR(parser.parse(argc, argv));
  *help = parser.help_requested();
  if (help_text) *help_text = parser.help_text();
  if (*help) return p;
  if (p.model.empty()) return Status::bad_input("no model given (-m FILE)");
  if (p.n_ctx < 1) return Status::bad_input("flag '-c': the context must be at least 1 token");
  if (p.vram_budget_mib < 0) return Status::bad_input("flag '--vram-budget' must not be negative");
  if (p.fit_margin_mib < 0) return Status::bad_input("flag '--fit-margin' must not be negative");
  return p;
}

// Progress over the phases: a bar with ETA per phase (drawn on a terminal only) and one
// line at each phase's start.
class TuneProgress {
 public:
  void phase(const std::string& what, int64_t steps) {
    if (bar_) bar_->finish();
    std::fprintf(stderr, "moetier tune: %s\n", what.c_str());
    bar_ = std::make_unique<ProgressBar>(ProgressOptions{.label = "tune", .total = static_cast<uint64_t>(steps), .bytes = false});
    done_ = 0;
  }
  void step() {
    if (bar_) bar_->update(++done_);
  }
  void finish() {
    if (bar_) bar_->finish();
    bar_.reset();
  }

 private:
  std::unique_ptr<ProgressBar> bar_;
  uint64_t done_ = 0;
};

}  // namespace

int cmd_tune(int argc, char** argv) {
  const std::optional<uint64_t> idle_rss = platform::process_memory().resident;  // before any model is read
  bool help = false;
  std::string help_text;
  auto parsed = parse_args(argc, argv, &help, &help_text);
  if (!parsed) return report_error(parsed.status());
  if (help) {
    std::fputs(help_text.c_str(), stdout);
    return 0;
  }
  const TuneParams params = std::move(parsed).value();

  // The thread counts start from run's default (engine/cpu_threads.h): a hybrid CPU's
  // performance cores, else every core of the process's CPUs (or those --cpu-mask names).
  const auto cpu_choice =
      choose_cpu_threads(platform::cpu_topology(), platform::usable_cpus(), {.mask = params.cpu_mask});
  if (!cpu_choice) return report_error(cpu_choice.status());
  const int default_threads = cpu_choice->threads;
  // The plan, from the header alone: --fit's choice is the starting point.
  auto plan = tune::plan_search_space({.model_path = params.model,
                                       .purpose = params.purpose,
                                       .device = params.device,
                                       .vram_budget_mib = params.vram_budget_mib,
                                       .fit_margin_mib = params.fit_margin_mib,
                                       .n_ctx = params.n_ctx,
                                       .physical_cores = default_threads,
                                       .threads = params.threads,
                                       .kv_types = params.kv_types});
  if (!plan) return report_error(plan.status());
  // After the plan: bad input (an unreadable model) gets its one error line and nothing else.
  std::fprintf(stderr, "moetier tune: %s\n", describe_cpu_threads(*cpu_choice).c_str());
  std::fprintf(stderr, "moetier tune: %s\n", plan->placement_note.c_str());
  const std::vector<tune::Candidate> candidates = tune::build_candidates(plan->space);

  bench::Environment env = bench::detect_environment();
  env.idle_rss_bytes = idle_rss;
  env.interleaved = true;
  env.peak_rss_resettable = platform::reset_peak_resident();
  for (const tune::Candidate& c : candidates) {
    if (std::find(env.n_threads.begin(), env.n_threads.end(), c.n_threads) == env.n_threads.end()) env.n_threads.push_back(c.n_threads);
  }
  {
    auto files = bench::describe_model_files({params.model}, {.cache_dir = default_cache_dir(), .log = stderr});
    if (!files) return report_error(files.status());
    env.model_files = std::move(files).value();
  }

  tune::BenchMeasurer measurer({.model_path = params.model,
                                .device = params.device,
                                .vram_budget_mib = plan->gpu_budget_bytes > 0 ? plan->gpu_budget_bytes / kMiB : params.vram_budget_mib,
                                .seed = params.seed,
                                .env = env,
                                .cpu = {.mask = params.cpu_mask, .strict = params.cpu_strict}});
  TuneProgress progress;
  const auto t0 = std::chrono::steady_clock::now();
  tune::SearchParams search{
      .purpose = params.purpose,
      .time_budget_s = params.time_budget_s,
      .now = [t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); },
      .on_phase = [&progress](const std::string& what, int64_t steps) { progress.phase(what, steps); },
      .on_step = [&progress] { progress.step(); },
      // On a terminal the line first clears the progress bar's line (the bar redraws below it).
      .log = [tty = platform::is_terminal(platform::StandardStream::kStderr)](const std::string& line) {
        std::fprintf(stderr, "%smoetier tune: %s\n", tty ? "\r\033[2K" : "", line.c_str());
      },
  };
  auto result = tune::run_search(candidates, measurer, search);
  progress.finish();
  if (!result) return report_error(result.status());

  tune::TuneReport report{.env = env,
                          .model_path = params.model,
                          .model_type = measurer.model_info() ? measurer.model_info()->type : "",
                          .purpose = params.purpose,
                          .n_ctx = params.n_ctx,
                          .n_layer_all = plan->n_layer_all,
                          .time_budget_s = params.time_budget_s,
                          .placement_note = plan->placement_note,
                          .fit_flags = plan->fit_flags,
                          .search = search,
                          .result = std::move(result).value()};
  const std::string text = params.json ? tune::render_json(report) : tune::render_markdown(report);
  std::fputs(text.c_str(), stdout);
  std::fprintf(stderr, "moetier tune: winner: %s\n", tune::winner_command(report).c_str());
  return 0;
}

}  // namespace moetier
