// Repacking the CPU's weight matrices at load into the tile kernels' interleaved layout
// (cpu/interleave.h): prompt matmuls read them as they are instead of repacking 8 rows per
// call, and decoding reads 8 rows per load with no per-row reduction (the x8 one-token
// kernel decodes ~1.6x as many bytes per second as the row kernels on AVX2 + AVX-VNNI). Like
// llama.cpp's CPU "repack" (and its -nr / --no-repack), it only happens to weights in memory
// this process owns: --no-mmap's buffer, or the CPU weights that --expert-pages moved into
// huge pages. Tensors in the file mapping keep the file's layout.
#pragma once

#include <string>
#include <vector>

#include "engine/placement.h"
#include "gguf/model_file.h"
#include "model/arch.h"

namespace moetier {

// The weight matrices a placement has the CPU compute with, which only matmul and the MoE
// block read: routed experts on the CPU, but not in a GPU layer whose prompt batches may
// stream them to the GPU (--no-op-offload keeps those on the CPU) or whose VRAM expert cache
// copies them, since the GPU reads the file's layout; and the attention, DeltaNet,
// shared-expert, dense-FFN and LM-head matrices of CPU layers. Never the token embedding
// (read one row per token; when tied it is the LM head too, so that stays as it is). MTP
// blocks never run.
std::vector<std::string> repack_candidates(const gguf::GgufFile& header, const HParams& hp,
                                           const PlacementDecision& d);

struct RepackResult {
  uint64_t bytes = 0;   // tensor bytes repacked
  int tensors = 0;
  double seconds = 0;
  // The line to print ("" when there was nothing to decide): what was repacked and what it
  // cost, or why (some) weights keep the file's layout.
  std::string note;
};

// Interleaves, in place, the tensors of `names` that qualify: owned by `file` (not the
// mapping), of a type the selected CPU kernels have an interleaved form for
// (DotKernel::tile_x8), with whole groups of 8 rows; a layer's gate and up (routed, or the
// shared expert's) only together (the MoE block reads them as a pair). Marks them in `file`
// for the weight binder. The note says why routed experts were kept; dense matrices that do
// not qualify (F32 or Q8_0 projections, 32-row DeltaNet gates) keep their layout unsaid.
RepackResult repack_weights(gguf::ModelFile& file, const std::vector<std::string>& names, int threads);

}  // namespace moetier
