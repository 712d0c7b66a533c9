#include "model/blocks/attention.h"

#include <cmath>
#include <cstring>

#include "cpu/ops.h"
#include "tensor/fp16.h"

namespace moetier {

namespace {

void store_row(DType type, const float* src, int64_t n, uint8_t* dst) {
  if (type == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else {
    auto* h = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
  }
}

float load(DType type, const uint8_t* row, int64_t i) {
  return type == DType::F32 ? reinterpret_cast<const float*>(row)[i]
                            : fp16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
}

}  // namespace

void attention_block(const AttentionWeights& w, const AttentionShape& s, const float* x, int64_t n, int layer,
                     SequenceState& seq, float* out, AttentionScratch& scratch, ThreadPool& pool) {
  const int64_t hd = s.head_dim;
  const int64_t q_width = s.n_head * hd * (s.output_gate ? 2 : 1);
  const int64_t kv_width = s.n_head_kv * hd;
  const int64_t pos0 = seq.n_past();

  scratch.q_full.resize(static_cast<size_t>(n * q_width));
  scratch.k.resize(static_cast<size_t>(n * kv_width));
  scratch.v.resize(static_cast<size_t>(n * kv_width));
  cpu::matmul_f32(w.q, 0, x, n, scratch.q_full.data(), scratch.act, pool);
  cpu::matmul_f32(w.k, 0, x, n, scratch.k.data(), scratch.act, pool);
  cpu::matmul_f32(w.v, 0, x, n, scratch.v.data(), scratch.act, pool);

  // Split [query | gate] per head; per-head RMSNorm on q and k; rotary on both.
  scratch.q.resize(static_cast<size_t>(n * s.n_head * hd));
  scratch.gate.resize(s.output_gate ? static_cast<size_t>(n * s.n_head * hd) : 0);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < s.n_head; ++h) {
      const float* src = scratch.q_full.data() + t * q_width + h * hd * (s.output_gate ? 2 : 1);
      float* q = scratch.q.data() + (t * s.n_head + h) * hd;
      cpu::rms_norm(src, w.q_norm, hd, s.rms_eps, q);
      cpu::rope_neox(q, s.n_rot, pos0 + t, s.rope_base);
      if (s.output_gate) std::memcpy(scratch.gate.data() + (t * s.n_head + h) * hd, src + hd, hd * sizeof(float));
    }
    for (int64_t h = 0; h < s.n_head_kv; ++h) {
      float* k = scratch.k.data() + t * kv_width + h * hd;
      cpu::rms_norm(k, w.k_norm, hd, s.rms_eps, k);
      cpu::rope_neox(k, s.n_rot, pos0 + t, s.rope_base);
    }
    const auto& opt = seq.options();
    store_row(opt.type_k, scratch.k.data() + t * kv_width, kv_width, seq.k_row(layer, pos0 + t));
    store_row(opt.type_v, scratch.v.data() + t * kv_width, kv_width, seq.v_row(layer, pos0 + t));
  }

  // Causal attention, one (token, head) pair per work item. Query head h reads KV head
  // h / (n_head / n_head_kv).
  const int64_t group = s.n_head / s.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t n_ctx_used = pos0 + n;
  scratch.attn.resize(static_cast<size_t>(n * s.n_head * hd));
  scratch.scores.resize(static_cast<size_t>(pool.size() * n_ctx_used));
  const DType type_k = seq.options().type_k, type_v = seq.options().type_v;
  pool.parallel_for(n * s.n_head, 1, [&](int64_t begin, int64_t end, int thread) {
    float* scores = scratch.scores.data() + thread * n_ctx_used;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / s.n_head, h = item % s.n_head, kvh = h / group;
      const float* q = scratch.q.data() + (t * s.n_head + h) * hd;
      const int64_t n_keys = pos0 + t + 1;
      for (int64_t p = 0; p < n_keys; ++p) {
        const uint8_t* krow = seq.k_row(layer, p);
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += static_cast<double>(q[i]) * load(type_k, krow, kvh * hd + i);
        scores[p] = static_cast<float>(dot) * scale;
      }
      cpu::softmax(scores, n_keys);
      float* o = scratch.attn.data() + (t * s.n_head + h) * hd;
      std::memset(o, 0, hd * sizeof(float));
      for (int64_t p = 0; p < n_keys; ++p) {
        const uint8_t* vrow = seq.v_row(layer, p);
        for (int64_t i = 0; i < hd; ++i) o[i] += scores[p] * load(type_v, vrow, kvh * hd + i);
      }
      if (s.output_gate) {
        const float* g = scratch.gate.data() + (t * s.n_head + h) * hd;
        for (int64_t i = 0; i < hd; ++i) o[i] *= cpu::sigmoid(g[i]);
      }
    }
  });
  cpu::matmul_f32(w.out, 0, scratch.attn.data(), n, out, scratch.act, pool);
}

}  // namespace moetier
