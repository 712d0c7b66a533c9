#include "bench/runner.h"

#include "bench/cpu_load.h"
#include "core/utc_time.h"
#include "engine/expert_streaming.h"
#include "engine/placement.h"
#include "engine/repack.h"
#include "gpu/gpu.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/e2e.h"
#include "core/build_info.h"
#include "core/cpu_features.h"
#include "core/format.h"
#include "core/profiler.h"
#include "core/thread_pool.h"
#include "engine/summary.h"
#include "platform/cpu.h"
#include "platform/memory.h"
#include "runtime/generate.h"
#include "runtime/mtp_drafter.h"
#include "runtime/speculative.h"

namespace moetier::bench {

namespace {

// "7.8B", "2.6M", "950K": a parameter count the way model names spell it.
std::string count_label(int64_t n) {
  const double x = static_cast<double>(n);
  if (x >= 1e9) return fmt::format("{:.1f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.1f}M", x / 1e6);
  return fmt::format("{:.0f}K", x / 1e3);
}

// llama.cpp's display name of a general.file_type: "all F32", "Q4_K - Medium", "IQ4_XS".
std::string file_type_label(const gguf::GgufFile& file) {
  const int64_t ft = file.get_int_or("general.file_type", -1);
  if (ft < 0) return "?";
  std::string name(file_type_name(static_cast<uint32_t>(ft)));
  if (name.empty()) return fmt::format("file type {}", ft);
  if (name == "ALL_F32") return "all F32";
  if (name.rfind("MOSTLY_", 0) == 0) name = name.substr(7);
  // K-quant mixes end in a size letter: Q4_K_M -> "Q4_K - Medium".
  struct Suffix {
    const char* tail;
    const char* word;
  };
  for (const Suffix& s : {Suffix{"_K_S", "Small"}, Suffix{"_K_M", "Medium"}, Suffix{"_K_L", "Large"}}) {
    const std::string tail = s.tail;
    if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      return name.substr(0, name.size() - 2) + " - " + s.word;
    }
  }
  return name;
}

struct Workspace {
  Model& model;
  SequenceState& seq;
  ThreadPool& pool;
  TokenSource& tokens;
  std::vector<int32_t> batch;
  std::vector<float> logits;
  std::vector<SequenceState*> others;  // a step test's other sequences (--step-seqs)
};

// n tokens in forward calls of at most n_batch tokens (the model splits each into -ub
// micro-batches), logits of the last token only: llama-bench's prompt processing.
Status process_prompt(Workspace& w, int64_t n, int64_t n_batch) {
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min(n_batch, n - done);
    w.tokens.fill(w.batch, count, w.seq.n_past() == 0);
    RETURN_IF_ERROR(w.model.forward(w.batch, w.seq, {}, w.logits, w.pool));
    done += count;
  }
  return Status::ok();
}

// n single-token forward calls: llama-bench's generation (token ids random, not sampled).
Status generate(Workspace& w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    w.tokens.fill(w.batch, 1, w.seq.n_past() == 0);
    RETURN_IF_ERROR(w.model.forward(w.batch, w.seq, {}, w.logits, w.pool));
  }
  return Status::ok();
}

// A step test's timed part (TestSpec::n_step): n_steps forward_batch calls over the
// sequence and its others (--step-seqs), `step` tokens each, as the server's scheduler runs
// its slots. A step of one token is a decode step (logits of its token); of several, a
// speculative verify that keeps its first token, as runtime/generate.cpp runs one: logits of
// every token, the rollback journal on a sequence with recurrent state, then the cut back.
Status run_steps(Workspace& w, int64_t step, int64_t n_steps) {
  std::vector<SequenceState*> seqs = {&w.seq};
  seqs.insert(seqs.end(), w.others.begin(), w.others.end());
  std::vector<std::vector<int32_t>> tokens(seqs.size());
  std::vector<BatchEntry> entries(seqs.size());
  std::vector<int64_t> keep(seqs.size());
  const bool journal = step > 1 && w.seq.has_recurrent_state();
  for (int64_t i = 0; i < n_steps; ++i) {
    for (size_t s = 0; s < seqs.size(); ++s) {
      w.tokens.fill(tokens[s], step, false);
      entries[s] = {.seq = seqs[s], .tokens = tokens[s], .want_logits = true, .all_logits = step > 1};
      keep[s] = seqs[s]->n_past() + 1;
      if (journal) RETURN_IF_ERROR(seqs[s]->begin_journal(step));
    }
    const Status fwd = w.model.forward_batch(entries, w.logits, w.pool);
    bool cut = true;
    if (step > 1) {
      for (size_t s = 0; s < seqs.size(); ++s) {
        cut = cut && fwd.is_ok() && seqs[s]->truncate(keep[s]);
        if (journal) seqs[s]->end_journal();
      }
    }
    RETURN_IF_ERROR(fwd);
    if (!cut) return Status::runtime("step test: a sequence could not be cut back after a verify step");
  }
  return Status::ok();
}

// A step test's other sequences (TestSpec::n_step_seqs − 1 of them) into `store`, each
// filled with `fill` tokens like the first and its journal allocated, untimed; w.others
// points at them.
Status add_step_sequences(Workspace& w, const TestSpec& test, int64_t context, int64_t fill,
                          std::vector<SequenceState>& store) {
  store.clear();
  w.others.clear();
  store.reserve(static_cast<size_t>(std::max<int64_t>(0, test.n_step_seqs - 1)));  // no moves: w.others points in
  for (int64_t s = 1; s < test.n_step_seqs; ++s) {
    auto seq = w.model.new_sequence({.n_ctx = context, .type_k = test.type_k, .type_v = test.type_v});
    if (!seq) return seq.status();
    store.push_back(std::move(*seq));
    Workspace one{.model = w.model, .seq = store.back(), .pool = w.pool, .tokens = w.tokens, .batch = {}, .logits = {}};
    RETURN_IF_ERROR(process_prompt(one, fill, test.n_batch));
    if (test.n_step > 1 && store.back().has_recurrent_state()) {
      RETURN_IF_ERROR(store.back().begin_journal(test.n_step));
      store.back().end_journal();
    }
  }
  for (SequenceState& s : store) w.others.push_back(&s);
  return Status::ok();
}

// --spec-replay tests run greedy generation through the generation loop (runtime/generate.h)
// after `prompt` (the depth, or one token; the same for every repetition). The target's
// own continuation is computed once, untimed, without drafts; each timed repetition then
// generates the same n tokens, without drafts for the baseline (spec_draft_max 0) or with
// that continuation as drafts, corrupted with a seed per repetition.
Result<GenerationStats> greedy_generation(LoadedModel& loaded, const TestSpec& test, Workspace& w,
                                          const std::vector<int32_t>& prompt, Speculator* speculator,
                                          std::vector<int32_t>* tokens) {
  w.seq.clear();
  ASSIGN_OR_RETURN(Sampler sampler, Sampler::create({.temperature = 0.0f}));
  return generate(w.model, w.seq, *loaded.tokenizer, sampler, prompt,
                  {.n_predict = test.n_gen, .stop_at_eog = false, .speculator = speculator}, w.pool,
                  [](std::string_view) {}, [tokens](int32_t t) {
                    if (tokens) tokens->push_back(t);
                  });
}

// One timed repetition; returns the generation's nanoseconds (the prompt is not timed).
Result<int64_t> speculative_repetition(LoadedModel& loaded, const TestSpec& test, Workspace& w,
                                       const std::vector<int32_t>& prompt, const std::vector<int32_t>& expected,
                                       int64_t rep, SpecStats& spec_stats, double& draft_seconds) {
  std::unique_ptr<Speculator> speculator;
  if (test.spec_mtp) {
    const SpecParams sp{.type = SpecType::kDraftMtp,
                        .n_max = static_cast<int32_t>(test.spec_draft_max),
                        .adaptive = test.spec_adaptive};
    ASSIGN_OR_RETURN(auto drafter, MtpDrafter::create(w.model, w.seq.options(), 0.0, w.pool));
    speculator = std::make_unique<Speculator>(sp, std::move(drafter));
  } else if (test.spec_draft_max > 0) {
    const SpecParams sp{.type = SpecType::kReplay,
                        .n_max = static_cast<int32_t>(test.spec_draft_max),
                        .adaptive = test.spec_adaptive,
                        .replay_acceptance = test.spec_acceptance,
                        .replay_seed = static_cast<uint32_t>(1 + rep)};
    speculator = std::make_unique<Speculator>(
        sp, std::make_unique<ReplayDrafter>(expected, static_cast<int64_t>(prompt.size()),
                                            static_cast<int32_t>(w.model.hparams().n_vocab), test.spec_acceptance,
                                            sp.replay_seed));
  }
  ASSIGN_OR_RETURN(GenerationStats stats, greedy_generation(loaded, test, w, prompt, speculator.get(), nullptr));
  spec_stats.n_drafted += stats.spec.n_drafted;
  spec_stats.n_accepted += stats.spec.n_accepted;
  spec_stats.n_steps += stats.spec.n_steps;
  if (speculator) draft_seconds += speculator->draft_seconds_per_token();
  return static_cast<int64_t>(stats.generation_seconds * 1e9);
}

std::vector<ProfileRow> summarize_profile(const Profiler& profiler, int64_t total_wall_ns, int64_t reps) {
  std::vector<ProfileRow> rows;
  const double per_rep = 1.0 / static_cast<double>(reps);
  const double wall_ms = static_cast<double>(total_wall_ns) / 1e6 * per_rep;
  double blocks_ms = 0;
  for (int b = 0; b < static_cast<int>(ProfileBlock::kCount); ++b) {
    const auto& e = profiler.entry(static_cast<ProfileBlock>(b));
    const double ms = static_cast<double>(e.ns) / 1e6 * per_rep;
    blocks_ms += ms;
    rows.push_back({.block = std::string(profile_block_name(static_cast<ProfileBlock>(b))),
                    .ms = ms,
                    .percent = wall_ms > 0 ? 100.0 * ms / wall_ms : 0.0,
                    .calls = static_cast<double>(e.calls) * per_rep});
  }
  // Time between blocks (token handling, forward() bookkeeping, thread wake-ups not inside a block).
  const double other = std::max(0.0, wall_ms - blocks_ms);
  rows.push_back({.block = "other", .ms = other, .percent = wall_ms > 0 ? 100.0 * other / wall_ms : 0.0});
  return rows;
}

}  // namespace

Environment detect_environment() {
  Environment env;
  env.version = MOETIER_VERSION;
  env.build_commit = build_git_commit()[0] != '\0' ? build_git_commit() : MOETIER_VERSION;
  env.date = utc_now_iso8601();
  env.cpu_info = platform::cpu_model_name();
  env.cpu_isa = cpu_features().describe();
  env.usable_cpu_list = platform::usable_cpus();
  env.usable_cpus = static_cast<int>(env.usable_cpu_list.size());
  env.cpu_topology = platform::cpu_topology();
  return env;
}

ModelInfo describe_model(const gguf::GgufFile& file, const std::string& filename) {
  const inspect::Summary summary = inspect::summarize(file);
  ModelInfo info;
  info.filename = filename;
  info.size_bytes = summary.census.n_bytes;
  info.n_params = summary.census.n_params;
  std::string params = count_label(info.n_params);
  if (summary.moe) {
    if (summary.moe->n_params_active < info.n_params) params += ".A" + count_label(summary.moe->n_params_active);
    info.weight_bytes_per_token = summary.moe->bytes_per_token;
    // Tied embeddings: without output.weight the LM head reads the whole embedding matrix,
    // not the one row counted for the lookup.
    const auto* embd = file.find_tensor("token_embd.weight");
    if (embd && !file.find_tensor("output.weight") && embd->ne[1] > 0) {
      info.weight_bytes_per_token += static_cast<int64_t>(embd->n_bytes - embd->n_bytes / embd->ne[1]);
    }
  } else {
    info.weight_bytes_per_token = summary.census.n_bytes;
  }
  const std::string arch = summary.arch.empty() ? "?" : summary.arch;
  info.type = fmt::format("{} {} {}", arch, params, file_type_label(file));
  return info;
}

namespace {

// The placement request of one test (-ngl, -ncmoe, -ot as given; llama-bench has no --fit).
PlacementRequest placement_request(const TestSpec& test, const RunOptions& options, int64_t n_ctx) {
  std::vector<std::string> overrides;
  for (size_t start = 0; start < test.tensor_overrides.size();) {
    const size_t semi = test.tensor_overrides.find(';', start);
    overrides.push_back(test.tensor_overrides.substr(start, semi == std::string::npos ? std::string::npos : semi - start));
    start = semi == std::string::npos ? test.tensor_overrides.size() : semi + 1;
  }
  return {.n_gpu_layers = std::to_string(test.n_gpu_layers),
          .n_cpu_moe = test.n_cpu_moe,
          .override_tensor = overrides,
          .device = options.device,
          .fit = "off",
          .vram_budget_mib = options.vram_budget_mib,
          .n_ctx = n_ctx,
          .type_k = test.type_k,
          .type_v = test.type_v,
          .n_ubatch = std::min(test.n_ubatch, test.n_batch),
          .progress = true,
          .exact_kernels = options.exact_kernels,
          .gpu_expert_cache_mib = options.gpu_expert_cache_mib};
}

// llama-bench's context: exactly what one repetition needs (the warm-up needs no more).
// Spec tests start from a one-token prompt at depth 0 and feed every generated token; e2e
// tests know their prompt once prepared (n_prompt), plus a token of slack like spec tests.
int64_t test_context(const TestSpec& test) {
  if (test.n_step > 0) return std::max<int64_t>(1, test.n_depth) + test.n_gen + test.n_step;  // each step keeps one token
  return std::max<int64_t>(1, test.n_depth + test.n_prompt + test.n_gen + (test.spec || test.e2e ? 1 : 0));
}

}  // namespace

Result<LoadedModel> load_bench_model(const std::string& path, const BenchLoadOptions& options) {
  LoadedModel m;
  m.path = path;
  m.use_mmap = options.use_mmap;
  ASSIGN_OR_RETURN(gguf::GgufFile header, gguf::read_header(path));
  gguf::LoadOptions load{.mode = options.use_mmap ? gguf::LoadMode::kMmap : gguf::LoadMode::kRead,
                         .mlock = false,
                         .progress = true,
                         .verbose = options.verbose,
                         .expert_pages = options.expert_pages};
  std::vector<std::string> repack;  // the weights every test's placement repacks (engine/repack.h)
  int copy_threads = 1;
  ExpertStreamingPlan streaming;    // the CPU's experts that stay in the file (engine/expert_streaming.h)
  ASSIGN_OR_RETURN(const ExpertCachePolicy cache_policy, parse_expert_cache_policy(options.expert_cache_policy));
  if (options.ram_budget_mib < 0) return Status::bad_input("--ram-budget must not be negative");
  if (options.run != nullptr) {
    // The union over the tests of the weights each placement has the CPU compute with, and
    // the most CPU working memory any of them needs.
    auto hp = read_hparams(header);
    if (!hp) return hp.status().with_context(path);
    std::set<std::string> on_cpu;
    std::map<std::string, size_t> repackable;  // name → in how many tests' candidates
    int64_t max_threads = 1;
    for (const TestSpec& test : options.tests) {
      ASSIGN_OR_RETURN(PlacementDecision d, decide_placement(header, *hp, placement_request(test, *options.run,
                                                                                           test_context(test))));
      for (std::string& name : cpu_weight_tensors(header, *hp, d.plan)) on_cpu.insert(std::move(name));
      for (std::string& name : repack_candidates(header, *hp, d)) ++repackable[std::move(name)];
      load.working_bytes = std::max(load.working_bytes, cpu_working_bytes(d.plan));
      max_threads = std::max(max_threads, test.n_threads);
    }
    copy_threads = static_cast<int>(std::min<int64_t>(max_threads, 4));
    if (options.use_mmap) {
      load.expert_tensors.assign(on_cpu.begin(), on_cpu.end());
      load.copy_threads = copy_threads;
    }
    for (const auto& [name, count] : repackable) {
      if (options.repack && count == options.tests.size()) repack.push_back(name);
    }
    ASSIGN_OR_RETURN(streaming, plan_expert_streaming(header, *hp,
                                                      {.cpu_tensors = {on_cpu.begin(), on_cpu.end()},
                                                       .working_bytes = static_cast<int64_t>(load.working_bytes),
                                                       .expert_pages = options.expert_pages,
                                                       .ram_budget_mib = options.ram_budget_mib,
                                                       .repack = options.repack}));
    exclude_streamed_from_load(streaming, load, repack);
    if (streaming.tiers.stream) std::fprintf(stderr, "moetier bench: %s\n", streaming.tiers.summary.c_str());
  }
  ASSIGN_OR_RETURN(m.file, gguf::ModelFile::open(path, std::move(header), load));
  if (!m.file->stats().expert_pages_note.empty()) {
    std::fprintf(stderr, "moetier bench: %s\n", m.file->stats().expert_pages_note.c_str());
  }
  const RepackResult repacked = repack_weights(*m.file, repack, copy_threads);
  if (!repacked.note.empty()) std::fprintf(stderr, "moetier bench: %s\n", repacked.note.c_str());
  if (streaming.tiers.stream) {
    ASSIGN_OR_RETURN(m.experts, open_expert_store(*m.file, read_hparams(m.file->header()).value(), streaming,
                                                  {.policy = cache_policy, .repack = options.repack}));
    std::fprintf(stderr, "moetier bench: expert cache: %s in %lld slots, filled in %.1f s (%s eviction)\n",
                 format_bytes(m.experts->slot_bytes()).c_str(), static_cast<long long>(m.experts->experts_in_memory()),
                 m.experts->fill_seconds(), std::string(expert_cache_policy_name(cache_policy)).c_str());
  }
  auto model = load_model(*m.file, {});
  if (!model) return model.status().with_context(path);
  m.model = std::move(model).value();
  if (m.experts) m.model->attach_experts(*m.experts);
  const gguf::GgufFile& h = m.file->header();
  m.info = describe_model(h, path);
  m.info.repacked_bytes = static_cast<int64_t>(repacked.bytes);
  if (h.get_int_or("tokenizer.ggml.add_bos_token", 0) != 0) {
    const int64_t bos = h.get_int_or("tokenizer.ggml.bos_token_id", -1);
    if (bos >= 0 && bos < m.model->hparams().n_vocab) m.bos_token = static_cast<int32_t>(bos);
  }
  return m;
}

namespace {

// Puts the test's placement (-ngl, -ncmoe, -ot) in place when it differs from the model's
// current one (untimed; with interleaved tests of different placements this re-uploads
// the GPU part at each switch). Remembers the device's usage before placing and its description.
Status ensure_placement(LoadedModel& loaded, const TestSpec& test, const RunOptions& options) {
  Model& model = *loaded.model;
  ASSIGN_OR_RETURN(PlacementDecision placement,
                   decide_placement(loaded.file->header(), model.hparams(),
                                    placement_request(test, options, test_context(test))));
  const std::string layout = placement.gpu_part ? fmt::format("ngl={} ncmoe={} ot={}", test.n_gpu_layers, test.n_cpu_moe,
                                                               test.tensor_overrides)
                                                : "";
  if (layout == loaded.placement) return Status::ok();
  if (!placement.note.empty()) std::fprintf(stderr, "moetier bench: %s\n", placement.note.c_str());
  RETURN_IF_ERROR(model.place_on_gpu({}));  // release the previous layout first
  loaded.vram_used_before.reset();
  loaded.gpu_description.clear();
  if (placement.gpu_part) {
    auto devices = list_gpu_devices();
    if (devices && placement.gpu.device < static_cast<int>(devices->size())) {
      const GpuDeviceInfo& d = (*devices)[static_cast<size_t>(placement.gpu.device)];
      if (d.used_bytes > 0) loaded.vram_used_before = d.used_bytes;
      loaded.gpu_description = d.description;
    }
    RETURN_IF_ERROR(model.place_on_gpu(placement.gpu));
  }
  loaded.placement = layout;
  return Status::ok();
}

}  // namespace

TestRun::TestRun(const TestSpec& test, const RunOptions& options, const ModelInfo& info)
    : test_(test), options_(options), tokens_(options.seed, 1, -1) {
  result_.spec = test;
  result_.model = info;
  // The process's CPUs as they were before any test pinned the calling thread.
  if (!options.usable_cpus.empty()) cpus_ = options.usable_cpus;
}

Status TestRun::prepare(LoadedModel& loaded) {
  Model& model = *loaded.model;
  result_.test_time = utc_now_iso8601();
  tokens_ = TokenSource(options_.seed, model.hparams().n_vocab, loaded.bos_token);
  RETURN_IF_ERROR(ensure_placement(loaded, test_, options_));
  // The test's CPUs. The calling thread is the pool's thread 0, so its affinity is set for
  // every test, also when this one is not pinned: an earlier test may have narrowed it.
  CpuThreadsRequest cpu = options_.cpu;
  cpu.threads = static_cast<int>(test_.n_threads);
  ASSIGN_OR_RETURN(const CpuThreads threads, choose_cpu_threads(options_.topology, options_.usable_cpus, cpu));
  pool_ = std::make_unique<ThreadPool>(threads.threads);
  if (!options_.usable_cpus.empty() || threads.pin) RETURN_IF_ERROR(apply_cpu_threads(*pool_, threads, /*always=*/true));
  result_.cpu_cores = core_kind_name(threads.kind);
  result_.cpus = format_cpu_list(threads.cpus);
  if ((test_.spec || test_.e2e) && !loaded.tokenizer) {
    auto tok = text::Tokenizer::from_gguf(loaded.file->header());
    if (!tok) return tok.status().with_context(test_.e2e ? "--e2e needs the model's vocabulary" : "--spec-replay needs the model's vocabulary");
    loaded.tokenizer = std::make_unique<text::Tokenizer>(std::move(*tok));
  }
  if (test_.e2e) {
    if (!loaded.chat) {
      auto chat = ChatPrompt::load(loaded.file->header(), *loaded.tokenizer, {});
      if (!chat) return chat.status().with_context("--e2e: the model's chat template");
      loaded.chat = std::make_unique<ChatPrompt>(std::move(*chat));
    }
    // The prompt's length, for the sequence's size and the test's name (the same every turn).
    ASSIGN_OR_RETURN(std::vector<int32_t> prompt, e2e_prompt_tokens(*loaded.chat, *loaded.tokenizer, 1));
    test_.n_prompt = static_cast<int64_t>(prompt.size());
    result_.spec.n_prompt = test_.n_prompt;
  }
  if (!options_.warmup && !test_.spec) return Status::ok();
  auto seq = model.new_sequence({.n_ctx = test_context(test_), .type_k = test_.type_k, .type_v = test_.type_v});
  if (!seq) return seq.status().with_context(loaded.path);
  configure(model);
  Workspace w{.model = model, .seq = *seq, .pool = *pool_, .tokens = tokens_, .batch = {}, .logits = {}};
  model.set_profiler(nullptr);
  if (options_.warmup) {
    progress("warm-up");
    if (test_.n_step > 0) {
      const int64_t fill = std::max<int64_t>(1, test_.n_depth);
      RETURN_IF_ERROR(process_prompt(w, fill, test_.n_batch));
      std::vector<SequenceState> others;
      RETURN_IF_ERROR(add_step_sequences(w, test_, test_context(test_), fill, others));
      RETURN_IF_ERROR(run_steps(w, test_.n_step, 2));
      w.others.clear();  // `others` ends here
    } else {
      if (test_.n_prompt > 0) RETURN_IF_ERROR(process_prompt(w, test_.n_prompt, test_.n_batch));
      if (test_.n_gen > 0) RETURN_IF_ERROR(generate(w, 1));
    }
  }
  if (test_.spec) {
    tokens_.fill(spec_prompt_, std::max<int64_t>(1, test_.n_depth), true);
    if (test_.spec_draft_max > 0 && !test_.spec_mtp) {
      RETURN_IF_ERROR(greedy_generation(loaded, test_, w, spec_prompt_, nullptr, &spec_expected_).status());
    }
  }
  return Status::ok();
}

void TestRun::configure(Model& model) const {
  // A micro-batch never exceeds the logical batch (llama.cpp clamps -ub to -b the same way).
  model.set_n_ubatch(std::min(test_.n_ubatch, test_.n_batch));
  model.set_flash_attention(test_.flash_attn != 0);  // -fa: 1 on, -1 auto = flash; 0 off = exact
}

void TestRun::progress(const std::string& what) const {
  if (options_.quiet) return;
  std::fprintf(stderr, "moetier bench: %s: %s\n", options_.progress_prefix.c_str(), what.c_str());
}

Status TestRun::repetition(LoadedModel& loaded, int64_t rep) {
  CHECK(pool_ != nullptr);  // prepare() first
  Model& model = *loaded.model;
  RETURN_IF_ERROR(ensure_placement(loaded, test_, options_));
  // The peak of this repetition starts here: the sequence (KV cache, recurrent state) is made
  // for it and freed after it, so no other test's is counted (the test's thread pool lives
  // from prepare() to finish(): a few stack pages per thread).
  // The heap's freed memory goes back to the OS first, so the peak starts from what is really
  // in use and not from an earlier test's buffers.
  platform::release_free_heap();
  if (platform::reset_peak_resident()) peak_rss_reset_ = true;
  {
    auto seq = model.new_sequence({.n_ctx = test_context(test_), .type_k = test_.type_k, .type_v = test_.type_v});
    if (!seq) return seq.status().with_context(loaded.path);
    configure(model);
    std::vector<SequenceState> others;  // --step-seqs: the step test's other sequences
    Workspace w{.model = model, .seq = *seq, .pool = *pool_, .tokens = tokens_, .batch = {}, .logits = {}};
    const bool gpu_part = !model.gpu_backend_name().empty();
    model.set_gpu_timestamps(options_.profile && gpu_part);
    int64_t ns = 0;
    std::optional<CpuTimeSample> cpu_before;  // just before the timed part
    std::optional<ExpertStoreStats> experts_before;
    if (loaded.experts) experts_before = loaded.experts->stats();
    GpuExpertCacheStats gpu_cache_before = model.gpu_expert_cache_stats();
    if (test_.spec) {
      // The profile covers the generation loop (its one-token prompt too): the blocks of its
      // decode and verify steps, and the loop's own work (sampling, drafts, cut-backs) as
      // `other`; --scale-layers takes the embedding and LM head out of its estimate, as for
      // the other tests.
      if (options_.profile || options_.scale_layers > 0) model.set_profiler(&profiler_);
      cpu_before = sample_cpu_time(cpus_);
      Result<int64_t> spec_ns =
          speculative_repetition(loaded, test_, w, spec_prompt_, spec_expected_, rep, spec_stats_, draft_seconds_);
      model.set_profiler(nullptr);
      ASSIGN_OR_RETURN(ns, std::move(spec_ns));
    } else if (test_.e2e) {
      cpu_before = sample_cpu_time(cpus_);
      ASSIGN_OR_RETURN(E2eTurn turn, run_e2e_turn({.model = model,
                                                   .seq = *seq,
                                                   .pool = *pool_,
                                                   .tokenizer = *loaded.tokenizer,
                                                   .chat = *loaded.chat,
                                                   .n_gen = test_.n_gen,
                                                   .seed = options_.seed + static_cast<uint32_t>(rep),
                                                   .turn = rep % 9 + 1}));
      ns = turn.total_ns;
      result_.ttft_ns.push_back(turn.ttft_ns);
    } else {
      const int64_t fill = test_.n_step > 0 ? std::max<int64_t>(1, test_.n_depth) : test_.n_depth;
      if (fill > 0) RETURN_IF_ERROR(process_prompt(w, fill, test_.n_batch));  // untimed
      if (test_.n_step_seqs > 1) RETURN_IF_ERROR(add_step_sequences(w, test_, test_context(test_), fill, others));
      if (test_.n_step > 1 && seq->has_recurrent_state()) {
        // The journal's memory, allocated once per sequence as in a generation: untimed.
        RETURN_IF_ERROR(seq->begin_journal(test_.n_step));
        seq->end_journal();
      }
      // The steps' logits (every token's), also once per generation: untimed, pages touched
      // (fresh pages cost a fault each, 16 ms for a 4-token step's 4 MiB in a VM).
      if (test_.n_step > 1 || test_.n_step_seqs > 1) {
        w.logits.assign(static_cast<size_t>(test_.n_step * test_.n_step_seqs * model.hparams().n_vocab), 0.0f);
      }
      if (loaded.experts) experts_before = loaded.experts->stats();
      gpu_cache_before = model.gpu_expert_cache_stats();
      if (options_.profile || options_.scale_layers > 0) model.set_profiler(&profiler_);
      (void)model.take_gpu_census();  // the untimed work so far
      cpu_before = sample_cpu_time(cpus_);
      const auto start = std::chrono::steady_clock::now();
      if (test_.n_step > 0) {
        RETURN_IF_ERROR(run_steps(w, test_.n_step, test_.n_gen));
      } else {
        if (test_.n_prompt > 0) RETURN_IF_ERROR(process_prompt(w, test_.n_prompt, test_.n_batch));
        if (test_.n_gen > 0) RETURN_IF_ERROR(generate(w, test_.n_gen));
      }
      ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
      census_.add(model.take_gpu_census());
      model.set_profiler(nullptr);
    }
    const std::optional<CpuTimeSample> cpu_after = sample_cpu_time(cpus_);
    if (cpu_before && cpu_after) {
      const double wall = cpu_after->wall_seconds - cpu_before->wall_seconds;
      other_busy_cpu_seconds_ += other_busy_cpus(*cpu_before, *cpu_after) * wall;
      sampled_wall_seconds_ += wall;
    } else {
      cpu_sampled_ = false;
    }
    model.set_gpu_timestamps(false);
    result_.samples_ns.push_back(ns);
    total_ns_ += ns;
    const int64_t n_tokens = test_tokens(test_);
    if (experts_before) {
      const ExpertStoreStats window = loaded.experts->stats() - *experts_before;
      if (!result_.experts) result_.experts = ExpertStoreStats{};
      *result_.experts += window;
      result_.expert_tokens += n_tokens;
      result_.expert_seconds += static_cast<double>(ns) / 1e9;
      RETURN_IF_ERROR(loaded.experts->status());
    }
    if (const GpuExpertCacheStats window = model.gpu_expert_cache_stats() - gpu_cache_before; window.pairs > 0) {
      if (!result_.gpu_expert_cache) result_.gpu_expert_cache = GpuExpertCacheStats{};
      GpuExpertCacheStats& sum = *result_.gpu_expert_cache;
      sum.pairs += window.pairs;
      sum.gpu_pairs += window.gpu_pairs;
      sum.uploads += window.uploads;
      sum.upload_bytes += window.upload_bytes;
      sum.hits_per_upload = window.hits_per_upload;
      result_.gpu_expert_cache_tokens += n_tokens;
    }
    if (options_.verbose || options_.repetitions <= 10 || rep + 1 == options_.repetitions) {
      progress(fmt::format("repetition {}/{}: {:.3f} ms, {:.2f} t/s", rep + 1, options_.repetitions,
                           static_cast<double>(ns) / 1e6, 1e9 * static_cast<double>(n_tokens) / static_cast<double>(ns)));
    }
    // GPU memory while this test's sequence still exists: the driver's figure (all
    // processes, so minus the usage before placing) where it reports one, else moetier's
    // own allocations.
    if (auto gpu = model.gpu_memory()) {
      result_.gpu = gpu;
      if (gpu_part) {
        std::optional<int64_t> delta;
        if (loaded.vram_used_before && gpu->used_bytes > 0) {
          delta = static_cast<int64_t>(gpu->used_bytes) - static_cast<int64_t>(*loaded.vram_used_before);
          result_.vram_used_delta_bytes = std::max(result_.vram_used_delta_bytes.value_or(INT64_MIN), *delta);
          result_.vram_source = "driver";
        } else {
          delta = static_cast<int64_t>(gpu->total());
          result_.vram_source = "allocator";
        }
        result_.vram_peak_minus_idle_bytes = std::max(result_.vram_peak_minus_idle_bytes.value_or(INT64_MIN), *delta);
        result_.backend = "Vulkan";
        result_.gpu_backend = model.gpu_backend_name();
        result_.gpu_info = loaded.gpu_description;
      }
    }
  }
  if (const auto peak = platform::process_memory().peak_resident) {
    result_.peak_rss_bytes = std::max(result_.peak_rss_bytes.value_or(0), static_cast<int64_t>(*peak));
  }
  return Status::ok();
}

TestResult TestRun::finish(const LoadedModel& loaded) {
  const Model& model = *loaded.model;
  pool_.reset();
  result_.peak_rss_scope = peak_rss_reset_ ? "test" : "cumulative";
  // Only over a span long enough for the OS's CPU-time ticks (a short test reports null).
  const int n_cpus = static_cast<int>(cpus_.size());
  if (cpu_sampled_) {
    result_.other_busy_cpus =
        reportable_other_busy_cpus(other_busy_cpu_seconds_, sampled_wall_seconds_, n_cpus,
                                   platform::cpu_time_ticks_per_second());
  }
  result_.spec_n_drafted = spec_stats_.n_drafted;
  result_.spec_n_accepted = spec_stats_.n_accepted;
  result_.spec_n_steps = spec_stats_.n_steps;
  result_.spec_draft_ms_per_token = 1e3 * draft_seconds_ / static_cast<double>(std::max<int64_t>(1, options_.repetitions));
  if (options_.profile && !result_.gpu_backend.empty()) {
    result_.gpu_census = census_;
    result_.census_tokens = test_tokens(test_) * options_.repetitions;
  }
  if (options_.profile) {
    result_.profile = summarize_profile(profiler_, total_ns_, options_.repetitions);
    if (const Profiler::MoeCounts& moe = profiler_.moe(); moe.calls > 0) {
      result_.moe_experts_per_call = static_cast<double>(moe.experts) / static_cast<double>(moe.calls);
      result_.moe_pairs_per_call = static_cast<double>(moe.pairs) / static_cast<double>(moe.calls);
    }
  }
  if (options_.scale_layers > 0 && total_ns_ > 0) {
    // Time outside the layers (embedding lookup, final norm + LM head) is per token and does
    // not grow with depth; everything else is per layer. Both models must have the same
    // layer mix (Qwen3.6-35B-A3B: 3 DeltaNet : 1 attention in 8 layers and in 40).
    const int64_t n_layer = model.hparams().n_layer;
    const double fixed_ns = static_cast<double>(profiler_.entry(ProfileBlock::kEmbedding).ns +
                                                profiler_.entry(ProfileBlock::kLmHead).ns);
    const double layer_ns = static_cast<double>(total_ns_) - fixed_ns;
    const double estimate_ns = fixed_ns + layer_ns * static_cast<double>(options_.scale_layers) / static_cast<double>(n_layer);
    result_.estimate = LayerEstimate{
        .n_layer = options_.scale_layers,
        .ts = 1e9 * static_cast<double>(test_tokens(test_) * options_.repetitions) / estimate_ns};
  }
  return result_;
}

Result<TestResult> run_test(LoadedModel& loaded, const TestSpec& test, const RunOptions& options) {
  TestRun run(test, options, loaded.info);
  RETURN_IF_ERROR(run.prepare(loaded));
  for (int64_t rep = 0; rep < options.repetitions; ++rep) RETURN_IF_ERROR(run.repetition(loaded, rep));
  return run.finish(loaded);
}

}  // namespace moetier::bench
