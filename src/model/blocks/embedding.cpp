#include "model/blocks/embedding.h"

#include "cpu/ops.h"
#include "tensor/type_ops.h"

namespace moetier {

void embed_tokens(const cpu::WeightMatrix& token_embd, std::span<const int32_t> tokens, float* out) {
  const TypeOps* ops = type_ops(token_embd.type);
  for (size_t t = 0; t < tokens.size(); ++t) {
    ops->dequantize_row(token_embd.row(0, tokens[t]), out + static_cast<int64_t>(t) * token_embd.n_in,
                        token_embd.n_in);
  }
}

void lm_head(const cpu::WeightMatrix& output, const float* output_norm, float rms_eps, const float* x,
             int64_t n_rows, float* logits, LmHeadScratch& scratch, ThreadPool& pool) {
  const int64_t d = output.n_in;
  scratch.normed.resize(static_cast<size_t>(n_rows * d));
  for (int64_t r = 0; r < n_rows; ++r) cpu::rms_norm(x + r * d, output_norm, d, rms_eps, scratch.normed.data() + r * d);
  cpu::matmul_f32(output, 0, scratch.normed.data(), n_rows, logits, scratch.act, pool);
}

}  // namespace moetier
