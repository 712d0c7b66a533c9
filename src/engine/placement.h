// Where the model runs: the placement flags (or --fit) → a memory plan (engine/plan.h) →
// the GPU layout, decided from the header alone before any tensor data is read; then the
// GPU part moved to the device. Any GPU failure (no driver, out of memory) ends in a clear
// note and the CPU path, never in a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/plan.h"
#include "engine/session.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/model.h"

namespace moetier {

// The placement flags, as given.
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
  int64_t gpu_expert_cache_mib = -1;  // --gpu-expert-cache: -1 auto, 0 off
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

// An explicit placement (-ngl/-ncmoe/-cmoe/-ot, no --fit) against the GPU's free memory:
// drivers that run out of VRAM spill to system RAM (Windows does this silently) and
// generation can drop several-fold, so a plan that leaves less than the --fit margin free
// gets one warning line. Pure (unit-tested).
struct VramHeadroom {
  int64_t gpu_bytes = 0;     // the plan's GPU total (weights, KV cache, state, scratch)
  int64_t free_bytes = 0;    // the device's free memory before loading (0: unknown, no warning)
  int64_t margin_bytes = 0;  // --fit-margin
  // The smallest -ncmoe that keeps the margin with the same other flags (-ngl all, no
  // -ot/-cmoe); nullopt when there is none or it was not computed.
  std::optional<int64_t> n_cpu_moe;
};
// The smallest -ncmoe above params.n_cpu_moe whose plan's GPU total fits `limit_bytes`
// (free - margin), for a layout -ncmoe can shrink (every block on the GPU, no -ot or -cmoe);
// nullopt otherwise or when even every expert on the CPU does not fit.
std::optional<int64_t> n_cpu_moe_within(const HParams& hp, const ArchInfo& arch, const std::vector<PlanTensor>& tensors,
                                        const PlanParams& params, int64_t limit_bytes);
// "" when gpu_bytes <= free_bytes - margin_bytes or free_bytes is unknown; else e.g.
// "warning: this placement leaves 740 MiB of VRAM free; drivers that run out spill to system
// RAM and generation can drop several-fold; keep >= 1536 MiB free: -ncmoe 37 or --fit".
std::string vram_headroom_warning(const VramHeadroom& h);

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

// The session's placement options (or --fit) → the decision.
Result<PlacementDecision> plan_session(const gguf::GgufFile& header, const HParams& hp, const EngineOptions& options,
                                       const SessionOptions& session_options, const KvCacheOptions& kv);
// Reports the decision and moves the GPU part to the GPU; on any GPU failure reports why
// and leaves everything on the CPU. Sets s.plan and s.gpu_device.
Status place_model(Session& s, PlacementDecision d, const SessionOptions& session_options);

}  // namespace moetier
