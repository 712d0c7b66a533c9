// Memory plan: where every weight, the KV cache and the recurrent state would live, and
// whether the GPU part fits its budget. A pure function of the model's hyper-parameters,
// its tensor sizes and the placement flags (no I/O, no device queries), so `inspect --plan`
// can answer "does this fit a 6 GB GPU?" from the header alone and the loader can follow
// the same plan later.
//
// Placement follows llama.cpp (src/llama-model.cpp, load_tensors, at the commit in
// ../shared/ref/README.md):
//   * The repeating blocks and the output layer form n_layer_all + 1 "layers"; the output
//     layer (output_norm, output) counts as the last one. -ngl N offloads the LAST N of
//     them: -ngl 1 puts only the output layer on the GPU, -ngl N puts the output layer and
//     blocks [n_layer_all + 1 - N, n_layer_all) there, and -ngl >= n_layer_all + 1 (or
//     -1 / "all") puts everything there. n_layer_all includes trailing MTP blocks.
//   * token_embd always stays on the CPU (llama.cpp: "very little benefit to offloading the
//     input layer"); a row lookup per token is cheap on the CPU.
//   * -ncmoe N keeps the routed experts (ffn_{gate,up,down}_exps) of blocks 0..N-1 on the
//     CPU; -cmoe keeps all of them there. The router (ffn_gate_inp) and the shared expert
//     stay with the block's dense weights.
//   * KV cache and recurrent state of a block live on the device of its dense weights
//     (llama.cpp's default offload_kqv). The KV cache has n_ctx cells in total, shared by
//     all sequences (llama.cpp's unified cache; -c is the total context); recurrent state
//     is per sequence, so it scales with -np. llama.cpp pads n_ctx to 256 cells; the plan
//     does not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/expert_tiers.h"
#include "model/arch.h"
#include "tensor/dtype.h"

namespace moetier {

inline constexpr const char* kCpuDevice = "CPU";
inline constexpr const char* kGpuDevice = "GPU0";

// One weight tensor as the planner sees it.
struct PlanTensor {
  std::string name;
  TensorRole role = TensorRole::kOther;
  int layer = -1;      // block index, -1 for global tensors
  int64_t bytes = 0;   // bytes of its data in the file
};

struct PlanParams {
  int64_t n_ctx = 4096;             // -c: KV cells in total (all sequences)
  DType type_k = DType::F16;        // -ctk
  DType type_v = DType::F16;        // -ctv
  int64_t n_seq = 1;                // -np: parallel sequences (recurrent state copies)
  bool mtp = false;                 // --spec-type draft-mtp: the MTP block runs and keeps a KV cache
  // Speculative decoding: positions each sequence's rollback journal covers
  // (--spec-draft-n-max + 1; 0 without speculation), on the device of their layer: a state
  // copy per position on a GPU, one copy and per-token records on the CPU.
  int64_t journal_tokens = 0;
  int64_t n_gpu_layers = -1;        // -ngl: -1 = all; 0 = CPU only
  int64_t n_cpu_moe = 0;            // -ncmoe: routed experts of blocks 0..N-1 on the CPU
  bool cpu_moe = false;             // -cmoe: all routed experts on the CPU
  int64_t n_ubatch = 512;           // -ub: tokens per compute batch (drives scratch)
  int64_t vram_budget_bytes = 0;    // --vram-budget; 0 = unknown (fit not judged)
  int64_t ram_budget_bytes = 0;     // --ram-budget; 0 = unknown
  // --gpu-expert-cache: VRAM for copies of recently routed CPU experts (engine/expert_tiers.h):
  // -1 = what vram_budget_bytes leaves beyond the plan (none when no budget is known), 0 = off.
  int64_t gpu_expert_cache_bytes = -1;
  // -ot REGEX=DEV (llama.cpp's --override-tensor): tensors whose name matches REGEX go to
  // DEV (CPU, or a GPU: GPU, GPU0, Vulkan0, CUDA0). A block's dense part runs on one device,
  // so one dense tensor sent to the CPU takes its whole dense part there; the same for the
  // routed experts of a block.
  std::vector<std::string> override_tensor;
};

struct DevicePlan {
  std::string name;            // "CPU" or "GPU0"
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t state_bytes = 0;     // recurrent state, all sequences
  int64_t scratch_bytes = 0;   // estimated compute buffers (see estimate in plan.cpp)
  int64_t budget_bytes = 0;    // 0 = unknown
  int64_t total_bytes() const { return weight_bytes + kv_bytes + state_bytes + scratch_bytes; }
};

struct LayerPlan {
  int layer = 0;
  LayerKind kind = LayerKind::kAttention;
  bool mtp = false;            // a trailing MTP (nextn) block: placed like any block (-ngl counts it,
                               // as llama.cpp does) under PlanParams::mtp, with its KV cache; on the
                               // CPU and not run otherwise
  std::string dense;           // device of everything but the routed experts (+ KV/state)
  std::string experts;         // device of the routed experts
  int64_t dense_bytes = 0;
  int64_t expert_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t state_bytes = 0;     // all sequences
};

struct Plan {
  std::vector<DevicePlan> devices;          // CPU first; GPU0 when -ngl != 0 or a VRAM budget is set
  std::vector<LayerPlan> layers;            // compute blocks, then MTP blocks
  std::vector<std::string> tensor_devices;  // parallel to the input tensor list
  std::string output_device;                // device of output_norm/output
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;                     // all attention layers
  int64_t kv_bytes_per_layer = 0;           // one attention layer
  int64_t state_bytes = 0;                  // all DeltaNet layers, all sequences
  int64_t state_bytes_per_seq = 0;          // all DeltaNet layers, one sequence
  std::optional<bool> fits;                 // GPU part within --vram-budget; nullopt when unknown
  std::optional<int64_t> gpu_free_bytes;    // budget - GPU total (negative: short by that much)
  std::optional<bool> fits_ram;             // CPU part within --ram-budget; nullopt when unknown
  std::optional<int64_t> ram_free_bytes;
  // With --ram-budget: how many of the CPU's routed experts stay in RAM and how many are
  // read from the file on demand (engine/expert_tiers.h).
  std::optional<ExpertTiers> expert_tiers;
  // The VRAM tier, for plans with a GPU: copies of recently routed experts of the layers
  // whose dense part is on the GPU and whose experts are on the CPU.
  GpuExpertCache gpu_expert_cache;

  const DevicePlan* device(std::string_view name) const;
};

// Bytes of one KV-cache row of `n` elements of `type` (quantized types by whole blocks).
// kBadInput when `n` is not a multiple of the type's block size.
Result<int64_t> kv_row_bytes(DType type, int64_t n, std::string_view flag);

// Estimated compute scratch of one device holding some blocks (and the output layer when
// `holds_output`), in bytes. See plan.cpp for the derivation.
int64_t estimate_scratch_bytes(const HParams& hp, int64_t n_ubatch, bool holds_output);

// Plan the placement. kBadInput for invalid parameters (n_ctx < 1, a KV type whose block
// does not divide the head width, a bad -ot regex, ...). `arch` supplies recurrent_state_bytes.
Result<Plan> make_plan(const HParams& hp, const ArchInfo& arch, const std::vector<PlanTensor>& tensors,
                       const PlanParams& params);

// The VRAM tier's query for `plan`: its GPU-dense layers with CPU experts.
GpuExpertCacheQuery gpu_expert_cache_query(const HParams& hp, const Plan& plan, int64_t requested_bytes,
                                           int64_t available_bytes);

// `p` with nothing on the GPU: -ngl 0, no -ncmoe/-cmoe/-ot, no VRAM budget.
PlanParams cpu_only(PlanParams p);

// --fit: the best plan for `free_bytes` of GPU memory, keeping `margin_bytes` of it free
// (the headroom users needed: a driver that runs out spills to system RAM silently).
// Candidates, in order, as users measured them (README, "Using a GPU"):
//   1. everything on the GPU;
//   2. every dense part and the LM head on the GPU (-ngl all), and then the routed experts
//      of as many whole blocks as the budget still holds, the LAST blocks first: the
//      smallest -ncmoe N whose GPU part (weights, KV cache, state, scratch) fits, up to
//      -ncmoe n_layer_all (= -cmoe, every routed expert on the CPU);
//   3. nothing on the GPU (partial dense offload was slower than none).
// Why experts go to the GPU in candidate 2: one user's "partial expert offload was no
// better" was measured by spilling experts past a 6 GB card (PCIe traffic every token).
// Experts that fit the budget cost no transfer and take their blocks' share of the CPU's
// expert reads away (the bottleneck, the CPU is the bottleneck); another user measured -ncmoe 34 (six blocks'
// experts on the GPU) as its best setting on 8 GB, which is what this picks there at -c 65536
// (with Q5_K expert downs; a Q4_K_M file whose last blocks have Q6_K downs gets -ncmoe 35),
// and users report -ncmoe 35 beating -ncmoe 41 on 6 GB cards. Whole blocks, counted from the
// end as -ncmoe does, so the choice is one llama.cpp flag a user can paste or change. A token
// reads the same share of every block's experts (8 of 256), so the CPU's bytes per token fall
// by that share of whatever expert bytes move, whichever blocks they are; packing blocks of
// mixed sizes tighter than a suffix would need -ot rules, left to a tuner that measures.
// `-ngl all -cmoe` gives candidate 2 without the experts (the choice before this rule).
// The first that fits is chosen; its PlanParams carry vram_budget_bytes = free − margin.
struct FitResult {
  PlanParams params;
  Plan plan;
  // The choice as llama.cpp's flags, the starting point a tuner measures around:
  // n_gpu_layers as -ngl counts layers (n_layer_all + 1 = every block and the output
  // layer, 0 = CPU only), n_cpu_moe as -ncmoe (0 = every routed expert on the GPU,
  // n_layer_all = -cmoe), `flags` those two spelled out ("-ngl 41 -ncmoe 34").
  int64_t n_gpu_layers = 0;
  int64_t n_cpu_moe = 0;
  int64_t expert_layers_on_gpu = 0;  // blocks whose routed experts the plan puts on the GPU
  std::string flags;
  std::string choice;  // one line: what was chosen and why
};
Result<FitResult> fit_plan(const HParams& hp, const ArchInfo& arch, const std::vector<PlanTensor>& tensors,
                           const PlanParams& base, int64_t free_bytes, int64_t margin_bytes);

}  // namespace moetier
