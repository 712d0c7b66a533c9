// Whether a load streams the CPU's routed experts from the file (a model bigger than RAM),
// and the store that then serves them: the glue between the placement (which experts the
// CPU computes), the tier plan (engine/expert_tiers.h: how many fit) and the store
// (engine/expert_store.h). Used by every command's load path (the session and bench).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/gpu_census.h"
#include "core/status.h"
#include "engine/expert_store.h"
#include "engine/expert_tiers.h"
#include "gguf/expert_pages.h"
#include "gguf/model_file.h"
#include "model/arch.h"

namespace moetier {

struct ExpertStreamingRequest {
  // The CPU's weights (engine/placement.h, cpu_weight_tensors) and working memory.
  std::vector<std::string> cpu_tensors;
  int64_t working_bytes = 0;
  gguf::ExpertPages expert_pages = gguf::ExpertPages::kAuto;  // only auto streams
  int64_t ram_budget_mib = 0;  // --ram-budget (0: the OS's available memory less a reserve)
  bool repack = true;          // interleave on arrival where the kernels have it (not -nr)
};

struct ExpertStreamingPlan {
  ExpertTiers tiers;
  // When tiers.stream: the streamed layers (TensorInfo pointers resolved in open_expert_store)
  // and their tensor names, for gguf::LoadOptions::streamed_tensors.
  std::vector<int> layers;
  std::vector<std::string> streamed_tensors;
};

// kBadInput when the budget cannot hold even the minimum cache (the message says what to change).
Result<ExpertStreamingPlan> plan_expert_streaming(const gguf::GgufFile& header, const HParams& hp,
                                                  const ExpertStreamingRequest& request);

// Leaves the streamed experts out of the load's moves (load.expert_tensors) and of the
// repack list (the store reads and repacks them) and names them in load.streamed_tensors.
// Nothing when the plan does not stream.
void exclude_streamed_from_load(const ExpertStreamingPlan& plan, gguf::LoadOptions& load,
                                std::vector<std::string>& repack);

struct ExpertStoreParams {
  ExpertCachePolicy policy = ExpertCachePolicy::kLru;
  bool repack = true;
  bool mlock = false;
  bool progress = true;
};
// The store for a plan that streams, over the opened file (its header names the tensors;
// those marked interleaved are marked in `file` for the weight binder).
Result<std::unique_ptr<ExpertStore>> open_expert_store(gguf::ModelFile& file, const HParams& hp,
                                                       const ExpertStreamingPlan& plan, const ExpertStoreParams& params);

// One line for a store's counters over a window, e.g. "experts: hit 71.2% (2.3% read ahead), 9.8 MB read per token
// at 1.12 GB/s, prediction 84% right, waited 31% of the time".
std::string describe_expert_stats(const ExpertStoreStats& stats, int64_t tokens, double seconds);

// One line for the VRAM expert cache over a window, e.g. "VRAM expert cache: 41.3% of the
// routed pairs computed on the GPU, 1.9 copies per token (3.4 MiB per token), a copy used 6.1
// times before it was replaced".
std::string describe_gpu_expert_cache(const GpuExpertCacheStats& stats, int64_t tokens);

}  // namespace moetier
