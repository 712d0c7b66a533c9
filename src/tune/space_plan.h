// Where `moetier tune` starts: --fit's placement for the model and context, computed from
// the GGUF header alone (no weights read), and the search space around it with a `fits`
// test that asks the memory plan. On a machine without a usable GPU the placement knobs
// collapse to CPU only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tensor/dtype.h"
#include "tune/candidates.h"

namespace moetier::tune {

struct SpacePlanParams {
  std::string model_path;
  Purpose purpose = Purpose::kServe;
  int device = -1;                // Vulkan device (-1: the first hardware GPU)
  int64_t vram_budget_mib = 0;    // plan as if the GPU had this much (0: what it has free)
  int64_t fit_margin_mib = 1536;  // GPU memory kept free, as --fit keeps it
  int64_t n_ctx = 4096;           // the context of the command being tuned (its KV cache)
  int64_t physical_cores = 1;
  std::vector<int64_t> threads;   // -t LIST (empty: build_candidates' default)
  std::vector<DType> kv_types = {DType::F16};
};

struct SpacePlan {
  SpaceParams space;          // the inputs of build_candidates (its `fits` holds the plan's inputs)
  int64_t n_layer_all = 0;    // blocks incl. MTP blocks
  int64_t gpu_budget_bytes = 0;  // the GPU memory the placements may use (free − margin; 0: no GPU)
  std::string fit_flags;      // --fit's choice as flags ("-ngl 41 -ncmoe 34"); empty without a GPU
  std::string placement_note; // one line for the user: what --fit chose, or why CPU only
};

Result<SpacePlan> plan_search_space(const SpacePlanParams& params);

}  // namespace moetier::tune
