// The delta-rule loops, included by delta_rule.cpp (base ISA) and delta_rule_<tier>.cpp so
// all compile the very same arithmetic (see delta_rule.h; no FMA contraction in any of them).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "cpu/delta_rule.h"
#include "cpu/simd.h"

namespace moetier::cpu::delta_rule {
// Internal linkage: each unit keeps its own copy, compiled for its own ISA. (An inline
// function with external linkage would be one weak symbol for all units, and the linker
// would keep one ISA's copy for every caller.)
namespace {

inline void step_impl(const DeltaRuleStep& p) {
  const int64_t dk = p.d_k, dv = p.d_v;
  float* __restrict sk = p.scratch;  // Sᵀk, then δ
  float* __restrict out = p.out;
  // Pass 1: S ← decay·S and Sᵀk.
  for (int64_t c = 0; c < dv; ++c) sk[c] = 0;
  for (int64_t i = 0; i < dk; ++i) {
    float* __restrict Si = p.state + i * dv;
    const float ki = p.k[i];
    for (int64_t c = 0; c < dv; ++c) {
      Si[c] *= p.decay;
      sk[c] += Si[c] * ki;
    }
  }
  for (int64_t c = 0; c < dv; ++c) sk[c] = p.beta * (p.v[c] - sk[c]);
  // Pass 2: S ← S + k δᵀ and Sᵀq.
  for (int64_t c = 0; c < dv; ++c) out[c] = 0;
  for (int64_t i = 0; i < dk; ++i) {
    float* __restrict Si = p.state + i * dv;
    const float ki = p.k[i], qi = p.q[i];
    for (int64_t c = 0; c < dv; ++c) {
      Si[c] += ki * sk[c];
      out[c] += Si[c] * qi;
    }
  }
  for (int64_t c = 0; c < dv; ++c) out[c] *= p.q_scale;
}

// Native vectors of the unit's ISA (cpu/simd.h; element-wise only, so the width changes
// nothing but speed).
using simd::load;
using simd::store;
using simd::VF;
constexpr int64_t kF = simd::kF;
constexpr int kBlockVecs = 4;                   // vectors per column block
constexpr int64_t kBlockCols = kBlockVecs * kF;  // 16, 32 or 64 columns
constexpr int64_t kFloatsPerLine = 16;           // a 64-byte cache line

// The base ISA's replay of records onto a state (delta_rule.h), element by element: the
// recorded tokens' operations on S[i][c] in order, S ← S·decay, then S ← S + k[i]·δ[c].
inline void replay_impl(const DeltaRuleReplay& r) {
  const int64_t dk = r.d_k, dv = r.d_v;
  for (int64_t i = 0; i < dk; ++i) {
    for (int64_t c = 0; c < dv; ++c) {
      float s = r.source[i * dv + c];
      for (int64_t n = 0; n < r.n; ++n) {
        const float* rec = r.records + n * r.record_stride;
        s = s * rec[dk + dv];
        s = s + rec[i] * rec[dk + c];
      }
      r.state[i * dv + c] = s;
    }
  }
}

inline void tokens_impl(const DeltaRuleTokens& r) {
  const int64_t dk = r.d_k, dv = r.d_v;
  if (r.n_tokens <= 0) return;
  float* source = r.source ? r.source : r.state;
  const bool write_back = r.write_back_replay && r.n_replay > 0 && source != r.state;
  // The record's k and decay, once per token (δ is written column block by column block).
  for (int64_t t = 0; t < r.n_record; ++t) {
    float* rec = r.record + t * r.record_stride;
    std::memcpy(rec, r.k + t * r.stride, static_cast<size_t>(dk) * sizeof(float));
    rec[dk + dv] = r.decay[t];
  }
  if (dv % kBlockCols != 0) {  // no whole column blocks: the pending replay, then one step at a time
    if (source != r.state || r.n_replay > 0) {
      replay_impl({.source = source, .state = r.state, .d_k = dk, .d_v = dv, .records = r.replay, .n = r.n_replay,
                   .record_stride = r.record_stride});
    }
    if (write_back) std::memcpy(source, r.state, static_cast<size_t>(dk * dv) * sizeof(float));
    for (int64_t t = 0; t < r.n_tokens; ++t) {
      step_impl({.state = r.state, .d_k = dk, .d_v = dv, .q = r.q + t * r.stride, .k = r.k + t * r.stride,
                 .v = r.v + t * r.stride, .beta = r.beta[t], .decay = r.decay[t], .q_scale = r.q_scale,
                 .out = r.out + t * r.out_stride, .scratch = r.scratch});
      // step_impl leaves δ in its scratch.
      if (t < r.n_record) std::memcpy(r.record + t * r.record_stride + dk, r.scratch, static_cast<size_t>(dv) * sizeof(float));
    }
    return;
  }
  // Columns are independent: column c of S, sk[c], δ[c] and out[c] depend on column c alone.
  // So each column block runs all the tokens while its d_k × kBlockCols slice of S (16-32 KiB)
  // stays in L1: S is read from memory and written back once per run, not once per token.
  for (int64_t c0 = 0; c0 < dv; c0 += kBlockCols) {
    // The source's block (out of place, it stays as it was: plain stores to the destination,
    // as streaming them measured slower, docs/small-batches.md), the pending replay's records,
    // then pass 1 of token 0: S ← decay·S, sk = Sᵀk.
    VF sk[kBlockVecs];
    for (VF& a : sk) a = VF{};
    {
      const float decay = r.decay[0];
      for (int64_t i = 0; i < dk; ++i) {
        float* Si_in = source + i * dv + c0;
        float* Si = r.state + i * dv + c0;
        const float ki = r.k[i];
        // The next block's lines of this row, asked for a block ahead: a block reads d_k
        // short pieces 4·d_v bytes apart, a pattern the hardware prefetchers follow late
        // (docs/small-batches.md, "The recurrence reads its state once per step").
        if (c0 + kBlockCols < dv) {
          for (int64_t b = 0; b < kBlockCols; b += kFloatsPerLine) {
            __builtin_prefetch(Si_in + kBlockCols + b, 0);
            if (Si != Si_in) __builtin_prefetch(Si + kBlockCols + b, 1);
          }
        }
        VF s[kBlockVecs];
        for (int u = 0; u < kBlockVecs; ++u) s[u] = load<VF>(Si_in + u * kF);
        for (int64_t n = 0; n < r.n_replay; ++n) {
          const float* rec = r.replay + n * r.record_stride;
          const float rk = rec[i], rdecay = rec[dk + dv];
          #pragma GCC unroll 4
          for (int u = 0; u < kBlockVecs; ++u) s[u] = s[u] * rdecay + rk * load<VF>(rec + dk + c0 + u * kF);
        }
        if (write_back) {
          for (int u = 0; u < kBlockVecs; ++u) store(Si_in + u * kF, s[u]);
        }
        #pragma GCC unroll 4
        for (int u = 0; u < kBlockVecs; ++u) {
          const VF sd = s[u] * decay;
          store(Si + u * kF, sd);
          sk[u] = sk[u] + sd * ki;
        }
      }
    }
    for (int64_t t = 0; t < r.n_tokens; ++t) {
      const float* kt = r.k + t * r.stride;
      const float* qt = r.q + t * r.stride;
      const float* vt = r.v + t * r.stride;
      const float beta = r.beta[t];
      VF delta[kBlockVecs], o[kBlockVecs], sn[kBlockVecs];
      for (int u = 0; u < kBlockVecs; ++u) {
        delta[u] = beta * (load<VF>(vt + c0 + u * kF) - sk[u]);  // δ = β·(v − Sᵀk)
        o[u] = VF{};
        sn[u] = VF{};
      }
      if (t < r.n_record) {
        float* rec_delta = r.record + t * r.record_stride + dk + c0;
        for (int u = 0; u < kBlockVecs; ++u) store(rec_delta + u * kF, delta[u]);
      }
      if (t + 1 < r.n_tokens) {
        const float* kn = kt + r.stride;
        const float decay_next = r.decay[t + 1];
        for (int64_t i = 0; i < dk; ++i) {
          float* Si = r.state + i * dv + c0;
          const float ki = kt[i], qi = qt[i], kni = kn[i];
          #pragma GCC unroll 4
          for (int u = 0; u < kBlockVecs; ++u) {
            VF s = load<VF>(Si + u * kF) + ki * delta[u];  // pass 2 of t
            o[u] = o[u] + s * qi;
            s = s * decay_next;                            // pass 1 of t + 1
            sn[u] = sn[u] + s * kni;
            store(Si + u * kF, s);
          }
        }
      } else {
        for (int64_t i = 0; i < dk; ++i) {
          float* Si = r.state + i * dv + c0;
          const float ki = kt[i], qi = qt[i];
          #pragma GCC unroll 4
          for (int u = 0; u < kBlockVecs; ++u) {
            const VF s = load<VF>(Si + u * kF) + ki * delta[u];
            o[u] = o[u] + s * qi;
            store(Si + u * kF, s);
          }
        }
      }
      float* out = r.out + t * r.out_stride + c0;
      for (int u = 0; u < kBlockVecs; ++u) {
        store(out + u * kF, o[u] * r.q_scale);
        sk[u] = sn[u];
      }
    }
  }
}

}  // namespace
}  // namespace moetier::cpu::delta_rule
