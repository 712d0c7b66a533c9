// Token embedding lookup and the LM head, shared by every architecture.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/matmul.h"

namespace moetier {

// out[t][n_embd] = row tokens[t] of token_embd ({n_embd, n_vocab}), dequantized exactly.
void embed_tokens(const cpu::WeightMatrix& token_embd, std::span<const int32_t> tokens, float* out);

// logits[r][n_vocab] = output · rmsnorm(x[r]) · output_norm, for the rows of x given.
struct LmHeadScratch {
  std::vector<float> normed;
  cpu::QuantizedActivations act;
};
void lm_head(const cpu::WeightMatrix& output, const float* output_norm, float rms_eps, const float* x,
             int64_t n_rows, float* logits, LmHeadScratch& scratch, ThreadPool& pool);

}  // namespace moetier
