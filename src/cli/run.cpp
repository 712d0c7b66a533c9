// moetier run: prompt in, generated text streamed to stdout; speeds on stderr at the end.
#include <atomic>
#include <cstdio>

#include <fmt/format.h>

#include "bench/cpu_load.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_report.h"
#include "cli/prompt_input.h"
#include "core/profiler.h"
#include "engine/expert_streaming.h"
#include "engine/session.h"
#include "platform/cpu.h"
#include "platform/signals.h"
#include "runtime/generate.h"

namespace moetier {

int cmd_run(int argc, char** argv) {
  EngineOptions flags;
  SamplerParams sampling;
  SpecOptions spec_flags;
  std::string prompt, prompt_file;
  int64_t n_predict = 128;
  bool display_prompt = false, no_parse_special = false, ignore_eos = false, profile = false;
  ArgParser p("run", "Generate text from a prompt (raw completion, no chat template; see 'moetier chat').");
  p.option({"-p", "--prompt"}, "TEXT", "prompt text", &prompt);
  p.option({"-f", "--file"}, "FILE", "prompt from a file (exact bytes)", &prompt_file);
  p.option({"-n", "--n-predict"}, "N", "tokens to generate (default 128; -1 = until end of text or context)",
           &n_predict);
  p.flag({"--display-prompt"}, &display_prompt, "print the prompt before the generated text");
  p.flag({"--no-parse-special"}, &no_parse_special, "tokenize control-token text as plain text");
  p.flag({"--ignore-eos"}, &ignore_eos, "do not stop at end-of-generation tokens");
  p.flag({"--profile"}, &profile, "print the forward pass's time split by block type at the end");
  add_engine_flags(p, flags);
  add_sampling_flags(p, sampling);
  add_spec_flags(p, spec_flags);
  p.epilog("example: moetier run -m model.gguf -p \"The capital of France is\" -n 32 --temp 0");
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (flags.list_devices) return print_gpu_devices(flags.verbose);
  if (!prompt_file.empty()) {
    if (!prompt.empty()) return report_error(Status::bad_input("give -p or -f, not both"));
    auto text = read_text_file(prompt_file);
    if (!text) return report_error(text.status());
    prompt = *text;
  }
  if (prompt.empty()) return report_error(Status::bad_input("no prompt given (-p TEXT or -f FILE)"));
  if (auto st = validate(sampling); !st) return report_error(st);
  if (auto st = check_spec_options(spec_flags); !st) return report_error(st);

  StderrLoadReporter reporter;
  auto session = open_session(flags, spec_session_options(spec_flags, {.reporter = &reporter}));
  if (!session) return report_error(session.status());
  auto speculator = make_speculator(spec_flags, *session);
  if (!speculator) return report_error(speculator.status());
  if (auto st = prepare_speculation(speculator->get(), *session->sequence); !st) return report_error(st);
  auto sampler = Sampler::create(sampling);
  if (!sampler) return report_error(sampler.status());
  const auto tokens = session->tokenizer->encode(prompt, {.parse_special = !no_parse_special});
  if (tokens.empty()) return report_error(Status::bad_input("the prompt has no tokens"));
  if (static_cast<int64_t>(tokens.size()) > session->sequence->n_ctx()) {
    return report_error(Status::bad_input(fmt::format("the prompt has {} tokens, more than the context (-c {})",
                                                      tokens.size(), session->sequence->n_ctx())));
  }
  if (display_prompt) std::fwrite(prompt.data(), 1, prompt.size(), stdout);

  Profiler profiler;
  if (profile) session->model->set_profiler(&profiler);
  const std::vector<int> cpus = platform::usable_cpus();
  const std::optional<CpuTimeSample> cpu_before = sample_cpu_time(cpus);
  std::atomic<bool> interrupted{false};  // Ctrl+C: stop generating, print the summary
  const ExpertStoreStats experts_before = session->experts ? session->experts->stats() : ExpertStoreStats{};
  const GpuExpertCacheStats gpu_cache_before = session->model->gpu_expert_cache_stats();
  auto stats = [&] {
    const platform::InterruptScope interrupt(&interrupted);
    return generate(*session->model, *session->sequence, *session->tokenizer, *sampler, tokens,
                    {.n_predict = n_predict,
                     .stop_at_eog = !ignore_eos,
                     .cancel = &interrupted,
                     .speculator = speculator->get()},
                    *session->pool, [](std::string_view text) {
                      std::fwrite(text.data(), 1, text.size(), stdout);
                      std::fflush(stdout);
                    });
  }();
  const std::optional<CpuTimeSample> cpu_after = sample_cpu_time(cpus);
  std::fputc('\n', stdout);
  if (!stats) return report_error(stats.status());
  std::fprintf(stderr, "\nmoetier: prompt %lld tokens in %.2f s (%.2f t/s), generated %lld tokens in %.2f s (%.2f t/s)\n",
               static_cast<long long>(stats->n_prompt), stats->prompt_seconds, stats->prompt_tokens_per_second(),
               static_cast<long long>(stats->n_generated), stats->generation_seconds,
               stats->generation_tokens_per_second());
  if (session->experts) {
    // Prompt and generation together: the cache's figures over the whole run.
    std::fprintf(stderr, "moetier: %s\n",
                 describe_expert_stats(session->experts->stats() - experts_before, stats->n_prompt + stats->n_generated,
                                       stats->prompt_seconds + stats->generation_seconds)
                     .c_str());
    if (Status st = session->experts->status(); !st) return report_error(st);
  }
  if (const GpuExpertCacheStats c = session->model->gpu_expert_cache_stats() - gpu_cache_before; c.pairs > 0) {
    std::fprintf(stderr, "moetier: %s\n", describe_gpu_expert_cache(c, stats->n_prompt + stats->n_generated).c_str());
  }
  if (*speculator) {
    const SpecStats& sp = stats->spec;
    std::fprintf(stderr, "moetier: speculative (%s): %lld drafted, %lld accepted (acceptance %.1f%%) in %lld steps, "
                 "mean draft %.2f tokens, drafting %.2f ms per drafted token\n",
                 std::string(spec_type_name((*speculator)->params().type)).c_str(), static_cast<long long>(sp.n_drafted),
                 static_cast<long long>(sp.n_accepted), 100.0 * sp.acceptance_rate(), static_cast<long long>(sp.n_steps),
                 sp.mean_draft_length(), 1e3 * (*speculator)->draft_seconds_per_token());
    if (const uint64_t b = (*speculator)->drafter().bytes_per_token(); b > 0) {
      std::fprintf(stderr, "moetier: the drafter reads at most %.1f MiB of weights per drafted token\n",
                   static_cast<double>(b) / (1 << 20));
    }
  }
  // Users' "background load cuts speed 3×": say so when it happened to this run.
  if (cpu_before && cpu_after) {
    const int n_cpus = static_cast<int>(cpus.size());
    const double wall = cpu_after->wall_seconds - cpu_before->wall_seconds;
    const std::optional<double> other =
        reportable_other_busy_cpus(other_busy_cpus(*cpu_before, *cpu_after) * wall, wall, n_cpus,
                                   platform::cpu_time_ticks_per_second());
    if (other && oversubscribed(*other, session->pool->size(), n_cpus)) {
      std::fprintf(stderr, "moetier: warning: %s\n",
                   oversubscribed_warning("this run", *other, session->pool->size(), n_cpus).c_str());
    }
  }
  if (profile) std::fputs(format_profile(profiler).c_str(), stderr);
  return 0;
}

}  // namespace moetier
