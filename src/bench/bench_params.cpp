#include "bench/bench_params.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "engine/cpu_threads.h"
#include "engine/session.h"

namespace moetier::bench {

namespace {

// A list flag expands to at most this many values: a typo such as "1-100000000" should be an
// error, not hours of benchmarks or gigabytes of test specs.
constexpr size_t kMaxListValues = 4096;
constexpr int64_t kMaxThreads = 1024;

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// One comma-separated item: "N", "-N" (allow_negative), "A-B", "A-B+S", "A-B*M".
Status parse_item(std::string_view item, std::string_view flag, bool allow_negative, std::vector<int64_t>& out) {
  const std::string what = fmt::format("flag '{}'", flag);
  const auto bad = [&](std::string_view why) {
    return Status::bad_input(fmt::format("{}: '{}' {} (expected N, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*MULT)",
                                         what, item, why));
  };
  if (item.empty()) return bad("is empty");
  // First value: an optional leading '-' (negative numbers), then digits.
  size_t pos = 0;
  if (item[0] == '-') {
    if (!allow_negative) return bad("is negative");
    pos = 1;
  }
  size_t end = pos;
  while (end < item.size() && item[end] >= '0' && item[end] <= '9') ++end;
  if (end == pos) return bad("is not a number");
  ASSIGN_OR_RETURN(int64_t first, parse_int(item.substr(0, end), what));
  if (end == item.size()) {
    out.push_back(first);
    return Status::ok();
  }
  if (item[end] != '-') return bad("is not a number");
  // Range: FIRST-LAST with an optional +STEP or *MULT.
  std::string_view rest = item.substr(end + 1);
  const size_t op_pos = rest.find_first_of("+*");
  const std::string_view last_text = rest.substr(0, op_pos);
  if (!all_digits(last_text)) return bad("is not a valid range");
  ASSIGN_OR_RETURN(int64_t last, parse_int(last_text, what));
  char op = '+';
  int64_t step = 1;
  if (op_pos != std::string_view::npos) {
    op = rest[op_pos];
    const std::string_view step_text = rest.substr(op_pos + 1);
    if (!all_digits(step_text)) return bad("has no valid step");
    ASSIGN_OR_RETURN(step, parse_int(step_text, what));
  }
  if (last < first) return bad("is an empty range (last < first)");
  if (op == '+' && step < 1) return bad("has a step below 1");
  if (op == '*' && (step < 2 || first < 1)) return bad("needs a multiplier >= 2 and a first value >= 1");
  for (int64_t v = first; v <= last;) {
    if (out.size() >= kMaxListValues) return bad(fmt::format("expands to more than {} values", kMaxListValues));
    out.push_back(v);
    if (op == '+') {
      if (v > last - step) break;  // the next value would pass `last` (or overflow)
      v += step;
    } else {
      if (v > last / step) break;
      v *= step;
    }
  }
  return Status::ok();
}

// A handler that appends the parsed list to `out`, checking every value >= min_value.
ArgParser::Handler int_list(std::vector<int64_t>* out, std::string flag, int64_t min_value, bool allow_negative = false) {
  return [out, flag, min_value, allow_negative](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(std::vector<int64_t> values, parse_int_list(v, flag, allow_negative));
    for (int64_t x : values) {
      if (x < min_value) {
        return Status::bad_input(fmt::format("flag '{}': {} is below the minimum {}", flag, x, min_value));
      }
    }
    out->insert(out->end(), values.begin(), values.end());
    return Status::ok();
  };
}

ArgParser::Handler cache_type_list(std::vector<DType>* out, std::string flag) {
  return [out, flag](std::string_view v) -> Status {
    for (std::string_view item : split(v, ',')) {
      ASSIGN_OR_RETURN(DType t, parse_cache_type(std::string(item), flag.c_str()));
      out->push_back(t);
    }
    return Status::ok();
  };
}

constexpr const char* kSummary =
    "Measure prompt processing (pp) and generation (tg) speed like llama-bench: every test parameter\n"
    "takes a comma list or a range, and the tests are the cartesian product of the lists. Each test\n"
    "runs one untimed warm-up, then -r timed repetitions on random token ids, each on an empty\n"
    "sequence after an untimed fill of -d tokens of KV depth. With more than one configuration the\n"
    "repetitions run round-robin (--interleave). Results (t/s as mean ± sample stddev, cv, drift,\n"
    "peak - idle memory; provenance in the header) go to stdout; progress goes to stderr.";

constexpr const char* kEpilog =
    "tests:\n"
    "  ppN          N prompt tokens in forward calls of -b tokens (split into -ub micro-batches)\n"
    "  tgN          N single-token forward calls (generation without sampling)\n"
    "  ppN+tgM      both, timed together (-pg N,M); t/s counts N+M tokens\n"
    "  stepN        16 forward calls of N tokens, each a verify step (--step N); t/s counts 16·N tokens\n"
    "  stepN xS seqs  the same with S sequences in each call (--step-seqs S); t/s counts 16·N·S tokens\n"
    "  ... @ dD     with D tokens already in the KV cache (-d D)\n"
    "\n"
    "output fields (json, jsonl, csv): llama-bench's names (build_commit, model_type, model_size,\n"
    "n_threads, n_prompt, n_gen, n_depth, avg_ns, stddev_ns, avg_ts, stddev_ts, ...; samples_ns and\n"
    "samples_ts in json/jsonl only) and\n"
    "  weight_bytes_per_token  weight bytes one generated token reads: all non-expert matrices incl.\n"
    "                          the LM head, one token_embd row, n_expert_used/n_expert of the routed experts\n"
    "  achieved_gbps           weight_bytes_per_token x tg t/s / 1e9 (tg tests and one-sequence 1-token step\n"
    "                          tests; null otherwise: a verify or a multi-sequence step reads the dense\n"
    "                          weights once for all its tokens)\n"
    "  peak_rss_bytes          the process's peak resident memory during the test (VmHWM, reset before each\n"
    "                          repetition; peak_rss_scope says \"test\", or \"cumulative\" where it cannot be reset)\n"
    "  idle_rss_bytes          resident memory after start-up, before any model is loaded (VmRSS)\n"
    "  rss_peak_minus_idle_bytes  peak_rss_bytes - idle_rss_bytes: the test's memory footprint\n"
    "  vram_peak_minus_idle_bytes, vram_source  GPU memory peak - idle: \"driver\" (device usage after a\n"
    "                          repetition minus before placing) or \"allocator\" (gpu_*_bytes summed)\n"
    "  min_ts, max_ts, cv_ts   extremes and coefficient of variation (stddev_ts / avg_ts) of the samples\n"
    "  drift_pct               mean t/s of the last half of the repetitions vs the first half, in %\n"
    "  interleaved             whether the repetitions alternated with other tests'\n"
    "  other_busy_cpus         CPUs other processes (and a VM's steal time) kept busy while the timed\n"
    "                          repetitions ran: the busy time in the OS's per-CPU time counters less this\n"
    "                          process's, over wall time (null when the repetitions took under ~1 s in all:\n"
    "                          too short for the counters' ticks).\n"
    "                          When they and the test's threads add up to more than the CPUs, bench warns:\n"
    "                          the figure then measures contention (use -t <free CPUs>, or stop the load)\n"
    "  expert_hit_rate, expert_read_ahead_rate, expert_bytes_read_per_token, expert_read_gbps,\n"
    "  expert_prediction_accuracy, expert_wait_fraction\n"
    "                          models bigger than RAM (experts read from the file): the share of the experts\n"
    "                          the tokens routed to that were in RAM (of them, being read ahead), bytes read\n"
    "                          per token, the reads' GB/s while any was in flight, how often the next\n"
    "                          layer's router named the experts used, the share of the time spent waiting\n"
    "  expert_gpu_hit_rate, expert_gpu_copies_per_token\n"
    "                          the VRAM expert cache (--gpu-expert-cache): the share of the routed\n"
    "                          (token, expert) pairs computed from copies on the GPU, copies made per token\n"
    "  step_tokens, step_ms    step tests (--step): tokens per step and the mean time of one step\n"
    "  step_seqs               step tests: sequences in each step (--step-seqs; step_tokens each)\n"
    "  spec_expected_tokens_per_step, spec_tokens_per_step\n"
    "                          --spec-replay tests: 1 + a + ... + a^k at the target acceptance a, and the\n"
    "                          measured (accepted drafts + verify steps) / verify steps\n"
    "  disk_read_gbps          --diskbw: the model file's random unbuffered read rate (null without it)\n"
    "  moetier_version, date, model_file, model_file_bytes, model_sha256   provenance (the SHA-256 is\n"
    "                          cached in $XDG_CACHE_HOME/moetier or ~/.cache/moetier by path, size and mtime)\n"
    "  gpu_device              the GPU the test ran on (null: CPU only)\n"
    "  gpu_weight_bytes, gpu_kv_bytes, gpu_state_bytes, gpu_scratch_bytes\n"
    "                          what moetier allocated on the GPU, by purpose (deterministic)\n"
    "  vram_used_delta_bytes   device memory in use after the test minus before loading it (users'\n"
    "                          peak - idle method; needs VK_EXT_memory_budget, else null)\n"
    "  backends                Vulkan when the test ran layers on the GPU, else CPU (the table's backend)\n"
    "  gpu_backend             the GPU backend, kernel set and device (null: CPU only)\n"
    "  cpu_isa                 the SIMD features the kernels may use\n"
    "  profile                 with --profile (json/jsonl): ms, % and calls per repetition by block type\n"
    "  gpu_census              with --profile and GPU layers (json/jsonl): per token dispatches, barriers,\n"
    "                          copies, submits, host waits, bytes up/down, weight bytes; per shader\n"
    "                          dispatches, GPU ms (timestamps) and weight bytes (docs/benchmarking.md)\n"
    "\n"
    "examples:\n"
    "  moetier bench -m model.gguf                          pp512 and tg128, 5 repetitions, markdown\n"
    "  moetier bench -m model.gguf -p 64 -n 16 -r 2 -o json\n"
    "  moetier bench -m model.gguf -t 1,2 -p 128,512 -n 0   pp tests for 1 and 2 threads\n"
    "  moetier bench -m model.gguf -p 0 -n 32 -d 0,512-4096*2  tg32 at depths 0, 512, 1024, 2048, 4096\n"
    "  moetier bench -m a.gguf,b.gguf -pg 512,128 --profile -mmp 0\n"
    "  moetier bench -m model.gguf -p 0 -n 32 -d 16384 -ctk f16,q8_0,q4_0 -ctv f16,q8_0,q4_0 --compare\n"
    "  moetier bench -m model.gguf -t 1,2 --chart speed.svg --report out/bench   chart and HTML report";

template <typename T>
void default_if_empty(std::vector<T>& list, T value) {
  if (list.empty()) list.push_back(value);
}

}  // namespace

Result<std::vector<int64_t>> parse_int_list(std::string_view text, std::string_view flag, bool allow_negative) {
  std::vector<int64_t> values;
  for (std::string_view item : split(text, ',')) {
    RETURN_IF_ERROR(parse_item(item, flag, allow_negative, values));
    if (values.size() > kMaxListValues) {
      return Status::bad_input(fmt::format("flag '{}': more than {} values", flag, kMaxListValues));
    }
  }
  return values;
}

Result<int> parse_flash_attn(std::string_view v) {
  if (v == "on" || v == "1" || v == "true" || v == "enabled") return 1;
  if (v == "off" || v == "0" || v == "false" || v == "disabled") return 0;
  if (v == "auto" || v == "-1") return -1;
  return Status::bad_input(fmt::format("flag '-fa': '{}' is not one of on, off, auto (or 1, 0, -1)", v));
}

std::string_view output_format_name(OutputFormat format) {
  switch (format) {
    case OutputFormat::kMarkdown: return "md";
    case OutputFormat::kJson: return "json";
    case OutputFormat::kJsonl: return "jsonl";
    case OutputFormat::kCsv: return "csv";
  }
  return "?";
}

void add_bench_flags(ArgParser& p, BenchParams& b) {
  p.section("test parameters (each takes a comma list and may be repeated; ranges FIRST-LAST[+STEP|*MULT])");
  p.option({"-m", "--model"}, "FILE[,FILE]", "GGUF model file(s)", [&b](std::string_view v) -> Status {
    for (std::string_view item : split(v, ',')) {
      if (item.empty()) return Status::bad_input("flag '-m': empty model path");
      b.models.emplace_back(item);
    }
    return Status::ok();
  });
  p.option({"-p", "--n-prompt"}, "N", "prompt tokens per pp test; 0 = no pp test (default 512)",
           int_list(&b.n_prompt, "-p", 0));
  p.option({"-n", "--n-gen"}, "N", "generated tokens per tg test; 0 = no tg test (default 128)",
           int_list(&b.n_gen, "-n", 0));
  p.option({"--step"}, "N[,N...]",
           "step tests: forward calls of N tokens, each a speculative verify (logits for every token, the rollback "
           "journal, cut back to its first token; N = 1: a decode step), 16 per repetition after a fill of -d tokens "
           "(at least 1); with two or more sizes a table gives each size's step time relative to the smallest, per "
           "block with --profile (what a verify of k+1 tokens costs; with --step-seqs, what -np slots decoded together "
           "cost)",
           int_list(&b.n_step, "--step", 1));
  p.option({"--step-seqs"}, "S[,S...]",
           "sequences in each step test (default 1): every step is one batched forward call of S sequences with N "
           "tokens each, every sequence filled to the same depth first (S with --step 1: what -np S slots decoding "
           "together cost; the step table then has a column per sequence count)",
           int_list(&b.n_step_seqs, "--step-seqs", 1));
  p.option({"--spec-replay"}, "A[,A...]",
           "also run each tg test as greedy generation, without drafts and with speculative decoding whose drafts "
           "are the model's own continuation, each drafted token kept with probability A (what speculation is worth "
           "at acceptance A on this machine, with the real verify path)",
           [&b](std::string_view v) -> Status {
             for (std::string_view item : split(v, ',')) {
               char* end = nullptr;
               const std::string text(item);
               const double a = std::strtod(text.c_str(), &end);
               if (text.empty() || end != text.c_str() + text.size() || !(a >= 0 && a <= 1)) {
                 return Status::bad_input(fmt::format("flag '--spec-replay': '{}' is not an acceptance in [0, 1]", item));
               }
               b.spec_replay.push_back(a);
             }
             return Status::ok();
           });
  p.option({"--spec-type"}, "none|draft-mtp",
           "draft-mtp: also run each tg test with the model's MTP layer drafting (greedy baseline included); on a "
           "random-weight model its drafts are rarely accepted, so this measures what the head costs",
           [&b](std::string_view v) -> Status {
             if (v != "none" && v != "draft-mtp") {
               return Status::bad_input(fmt::format("flag '--spec-type': '{}' is not one of none, draft-mtp (bench "
                                                    "measures n-gram drafts through --spec-replay)", v));
             }
             b.spec_mtp = v == "draft-mtp";
             return Status::ok();
           });
  p.option({"--spec-draft-n-max", "--draft-max"}, "N",
           "with --spec-replay or --spec-type: draft lengths to measure (default 3)",
           int_list(&b.spec_draft_max, "--spec-draft-n-max", 1));
  p.option({"--spec-adaptive"}, "on|off",
           "with --spec-replay: let the controller choose the draft length up to N (default off: always N)",
           [&b](std::string_view v) -> Status {
             if (v != "on" && v != "off") return Status::bad_input("flag '--spec-adaptive': give on or off");
             b.spec_adaptive = v == "on";
             return Status::ok();
           });
  p.option({"-pg"}, "PP,TG", "a combined test: PP prompt tokens then TG generated tokens (repeatable)",
           [&b](std::string_view v) -> Status {
             const auto parts = split(v, ',');
             if (parts.size() != 2) return Status::bad_input(fmt::format("flag '-pg': '{}' is not PP,TG", v));
             ASSIGN_OR_RETURN(int64_t pp, parse_int(parts[0], "flag '-pg'"));
             ASSIGN_OR_RETURN(int64_t tg, parse_int(parts[1], "flag '-pg'"));
             if (pp < 0 || tg < 0) return Status::bad_input(fmt::format("flag '-pg': '{}' has a negative count", v));
             b.prompt_gen.push_back({.n_prompt = pp, .n_gen = tg});
             return Status::ok();
           });
  p.option({"-d", "--n-depth"}, "N", "tokens already in the KV cache before each test, filled untimed (default 0)",
           int_list(&b.n_depth, "-d", 0));
  p.option({"-b", "--batch-size"}, "N", "tokens per forward call in pp tests (default 2048)",
           int_list(&b.n_batch, "-b", 1));
  p.option({"-ub", "--ubatch-size"}, "N", "tokens per micro-batch, at most -b (default 512)",
           int_list(&b.n_ubatch, "-ub", 1));
  p.option({"-ctk", "--cache-type-k"}, "TYPE", "KV cache type for K: f32, f16, q8_0 or q4_0 (default f16)",
           cache_type_list(&b.type_k, "-ctk"));
  p.option({"-ctv", "--cache-type-v"}, "TYPE", "KV cache type for V: f32, f16, q8_0 or q4_0 (default f16)",
           cache_type_list(&b.type_v, "-ctv"));
  add_cpu_set_flags(p, b.cpu_mask, b.cpu_strict);
  p.option({"-t", "--threads"}, "N",
           "CPU threads (default: one per performance core on a hybrid CPU, pinned there; else one per physical "
           "core)",
           [h = int_list(&b.n_threads, "-t", 1), &b](std::string_view v) -> Status {
             RETURN_IF_ERROR(h(v));
             for (int64_t t : b.n_threads) {
               if (t > kMaxThreads) return Status::bad_input(fmt::format("flag '-t': {} threads is too many", t));
             }
             return Status::ok();
           });
  p.option({"-fa", "--flash-attn"}, "on|off|auto",
           "CPU attention: on/auto (default) = flash attention, off = the exact kernel; a list runs both "
           "(GPU layers use their own kernels)",
           [&b](std::string_view v) -> Status {
             for (std::string_view item : split(v, ',')) {
               ASSIGN_OR_RETURN(int fa, parse_flash_attn(item));
               b.flash_attn.push_back(fa);
             }
             return Status::ok();
           });
  p.option({"-mmp", "--mmap"}, "0|1", "1: map the file (default); 0: read it into RAM",
           [&b](std::string_view v) -> Status {
             for (std::string_view item : split(v, ',')) {
               if (item != "0" && item != "1") {
                 return Status::bad_input(fmt::format("flag '-mmp': '{}' is not 0 or 1", item));
               }
               b.use_mmap.push_back(item == "1");
             }
             return Status::ok();
           });
  p.flag({"--no-mmap"}, &b.no_mmap, "same as -mmp 0");
  p.flag({"-nr", "--no-repack"}, &b.no_repack,
         "keep the weights in the file's row layout (default: repack the routed experts and dense Q8_0 and K-quant "
         "matrices in RAM this process owns into the tile kernels' 8-row groups at load; see `moetier run --help`)");
  p.option({"--expert-pages"}, "auto|huge|file",
           "with -mmp 1, where the weights the CPU computes with live: auto (default) moves them into transparent huge pages "
           "when RAM allows, huge always moves them (error when they cannot fit), file keeps them in the file "
           "mapping (4 KiB pages: the old -mmp 1)",
           [&b](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(b.expert_pages, gguf::parse_expert_pages(v));
             return Status::ok();
           });
  p.option({"--ram-budget"}, "MiB",
           "RAM the model may fill (default: available memory less a reserve); when the CPU's routed experts do not "
           "fit, the rest are read from the file on demand and the expert_* fields report the cache",
           &b.ram_budget_mib);
  p.option({"--expert-cache-policy"}, "lru|lfu", "which cached expert a read from the file replaces (default lru)",
           &b.expert_cache_policy);
  p.section("placement (llama.cpp spelling; Vulkan GPU backend; without a hardware GPU everything runs on the CPU)");
  p.option({"--cpu-isa"}, "TIER",
           "CPU kernels up to this ISA: auto (default), avx512, avx2, avx2-novnni, scalar (cpu_isa in the records)",
           [](std::string_view) { return Status::ok(); });  // applied by main() before anything runs
  p.option({"-dev", "--device"}, "N", "Vulkan device (see 'moetier run --list-devices'; default: the first hardware GPU)",
           &b.device);
  p.option({"--vram-budget"}, "MiB", "use at most this much GPU memory", &b.vram_budget_mib);
  p.option({"--gpu-expert-cache"}, "MiB",
           "VRAM for copies of recently routed CPU experts of GPU layers (default: what the GPU has free beyond the "
           "placement and --fit-margin's 1536 MiB, on a hardware GPU; 0 = none); expert_gpu_* fields report it",
           [&b](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(b.gpu_expert_cache_mib, parse_int(v, "flag '--gpu-expert-cache'"));
             if (b.gpu_expert_cache_mib < 0) return Status::bad_input("--gpu-expert-cache must not be negative");
             return Status::ok();
           });
  p.option({"--gpu-kernels"}, "fast|exact", "GPU kernels: fast (default) or exact (the reference kernels; slow)",
           [&b](std::string_view v) {
             if (v != "fast" && v != "exact") {
               return Status::bad_input(fmt::format("--gpu-kernels takes fast or exact, not '{}'", v));
             }
             b.exact_kernels = v == "exact";
             return Status::ok();
           });
  p.option({"-ngl", "--n-gpu-layers"}, "N", "layers on the GPU (default -1)",
           int_list(&b.n_gpu_layers, "-ngl", INT64_MIN, /*allow_negative=*/true));
  p.option({"-ncmoe", "--n-cpu-moe"}, "N", "keep the routed experts of the first N layers on the CPU (default 0)",
           int_list(&b.n_cpu_moe, "-ncmoe", 0));
  p.option({"-ot", "--override-tensor"}, "PAT=DEV;...",
           "place tensors matching PAT on DEV; ',' separates alternatives, an empty one means none",
           [&b](std::string_view v) -> Status {
             for (std::string_view group : split(v, ',')) {
               for (std::string_view rule : split(group, ';')) {
                 if (group.empty()) break;
                 const size_t eq = rule.find('=');
                 if (eq == std::string_view::npos || eq == 0 || eq + 1 == rule.size()) {
                   return Status::bad_input(fmt::format("flag '-ot': '{}' is not PATTERN=DEVICE", rule));
                 }
               }
               b.tensor_overrides.emplace_back(group);
             }
             return Status::ok();
           });
  p.section("run and output");
  p.option({"-r", "--repetitions"}, "N", "timed repetitions of each test (default 5)",
           [&b](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(int64_t r, parse_int(v, "flag '-r'"));
             if (r < 1 || r > 100000) return Status::bad_input(fmt::format("flag '-r': {} is not in 1..100000", r));
             b.repetitions = r;
             return Status::ok();
           });
  p.option({"-o", "--output"}, "md|json|jsonl|csv", "output format on stdout (default md)",
           [&b](std::string_view v) -> Status {
             if (v == "md") b.output = OutputFormat::kMarkdown;
             else if (v == "json") b.output = OutputFormat::kJson;
             else if (v == "jsonl") b.output = OutputFormat::kJsonl;
             else if (v == "csv") b.output = OutputFormat::kCsv;
             else return Status::bad_input(fmt::format("flag '-o': '{}' is not one of md, json, jsonl, csv", v));
             return Status::ok();
           });
  p.option({"--interleave"}, "on|off",
           "run the repetitions round-robin over the tests of each model load, one repetition of each test "
           "per round after all warm-ups, so drift hits every test alike (default: on when more than one "
           "configuration is tested)",
           [&b](std::string_view v) -> Status {
             if (v != "on" && v != "off") return Status::bad_input("flag '--interleave': give on or off");
             b.interleave = v == "on" ? 1 : 0;
             return Status::ok();
           });
  p.flag({"--compare"}, &b.compare,
         "print the t/s ratio of every configuration to the first, per test kind, with a 95% confidence "
         "interval (without it: only when exactly two configurations differ in one knob)");
  p.option({"--chart"}, "FILE.svg|FILE.png",
           "write a chart: t/s (mean, sd error bars) and peak-idle memory against the swept knob; .png "
           "needs rsvg-convert (Debian: librsvg2-bin)",
           [&b](std::string_view v) -> Status {
             const auto ends_with = [&](std::string_view tail) {
               return v.size() > tail.size() && v.substr(v.size() - tail.size()) == tail;
             };
             if (!ends_with(".svg") && !ends_with(".png")) {
               return Status::bad_input(fmt::format("flag '--chart': '{}' does not end in .svg or .png", v));
             }
             b.chart_path = std::string(v);
             return Status::ok();
           });
  p.option({"--report"}, "DIR",
           "write DIR/index.html: one self-contained page (inline SVG charts, no external resources) with the "
           "provenance, the results with their statistics, the comparisons and the charts",
           [&b](std::string_view v) -> Status {
             if (v.empty()) return Status::bad_input("flag '--report': empty directory");
             b.report_dir = std::string(v);
             return Status::ok();
           });
  p.flag({"--e2e"}, &b.e2e,
         "also measure a chat turn end to end per -n value: a fixed user message through the chat template, "
         "tokenization, prefill, -n tokens from the default sampler (end-of-generation ignored) and "
         "detokenization; t/s = generated tokens / turn time, plus time to first token");
  p.option({"--url"}, "http://HOST:PORT",
           "with --e2e (implied): the same turn through POST /v1/chat/completions of a running moetier serve or "
           "llama-server (streamed; the model name comes from its /v1/models); -m is then optional",
           [&b](std::string_view v) -> Status {
             if (v.empty()) return Status::bad_input("flag '--url': empty URL");
             b.e2e_url = std::string(v);
             b.e2e = true;
             return Status::ok();
           });
  p.flag({"--no-warmup"}, &b.no_warmup, "skip the untimed warm-up run before each test");
  p.flag({"--profile"}, &b.profile, "time split by block type after each test (stderr; 'profile' in json/jsonl)");
  p.flag({"--membw"}, &b.measure_bandwidth,
         "first measure the machine's memory read bandwidth (1 GiB buffer, the largest -t); records then carry "
         "machine_read_gbps and bandwidth_fraction (achieved_gbps / machine_read_gbps) for tg tests");
  p.flag({"--diskbw"}, &b.measure_disk,
         "first measure each model file's storage read rate as the expert cache reads it (256 random 1 MiB "
         "unbuffered reads, 4 at a time); records then carry disk_read_gbps, and tests that read experts from the "
         "file say what that rate and their bytes per token predict");
  p.option({"--scale-layers"}, "N",
           "also estimate t/s for the same model with N layers (e.g. 40 for a synthesized 8-layer "
           "Qwen3.6-35B-A3B): per-layer time measured with the profiler, scaled by N / n_layer, plus the "
           "measured embedding and LM-head time. An estimate, labelled as such (estimate_* fields)",
           [&b](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(int64_t n, parse_int(v, "flag '--scale-layers'"));
             if (n < 1 || n > 1000) return Status::bad_input(fmt::format("flag '--scale-layers': {} is not in 1..1000", n));
             b.scale_layers = n;
             return Status::ok();
           });
  p.option({"--delay"}, "SECONDS", "pause before each test (cool-down; default 0)", [&b](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(int64_t d, parse_int(v, "flag '--delay'"));
    if (d < 0 || d > 3600) return Status::bad_input(fmt::format("flag '--delay': {} is not in 0..3600", d));
    b.delay_seconds = d;
    return Status::ok();
  });
  p.option({"--seed"}, "N", "seed of the random token ids (default 1234)", [&b](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(int64_t s, parse_int(v, "flag '--seed'"));
    if (s < 0 || s > UINT32_MAX) return Status::bad_input(fmt::format("flag '--seed': {} is out of range", s));
    b.seed = static_cast<uint32_t>(s);
    return Status::ok();
  });
  p.flag({"--progress"}, &b.verbose, "accepted for compatibility (progress is always on stderr); same as -v");
  p.flag({"-v", "--verbose"}, &b.verbose, "more detail on stderr (load summary, every repetition's time)");
}

Status finalize(BenchParams& b, const DefaultThreads& default_threads) {
  if (b.models.empty() && b.e2e_url.empty()) return Status::bad_input("no model given (-m FILE, or --url for a server)");
  // Step tests alone (--step without -p/-n) run no default pp/tg test.
  if (!b.n_step.empty() && b.n_prompt.empty() && b.n_gen.empty()) b.n_prompt = {0}, b.n_gen = {0};
  default_if_empty<int64_t>(b.n_prompt, 512);
  default_if_empty<int64_t>(b.n_gen, 128);
  if (b.spec_replay.empty() && !b.spec_mtp && (!b.spec_draft_max.empty() || b.spec_adaptive)) {
    return Status::bad_input("--spec-draft-n-max and --spec-adaptive only apply with --spec-replay or --spec-type");
  }
  for (int64_t n : b.n_step) {
    if (n > 512) return Status::bad_input("flag '--step': tokens per step must be at most 512");
  }
  if (!b.n_step_seqs.empty() && b.n_step.empty()) {
    return Status::bad_input("flag '--step-seqs' only applies to step tests (--step N)");
  }
  for (int64_t s : b.n_step_seqs) {
    if (s > 64) return Status::bad_input("flag '--step-seqs': at most 64 sequences per step");
  }
  default_if_empty<int64_t>(b.n_step_seqs, 1);
  default_if_empty<int64_t>(b.spec_draft_max, 3);
  for (int64_t k : b.spec_draft_max) {
    if (k < 1 || k > 64) return Status::bad_input("flag '--spec-draft-n-max': draft lengths must be in [1, 64]");
  }
  default_if_empty<int64_t>(b.n_depth, 0);
  default_if_empty<int64_t>(b.n_batch, 2048);
  default_if_empty<int64_t>(b.n_ubatch, 512);
  default_if_empty<DType>(b.type_k, DType::F16);
  default_if_empty<DType>(b.type_v, DType::F16);
  if (b.n_threads.empty()) b.n_threads.push_back(std::max<int64_t>(1, default_threads(b)));
  default_if_empty<int64_t>(b.n_gpu_layers, -1);
  default_if_empty<int64_t>(b.n_cpu_moe, 0);
  default_if_empty<int>(b.flash_attn, -1);
  if (b.no_mmap && std::find(b.use_mmap.begin(), b.use_mmap.end(), false) == b.use_mmap.end()) {
    b.use_mmap.push_back(false);
  }
  default_if_empty<bool>(b.use_mmap, true);
  default_if_empty<std::string>(b.tensor_overrides, "");
  if (expand_tests(b).empty()) {
    return Status::bad_input("nothing to run: every -p, -n and -pg value is 0 (and no --step)");
  }
  return Status::ok();
}

Result<BenchParams> parse_bench_args(int argc, char** argv, const DefaultThreads& default_threads, bool* help,
                                     std::string* help_text) {
  BenchParams params;
  ArgParser parser("bench", kSummary);
  add_bench_flags(parser, params);
  parser.epilog(kEpilog);
  RETURN_IF_ERROR(parser.parse(argc, argv));
  *help = parser.help_requested();
  if (help_text) *help_text = parser.help_text();
  if (*help) return params;
  RETURN_IF_ERROR(finalize(params, default_threads));
  return params;
}

std::vector<TestSpec> expand_tests(const BenchParams& b) {
  std::vector<TestSpec> tests;
  // Outer loops in llama-bench's order (the model outermost so each file loads once).
  for (const auto& model : b.models)
  for (int64_t ngl : b.n_gpu_layers)
  for (int64_t ncmoe : b.n_cpu_moe)
  for (bool mmap : b.use_mmap)
  for (const auto& ot : b.tensor_overrides)
  for (int64_t nb : b.n_batch)
  for (int64_t nub : b.n_ubatch)
  for (DType tk : b.type_k)
  for (DType tv : b.type_v)
  for (int fa : b.flash_attn)
  for (int64_t nt : b.n_threads)
  for (int64_t nd : b.n_depth) {
    const TestSpec base{.model = model, .n_gpu_layers = ngl, .n_cpu_moe = ncmoe, .use_mmap = mmap,
                        .tensor_overrides = ot, .n_batch = nb, .n_ubatch = nub, .type_k = tk, .type_v = tv,
                        .flash_attn = fa, .n_threads = nt, .n_depth = nd};
    for (int64_t pp : b.n_prompt) {
      if (pp == 0) continue;
      TestSpec t = base;
      t.n_prompt = pp;
      tests.push_back(t);
    }
    for (int64_t tg : b.n_gen) {
      if (tg == 0) continue;
      TestSpec t = base;
      t.n_gen = tg;
      tests.push_back(t);
      if (b.spec_replay.empty() && !b.spec_mtp) continue;
      TestSpec plain = t;  // the generation loop without drafts: the speculative runs' baseline
      plain.spec = true;
      tests.push_back(plain);
      // One test per draft length: the MTP head's drafts, then each replayed acceptance.
      const auto add_lengths = [&](bool mtp, double alpha) {
        for (int64_t k : b.spec_draft_max) {
          TestSpec s = plain;
          s.spec_mtp = mtp;
          s.spec_acceptance = alpha;
          s.spec_draft_max = k;
          s.spec_adaptive = b.spec_adaptive;
          tests.push_back(s);
        }
      };
      if (b.spec_mtp) add_lengths(true, 0.0);
      for (double alpha : b.spec_replay) add_lengths(false, alpha);
    }
    for (const PromptGen& pg : b.prompt_gen) {
      if (pg.n_prompt == 0 && pg.n_gen == 0) continue;
      TestSpec t = base;
      t.n_prompt = pg.n_prompt;
      t.n_gen = pg.n_gen;
      tests.push_back(t);
    }
    for (int64_t n : b.n_step) {
      for (int64_t seqs : b.n_step_seqs) {
        TestSpec t = base;
        t.n_step = n;
        t.n_step_seqs = seqs;
        t.n_gen = kStepsPerRepetition;
        tests.push_back(t);
      }
    }
    if (b.e2e && !b.models.empty()) {
      for (int64_t tg : b.n_gen) {
        if (tg == 0) continue;
        TestSpec t = base;
        t.n_gen = tg;
        t.e2e = true;
        tests.push_back(t);
      }
    }
  }
  // The server's turns last: the server's own settings (threads, placement) apply, so the
  // knobs stay at their defaults and n_threads says 0 (not ours).
  if (!b.e2e_url.empty()) {
    for (int64_t tg : b.n_gen) {
      if (tg == 0) continue;
      tests.push_back(TestSpec{.model = b.e2e_url, .n_threads = 0, .n_gen = tg, .e2e = true, .e2e_url = b.e2e_url});
    }
  }
  return tests;
}

std::string test_name(const TestSpec& t) {
  if (t.e2e) {
    return t.n_prompt > 0 ? fmt::format("e2e chat (pp {}, tg {})", t.n_prompt, t.n_gen) : fmt::format("e2e chat (tg {})", t.n_gen);
  }
  std::string name;
  if (t.n_step > 0) name = t.n_step_seqs > 1 ? fmt::format("step{} x{} seqs", t.n_step, t.n_step_seqs) : fmt::format("step{}", t.n_step);
  else if (t.n_prompt > 0 && t.n_gen == 0) name = fmt::format("pp{}", t.n_prompt);
  else if (t.n_gen > 0 && t.n_prompt == 0) name = fmt::format("tg{}", t.n_gen);
  else name = fmt::format("pp{}+tg{}", t.n_prompt, t.n_gen);
  if (t.n_depth > 0) name += fmt::format(" @ d{}", t.n_depth);
  if (t.spec) {
    if (t.spec_draft_max == 0) {
      name += " greedy";
    } else if (t.spec_mtp) {
      name += fmt::format(" spec mtp k={}{}", t.spec_draft_max, t.spec_adaptive ? " adaptive" : "");
    } else {
      name += fmt::format(" spec a={:g} k={}{}", t.spec_acceptance, t.spec_draft_max, t.spec_adaptive ? " adaptive" : "");
    }
  }
  return name;
}

}  // namespace moetier::bench
