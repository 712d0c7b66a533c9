// `moetier bench` parameters: every test parameter is a list (comma lists, repeated flags
// and llama-bench's ranges "first-last", "first-last+step", "first-last*mult"), and the
// tests are the cartesian product of the lists in llama-bench's order (see expand_tests).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/args.h"
#include "core/status.h"
#include "gguf/expert_pages.h"
#include "tensor/dtype.h"

namespace moetier::bench {

enum class OutputFormat { kMarkdown, kJson, kJsonl, kCsv };

// A prompt+generation pair (-pg PP,TG): PP prompt tokens then TG generated tokens, timed together.
struct PromptGen {
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  bool operator==(const PromptGen&) const = default;
};

// What the command line asked for. Empty lists take llama-bench's defaults in finalize().
struct BenchParams {
  std::vector<std::string> models;           // -m
  std::vector<int64_t> n_prompt;             // -p, default 512
  std::vector<int64_t> n_gen;                // -n, default 128
  // --step: tokens per step of a step test (what a speculative verify or -np slots decoded
  // together cost; see TestSpec::n_step); empty = none.
  std::vector<int64_t> n_step;
  // --step-seqs: sequences in each step test's steps (TestSpec::n_step_seqs); default 1.
  std::vector<int64_t> n_step_seqs;
  std::vector<PromptGen> prompt_gen;         // -pg, default none
  std::vector<int64_t> n_depth;              // -d, default 0
  std::vector<int64_t> n_batch;              // -b, default 2048
  std::vector<int64_t> n_ubatch;             // -ub, default 512
  std::vector<DType> type_k;                 // -ctk, default f16
  std::vector<DType> type_v;                 // -ctv, default f16
  std::vector<int64_t> n_threads;            // -t, default engine/cpu_threads.h's (P-cores of a hybrid CPU, else all cores)
  std::optional<std::vector<int>> cpu_mask;  // --cpu-mask / --cpu-range: the CPUs the threads run on
  bool cpu_strict = false;                   // --cpu-strict 1: one CPU per thread
  std::vector<int64_t> n_gpu_layers;         // -ngl, default -1 (llama-bench's "all")
  std::vector<int64_t> n_cpu_moe;            // -ncmoe, default 0
  std::vector<int> flash_attn;               // -fa: -1 auto, 0 off, 1 on; default auto (CPU: flash unless off)
  std::vector<bool> use_mmap;                // -mmp, default 1
  bool no_mmap = false;                      // --no-mmap: adds 0 to the -mmp list
  // --expert-pages (all -mmp 1 tests): move the CPU's routed experts into huge pages
  gguf::ExpertPages expert_pages = gguf::ExpertPages::kAuto;
  bool no_repack = false;  // -nr/--no-repack: keep the routed experts in the file's layout (engine/repack.h)
  int64_t ram_budget_mib = 0;              // --ram-budget (engine/expert_tiers.h)
  std::string expert_cache_policy = "lru"; // --expert-cache-policy
  std::vector<std::string> tensor_overrides; // -ot: one "PAT=DEV;PAT=DEV" group per entry; "" = none
  int64_t repetitions = 5;                   // -r
  OutputFormat output = OutputFormat::kMarkdown;  // -o
  bool no_warmup = false;                    // --no-warmup
  bool profile = false;                      // --profile
  bool measure_bandwidth = false;            // --membw: time the machine's memory read bandwidth
  bool measure_disk = false;                 // --diskbw: time random unbuffered reads of each model file
  int64_t scale_layers = 0;                  // --scale-layers N: estimate for an N-layer model
  bool verbose = false;                      // -v
  int64_t delay_seconds = 0;                 // --delay: pause before each test
  uint32_t seed = 1234;                      // --seed: random token ids
  int device = -1;                           // -dev: Vulkan device (default: the first hardware GPU)
  int64_t vram_budget_mib = 0;               // --vram-budget: cap GPU memory (a big GPU behaves like a small one)
  int64_t gpu_expert_cache_mib = -1;         // --gpu-expert-cache (-1: auto, 0: none; engine/expert_tiers.h)
  bool exact_kernels = false;                // --gpu-kernels exact: the reference GPU kernels
  // Speculative decoding measured with replayed drafts (runtime/speculative.h, ReplayDrafter):
  // each tg test also runs as a greedy generation without drafts and once per (acceptance,
  // draft length) with drafts that are the target's own continuation, corrupted so that each
  // drafted token is accepted with that probability.
  std::vector<double> spec_replay;           // --spec-replay A[,A...], in [0, 1]; empty = off
  std::vector<int64_t> spec_draft_max;       // --spec-draft-n-max, default 3
  bool spec_adaptive = false;                // --spec-adaptive on: the controller picks the length
  // --spec-type draft-mtp: each tg test also runs with the model's MTP head as the drafter
  // (real drafts: on a random-weight model they are rarely accepted, so this measures the
  // head's cost), once per --spec-draft-n-max.
  bool spec_mtp = false;
  // --interleave: run the repetitions round-robin over the tests of a model load (one
  // repetition of each test per round) so drift hits all alike. -1 = auto: on when more
  // than one configuration is tested.
  int interleave = -1;
  bool compare = false;                      // --compare: every configuration against the first
  std::string chart_path;                    // --chart FILE.svg|FILE.png ("" = none)
  std::string report_dir;                    // --report DIR: DIR/index.html ("" = none)
  // --e2e: per model point and -n value, also a chat turn end to end (bench/e2e.h).
  bool e2e = false;
  // --url URL (implies --e2e): the same turn through a server's /v1/chat/completions, per -n
  // value; -m is then optional.
  std::string e2e_url;
};

// Registers every bench flag on `parser`, writing into `params`.
void add_bench_flags(ArgParser& parser, BenchParams& params);

// The value for an empty -t list, from the parsed flags (the cores --cpu-mask selects; the
// command uses engine/cpu_threads.h's choose_cpu_threads).
using DefaultThreads = std::function<int64_t(const BenchParams&)>;

// Fills empty lists with the defaults and checks cross-flag rules (a model is given, at
// least one test remains).
Status finalize(BenchParams& params, const DefaultThreads& default_threads);
inline Status finalize(BenchParams& params, int64_t default_threads) {
  return finalize(params, [default_threads](const BenchParams&) { return default_threads; });
}

// Parses argv (argv[0] is the command) into finalized params. Sets *help when -h was given
// (params are then not finalized); *help_text (if not null) receives the full --help text.
Result<BenchParams> parse_bench_args(int argc, char** argv, const DefaultThreads& default_threads, bool* help,
                                     std::string* help_text);
inline Result<BenchParams> parse_bench_args(int argc, char** argv, int64_t default_threads, bool* help,
                                            std::string* help_text) {
  return parse_bench_args(argc, argv, [default_threads](const BenchParams&) { return default_threads; }, help,
                          help_text);
}

// One test: a point of the cartesian product plus its kind (pp, tg or pp+tg).
struct TestSpec {
  std::string model;
  int64_t n_gpu_layers = -1;
  int64_t n_cpu_moe = 0;
  bool use_mmap = true;
  std::string tensor_overrides;  // "" = none
  int64_t n_batch = 2048;
  int64_t n_ubatch = 512;
  DType type_k = DType::F16;
  DType type_v = DType::F16;
  int flash_attn = -1;
  int64_t n_threads = 1;
  int64_t n_depth = 0;
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  // A tg test through the generation loop (greedy sampling) with speculative decoding from
  // replayed drafts: spec_draft_max 0 = the loop without drafts (the baseline), else drafts
  // of at most spec_draft_max tokens accepted with probability spec_acceptance each.
  bool spec = false;
  double spec_acceptance = 0;
  int64_t spec_draft_max = 0;
  bool spec_adaptive = false;
  bool spec_mtp = false;  // drafts from the MTP head instead of the replay
  // A chat turn end to end (--e2e): template, tokenization, prefill, n_gen sampled tokens,
  // detokenization, timed as a whole. n_prompt is the rendered message's token count, known
  // once the tokenizer has run (0 before). e2e_url: through that server instead (model = the URL).
  bool e2e = false;
  std::string e2e_url;
  // A step test (--step): n_gen forward calls of n_step tokens each after an untimed fill of
  // max(1, n_depth) tokens. A step of more than one token is a speculative verify that keeps
  // its first token: logits for every token, the rollback journal where the model has
  // recurrent state, then the sequence cut back. A step of one token is a decode step.
  int64_t n_step = 0;
  // Sequences in a step test, each with its own n_step tokens in every step, in one batched
  // forward call (Model::forward_batch): with n_step = 1, what the server's -np slots cost
  // when they decode together; more: that many verify steps at once. Each sequence is filled
  // to the same depth first.
  int64_t n_step_seqs = 1;
};

// Steps per repetition of a step test.
inline constexpr int64_t kStepsPerRepetition = 16;

// The tokens one repetition of a test processes (what its t/s counts).
inline int64_t test_tokens(const TestSpec& t) {
  if (t.n_step > 0) return t.n_step * t.n_step_seqs * t.n_gen;
  return t.spec || t.e2e ? t.n_gen : t.n_prompt + t.n_gen;
}

// The tests in llama-bench's order: the outer loops run over model, n_gpu_layers, n_cpu_moe,
// use_mmap, tensor overrides, n_batch, n_ubatch, type_k, type_v, flash_attn, n_threads,
// n_depth (first listed = outermost); inside each point come the pp tests (-p list, 0
// skipped), then the tg tests (-n list, 0 skipped), then the -pg pairs (0,0 skipped), then
// the step tests (--step list).
std::vector<TestSpec> expand_tests(const BenchParams& params);

// llama-bench's name of a test: "pp512", "tg128", "pp512+tg128", with " @ d4096" for depth;
// a step test is "step4".
std::string test_name(const TestSpec& test);

// Parses one list value: comma-separated items, each an integer or a range "a-b", "a-b+s",
// "a-b*m" (a <= b; s >= 1; m >= 2). allow_negative lets a plain item or a range's first
// value be negative (for -ngl). Errors name `flag`.
Result<std::vector<int64_t>> parse_int_list(std::string_view text, std::string_view flag, bool allow_negative = false);

// -fa values: on/1/true/enabled -> 1, off/0/false/disabled -> 0, auto/-1 -> -1.
Result<int> parse_flash_attn(std::string_view text);

std::string_view output_format_name(OutputFormat format);

}  // namespace moetier::bench
