// The multi-token-prediction ("nextn") head, the same frame for every architecture with one
// (model.h's MtpHead; the drafter of --spec-type draft-mtp). Row i of a call pairs
// tokens[i] with hidden[i], the final-norm hidden state of the position before it:
//   x = eh_proj · [rmsnorm(embed(token))·enorm ; rmsnorm(hidden)·hnorm]
//   x = block(x)                        (the architecture's MtpBlock; its own KV cache)
//   hidden_out = rmsnorm(x)·head_norm;  logits = output · hidden_out
// The architecture supplies only its block (binding and forward); the input projection,
// micro-batching, the final norm, the LM head and the placement (block and LM head on the
// GPU when the plan puts them there) are here.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cpu/matmul.h"
#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/layer_exec.h"
#include "model/model.h"
#include "model/weights.h"

namespace moetier {

// The nextn input side of blk.<n_layer> (llama.cpp's tensor names), common to all
// architectures.
struct NextnWeights {
  cpu::WeightMatrix eh_proj;         // {2·n_embd, n_embd}: [embedding ; hidden] → n_embd
  const float* enorm = nullptr;      // [n_embd], on the token embedding
  const float* hnorm = nullptr;      // [n_embd], on the incoming hidden state
  const float* head_norm = nullptr;  // nextn.shared_head_norm, else the model's output_norm
};
// Binds blk.<hp.n_layer>.nextn.*; `output_norm` is the fallback of the optional shared_head_norm.
NextnWeights bind_nextn(WeightBinder& binder, const HParams& hp, const float* output_norm);

// An architecture's MTP block after the input projection: x [n][n_embd] in Act::kX, updated
// in place by the block's straight-line code on `exec`, whose KV cache is layer 0 of the
// head's own sequence.
class MtpBlock {
 public:
  virtual ~MtpBlock() = default;
  virtual void forward(LayerExec& exec) const = 0;
  // What the block keeps per sequence (one attention layer's K and V rows).
  virtual LayerStateSpec state_spec() const = 0;
  // Weight bytes one drafted token reads in the block (its dense part and n_expert_used
  // routed experts), for MtpHead::bytes_per_token.
  virtual uint64_t bytes_per_token() const = 0;
};

// Binds an architecture's block from the tensors under `prefix` ("blk.<n_layer>."); errors
// are the binder's status.
using MtpBlockBinder = std::function<std::unique_ptr<MtpBlock>(WeightBinder& binder, const std::string& prefix)>;

// The head of a separate file (an MTP-only GGUF, what llama.cpp's converter writes with
// --mtp: token_embd, output_norm, output and the MTP block; or a full file with an MTP
// block), which it keeps open. Runs on the CPU.
Result<std::unique_ptr<MtpHead>> open_mtp_head(std::shared_ptr<const gguf::ModelFile> file, const HParams& hp,
                                               const ModelOptions& options, const MtpBlockBinder& bind_block);

}  // namespace moetier
