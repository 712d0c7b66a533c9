// Repacking the CPU's routed experts at load into the tile kernels' interleaved layout
// (cpu/interleave.h), so prompt matmuls read them as they are instead of repacking 8 rows
// per call. Like llama.cpp's CPU "repack" (and its -nr / --no-repack), it only happens to
// weights in memory this process owns: --no-mmap's buffer, or experts that --expert-pages
// moved into huge pages. Tensors in the file mapping keep the file's layout.
#pragma once

#include <string>
#include <vector>

#include "gguf/model_file.h"
#include "model/arch.h"
#include "tools/session.h"

namespace moetier {

// The routed-expert tensors a placement lets the CPU compute with in prompts too: on the
// CPU, and not in a GPU layer whose prompt batches may stream them to the GPU (--no-op-offload
// keeps those on the CPU), since the GPU reads the file's layout. MTP blocks never run.
std::vector<std::string> repack_candidates(const gguf::GgufFile& header, const HParams& hp,
                                           const PlacementDecision& d);

struct RepackResult {
  uint64_t bytes = 0;   // tensor bytes repacked
  int tensors = 0;
  double seconds = 0;
  // The line to print ("" when there was nothing to decide): what was repacked and what it
  // cost, or why (some) experts keep the file's layout.
  std::string note;
};

// Interleaves, in place, the tensors of `names` that qualify: owned by `file` (not the
// mapping), of a type the selected CPU kernels have an interleaved form for
// (DotKernel::tile_x8), with whole groups of 8 rows; a layer's gate and up only together
// (the MoE block reads them as a pair). Marks them in `file` for the weight binder.
RepackResult repack_experts(gguf::ModelFile& file, const std::vector<std::string>& names, int threads);

}  // namespace moetier
