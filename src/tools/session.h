// What the engine commands (run, chat, logits, tokenize) share: the llama.cpp-compatible
// model, context, threading, placement and sampling flags, and loading a model with its
// tokenizer into a ready-to-run session.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/args.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "gguf/model_file.h"
#include "model/model.h"
#include "runtime/plan.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "text/tokenizer.h"

namespace moetier {

struct EngineFlags {
  std::string model_path;
  int64_t n_ctx = 4096;        // -c; 0 = the model's training context
  int n_threads = 0;           // -t; 0 = physical cores
  int64_t n_batch = 2048;      // -b (logical batch): micro-batches hold min(-b, -ub) tokens, as llama.cpp
  int64_t n_ubatch = 512;      // -ub: tokens per forward micro-batch
  std::string cache_type_k = "f16";
  std::string cache_type_v = "f16";
  bool no_mmap = false;
  bool mlock = false;
  // --expert-pages: with mmap, move the CPU's routed experts into huge-page memory (auto:
  // when RAM allows), or not (file), or insist (huge). See gguf/expert_pages.h.
  gguf::ExpertPages expert_pages = gguf::ExpertPages::kAuto;
  std::string flash_attn = "auto";  // -fa on|off|auto: CPU attention flash (on, auto) or exact (off)
  // Placement flags, accepted as llama.cpp spells them; without a GPU backend everything
  // runs on the CPU and the session says so.
  std::string n_gpu_layers;
  int64_t n_cpu_moe = 0;
  bool cpu_moe = false;
  std::vector<std::string> override_tensor;
  int device = -1;                 // -dev; -1 = the first hardware GPU
  bool list_devices = false;       // --list-devices
  std::string fit = "auto";        // --fit on|off|auto (auto: fit when a hardware GPU is present)
  int64_t fit_margin_mib = 1536;   // --fit-margin: GPU memory kept free
  int64_t vram_budget_mib = 0;     // --vram-budget: plan as if the GPU had this much (0: what it has)
  bool no_op_offload = false;      // --no-op-offload (accepted; see --help)
  bool no_repack = false;          // -nr/--no-repack: keep the file's row layout (tools/repack.h)
  std::string gpu_kernels = "fast";  // --gpu-kernels fast|exact
  bool verbose = false;
};

// -m, -c, -t, -b, -ub, -ctk, -ctv, --no-mmap, --mlock, --expert-pages, -fa, -ngl, -ncmoe,
// -cmoe, -ot, -v
void add_engine_flags(ArgParser& parser, EngineFlags& flags);
// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --presence-penalty, --frequency-penalty, --seed
void add_sampling_flags(ArgParser& parser, SamplerParams& params);

// Speculative decoding flags in llama.cpp's spelling (--spec-type, --spec-draft-n-max/-min,
// --spec-draft-p-min, --spec-ngram-simple-*), plus --draft-max/--draft-min/--draft-p-min as
// aliases (llama.cpp's older names, which ik_llama.cpp still uses) and --spec-adaptive.
// -md FILE: a draft model (draft-simple) or an MTP-only GGUF (draft-mtp); -ngld N puts the
// draft model's last N layers on the model's GPU (llama.cpp's numbering, the LM head first).
struct SpecFlags {
  SpecParams params;
  std::string type = "none";
  std::string draft_model;   // -md / --spec-draft-model: an MTP-only GGUF for draft-mtp
  std::shared_ptr<const gguf::ModelFile> draft_file;  // opened by make_speculator, shared by slots
  std::shared_ptr<Model> draft;  // draft-simple: the loaded draft model (shared by slots)
  int32_t draft_gpu_layers = 0;  // -ngld: the draft model's last N layers (and its LM head) on the model's GPU; -1: all
  bool checked = false;          // check_spec_flags succeeded (it resolves the type once)
  bool p_min_given = false;  // --spec-draft-p-min / --draft-p-min (value in params.p_min)
};
void add_spec_flags(ArgParser& parser, SpecFlags& flags);
// Validates the flags before anything is loaded (sets params.type); the error names the flag.
Status check_spec_flags(SpecFlags& flags);
struct Session;
// The speculator the flags ask for (nullptr for --spec-type none), or the error; draft-mtp
// runs the session's model's MTP head (an error when the file has none).
Result<std::unique_ptr<Speculator>> make_speculator(SpecFlags& flags, Session& session);
// The same for one sequence of `cache`'s size (the server makes one per slot).
Result<std::unique_ptr<Speculator>> make_speculator(SpecFlags& flags, Session& session, const KvCacheOptions& cache);
// Speculation on a sequence with recurrent state needs its rollback journal: allocates it
// up front, so a placement that cannot journal (DeltaNet on a GPU) or a lack of memory is
// an error before anything is generated. Nothing to do without a speculator.
Status prepare_speculation(const Speculator* speculator, SequenceState& sequence);

// --list-devices: prints the Vulkan devices (or why there are none) and returns the exit status.
int print_gpu_devices();

struct Session {
  std::unique_ptr<gguf::ModelFile> file;
  std::optional<text::Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<ThreadPool> pool;
  std::optional<SequenceState> sequence;
  int64_t n_ctx = 0;           // -c resolved (0 → the model's training context)
  KvCacheOptions kv;           // -c, -ctk, -ctv resolved
  std::optional<Plan> plan;    // the placement used (also when everything runs on the CPU)
  int gpu_device = -1;         // the Vulkan device the model's GPU part is on (-1: none)
};

struct SessionOptions {
  bool need_model = true;      // false: tokenizer only (works on vocab-only files)
  bool quiet = false;          // no load summary on stderr
  bool need_sequence = true;   // false: no sequence (the caller allocates its own, e.g. per server slot)
  int64_t n_seq = 1;           // sequences the caller will run (-np), for the memory plan
  bool use_mtp = false;        // --spec-type draft-mtp: the MTP block's KV cache is in the plan
  int64_t journal_tokens = 0;  // speculative decoding: the rollback journal's state copies per sequence
};

// What the plan needs to know of the speculation the flags ask for (after check_spec_flags).
SessionOptions spec_session_options(const SpecFlags& flags, SessionOptions options = {});

// Reads the header, plans the placement (which experts stay on the CPU), opens the file
// (mmap, moving those experts into huge-page memory when RAM allows, or --no-mmap), builds
// the tokenizer, binds the model, places the GPU part, allocates one sequence of -c tokens
// (unless need_sequence is false). Errors name the file and the problem.
Result<Session> open_session(const EngineFlags& flags, const SessionOptions& options);

// The placement flags, resolved into a plan and the GPU layout (tools/placement.cpp).
struct PlacementRequest {
  std::string n_gpu_layers;  // -ngl as given ("" = not given)
  int64_t n_cpu_moe = 0;
  bool cpu_moe = false;
  std::vector<std::string> override_tensor;
  int device = -1;
  std::string fit = "auto";
  int64_t fit_margin_mib = 1536;
  int64_t vram_budget_mib = 0;
  int64_t n_ctx = 4096;
  DType type_k = DType::F16, type_v = DType::F16;
  int64_t n_seq = 1;
  bool mtp = false;  // --spec-type draft-mtp: the MTP block's KV cache is planned
  int64_t journal_tokens = 0;
  int64_t n_ubatch = 512;
  bool progress = true;
  bool op_offload = true;    // --no-op-offload turns it off
  bool exact_kernels = false;  // --gpu-kernels exact
};
struct PlacementDecision {
  Plan plan;           // what to run
  PlanParams params;   // the flags it came from (for printing)
  Plan cpu_plan;       // everything on the CPU, for a failed GPU placement
  GpuPlacement gpu;    // the GPU layout (empty when gpu_part is false)
  bool gpu_part = false;
  std::string note;    // one line on what was decided ("" = nothing to say)
  // --fit's choice as llama.cpp's flags ("-ngl 41 -ncmoe 34"; FitResult::flags), the
  // starting point for a tuner; "" when --fit did not choose (flags given, or no GPU).
  std::string fit_flags;
};
// From the header alone (before any tensor data is read), so the loader knows which experts
// stay on the CPU.
Result<PlacementDecision> decide_placement(const gguf::GgufFile& header, const HParams& hp, const PlacementRequest& r);

// The tensors `plan` has the CPU compute with every token: the routed experts and the dense
// weights of the compute blocks on the CPU, and the output layer when it is there (not the
// token embedding, read one row per token, unless it is also the LM head; not MTP blocks).
// With mmap they move into huge-page memory (gguf::LoadOptions::expert_tensors).
std::vector<std::string> cpu_weight_tensors(const gguf::GgufFile& header, const HParams& hp, const Plan& plan);
// RAM the CPU side allocates after loading, per the plan: KV cache, recurrent state and
// compute scratch on the CPU (bytes; for the RAM rule of the expert move).
uint64_t cpu_working_bytes(const Plan& plan);

// The session's placement flags (or --fit) → the decision (nothing printed yet).
Result<PlacementDecision> plan_session(const gguf::GgufFile& header, const HParams& hp, const EngineFlags& flags,
                                       const SessionOptions& options, const KvCacheOptions& kv);
// Prints the plan and moves the GPU part to the GPU; on any GPU failure says why and leaves
// everything on the CPU. Sets s.plan.
Status place_model(Session& s, PlacementDecision d, const SessionOptions& options);

// Parses "f32" / "f16" (and names the supported ones in the error).
Result<DType> parse_cache_type(const std::string& name, const char* flag);

}  // namespace moetier
