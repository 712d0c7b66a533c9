// Where a layer's blocks run. An architecture file writes each layer once, as straight-line
// calls on a LayerExec, naming the activations it reads and writes:
//
//   e.rms_norm(Act::kX, l.attn_norm, Act::kH);
//   e.attention(l.attention, attention_shape_, Act::kH, il, Act::kMix);
//   e.add(Act::kX, Act::kMix);
//   ...
//
// The CPU executor (model/cpu_exec.h) calls the block functions of model/blocks/ on host
// rows; the GPU executor (a GpuBackend's, gpu/vulkan/vk_exec.h) records the same blocks as GPU
// kernels, and for a layer whose routed experts stay on the CPU hands the expert part to
// the CPU. Which executor runs a layer is the placement plan's decision (engine/plan.h),
// made by the engine, never by the architecture file.
#pragma once

#include <cstdint>
#include <span>

#include "model/blocks/attention.h"
#include "model/blocks/delta_net.h"
#include "model/blocks/moe.h"
#include "model/model.h"

namespace moetier {

// The activations of one micro-batch, each [n][n_embd] f32 rows.
enum class Act {
  kX,    // the residual stream (the layer's input and output)
  kH,    // a normalised copy fed to a block
  kMix,  // a block's output, added back to kX
};

class LayerExec {
 public:
  virtual ~LayerExec() = default;

  // out = rmsnorm(in) · w, per row (w: [n_embd]).
  virtual void rms_norm(Act in, const float* w, Act out) = 0;
  // x += y.
  virtual void add(Act x, Act y) = 0;
  // The residual stream after the mixer, for tests that compare every layer's intermediate
  // result (teacher forcing); a no-op unless asked for.
  virtual void mark_after_mixer() = 0;

  virtual void attention(const AttentionWeights& w, const AttentionShape& shape, Act in, int layer, Act out) = 0;
  virtual void delta_net(const DeltaNetWeights& w, const DeltaNetShape& shape, Act in, int layer, Act out) = 0;
  virtual void moe(const MoeWeights& w, const MoeShape& shape, Act in, Act out) = 0;
};

}  // namespace moetier
