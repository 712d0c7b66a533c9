// Opening a model for running: the options every command that runs a model shares (the
// model, context, threading and placement, as llama.cpp's flags set them), and the load
// path that turns them into a ready session: header → placement plan → file opened (mmap
// with the CPU's weights moved to huge pages, or --no-mmap) → repack → tokenizer → model →
// GPU part → sequence. What the load decides is reported through a LoadReporter, so the
// commands render it and tests stay quiet.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/cpu_threads.h"
#include "engine/expert_store.h"
#include "engine/plan.h"
#include "gguf/expert_pages.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "state/sequence_state.h"
#include "text/tokenizer.h"

namespace moetier {

struct EngineOptions {
  std::string model_path;
  int64_t n_ctx = 4096;        // -c; 0 = the model's training context
  int n_threads = 0;           // -t; 0 = the default of engine/cpu_threads.h (the P-cores of a hybrid CPU, else all cores)
  std::optional<std::vector<int>> cpu_mask;  // --cpu-mask / --cpu-range: the CPUs the threads run on
  bool cpu_strict = false;     // --cpu-strict 1: each thread pinned to one CPU of the set
  int64_t n_batch = 2048;      // -b (logical batch): micro-batches hold min(-b, -ub) tokens, as llama.cpp
  int64_t n_ubatch = 512;      // -ub: tokens per forward micro-batch
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
  bool no_mmap = false;
  bool mlock = false;
  // --expert-pages: with mmap, move the CPU's routed experts into huge-page memory (auto:
  // when RAM allows), or not (file), or insist (huge). See gguf/expert_pages.h.
  gguf::ExpertPages expert_pages = gguf::ExpertPages::kAuto;
  // --ram-budget: RAM the load may fill (0: the OS's available memory less a reserve). When the
  // CPU's routed experts do not fit, part of them stays in the file and is read on demand
  // (engine/expert_store.h) under --expert-cache-policy.
  int64_t ram_budget_mib = 0;
  std::string expert_cache_policy = "lru";
  std::string flash_attn = "auto";  // -fa on|off|auto: CPU attention flash (on, auto) or exact (off)
  // Placement, as llama.cpp spells it; without a GPU backend everything runs on the CPU and
  // the load says so.
  std::string n_gpu_layers;
  int64_t n_cpu_moe = 0;
  bool cpu_moe = false;
  std::vector<std::string> override_tensor;
  int device = -1;                 // -dev; -1 = the first hardware GPU
  bool list_devices = false;       // --list-devices
  std::string fit = "auto";        // --fit on|off|auto (auto: fit when a hardware GPU is present)
  int64_t fit_margin_mib = 1536;   // --fit-margin: GPU memory kept free
  int64_t vram_budget_mib = 0;     // --vram-budget: plan as if the GPU had this much (0: what it has)
  bool no_op_offload = false;      // --no-op-offload
  // --gpu-expert-cache MiB: VRAM for copies of recently routed CPU experts (-1: what the GPU
  // has left beyond the plan and the margin, on a hardware GPU; 0: none).
  int64_t gpu_expert_cache_mib = -1;
  bool no_repack = false;          // -nr/--no-repack: keep the file's row layout (engine/repack.h)
  std::string gpu_kernels = "fast";  // --gpu-kernels fast|exact
  bool verbose = false;
};

struct PlacementDecision;

// What the load reports while it runs, for a command to show. Lines are single sentences
// without a prefix (warnings, choices and their costs); plan() comes before the GPU upload
// when the model has a GPU part.
class LoadReporter {
 public:
  virtual ~LoadReporter() = default;
  virtual void note(std::string_view line) = 0;
  virtual void plan(const PlacementDecision& decision, const HParams& hp) = 0;
};

struct Session {
  std::unique_ptr<gguf::ModelFile> file;
  std::optional<text::Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;
  // The CPU's routed experts when they do not all fit in RAM (null otherwise); the model's
  // MoE layers read through it.
  std::unique_ptr<ExpertStore> experts;
  CpuThreads cpu_threads;      // the pool's threads and the CPUs they run on
  std::optional<SequenceState> sequence;
  int64_t n_ctx = 0;           // -c resolved (0 → the model's training context)
  KvCacheOptions kv;           // -c, -ctk, -ctv resolved
  std::optional<Plan> plan;    // the placement used (also when everything runs on the CPU)
  int gpu_device = -1;         // the Vulkan device the model's GPU part is on (-1: none)
  LoadReporter* reporter = nullptr;  // SessionOptions::reporter, for what later set-up reports (a draft model)
};

struct SessionOptions {
  bool need_model = true;      // false: tokenizer only (works on vocab-only files)
  bool need_sequence = true;   // false: no sequence (the caller allocates its own, e.g. per server slot)
  int64_t n_seq = 1;           // sequences the caller will run (-np), for the memory plan
  bool use_mtp = false;        // --spec-type draft-mtp: the MTP block's KV cache is in the plan
  int64_t journal_tokens = 0;  // speculative decoding: positions the rollback journal covers per sequence
  // Where the load's notes and plan go (nullptr: nowhere, and no progress bars).
  LoadReporter* reporter = nullptr;
};

// Reads the header, plans the placement (which experts stay on the CPU), opens the file
// (mmap, moving those experts into huge-page memory when RAM allows, or --no-mmap), builds
// the tokenizer, binds the model, places the GPU part, allocates one sequence of -c tokens
// (unless need_sequence is false). Errors name the file and the problem.
Result<Session> open_session(const EngineOptions& options, const SessionOptions& session_options);

// Parses a KV cache type ("f32", "f16", "q8_0", "q4_0"); the error names `flag` and the
// supported types.
Result<DType> parse_cache_type(const std::string& name, const char* flag);

}  // namespace moetier
