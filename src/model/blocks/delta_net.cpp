#include "model/blocks/delta_net.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "core/math.h"
#include "cpu/delta_rule.h"
#include "cpu/ops.h"

namespace moetier {

std::vector<float> conv_by_tap(const float* conv, int64_t channels, int64_t d_conv) {
  std::vector<float> by_tap(static_cast<size_t>(channels * d_conv));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t j = 0; j < d_conv; ++j) by_tap[static_cast<size_t>(j * channels + c)] = conv[c * d_conv + j];
  }
  return by_tap;
}

void delta_net_block(const DeltaNetWeights& w, const DeltaNetShape& s, const float* x,
                     std::span<const SeqRows> seqs, int layer, float* out, DeltaNetScratch& scratch,
                     ThreadPool& pool, Profiler* profiler) {
  const int64_t n = seqs.back().row_begin + seqs.back().n_rows;
  const int64_t ch = s.channels();
  const int64_t taps = s.d_conv;
  const int64_t dk = s.d_state, dv = s.d_state;
  scratch.qkv.resize(static_cast<size_t>(n * ch));
  scratch.z.resize(static_cast<size_t>(n * s.value_dim()));
  scratch.beta.resize(static_cast<size_t>(n * s.n_v_heads));
  scratch.alpha.resize(static_cast<size_t>(n * s.n_v_heads));
  scratch.input.reset(x, n, s.n_embd);  // the four projections share one conversion per type
  cpu::matmul_cached(w.qkv, 0, scratch.input, scratch.qkv.data(), pool);
  cpu::matmul_cached(w.gate, 0, scratch.input, scratch.z.data(), pool);
  cpu::matmul_cached(w.beta, 0, scratch.input, scratch.beta.data(), pool);
  cpu::matmul_cached(w.alpha, 0, scratch.input, scratch.alpha.data(), pool);

  // The per-token part, timed on its own (profile block delta_rule): conv, recurrence, norm.
  std::optional<ScopedProfile> per_token(std::in_place, profiler, ProfileBlock::kDeltaRule, ProfileBlock::kDeltaNet);
  // Causal depthwise conv over time, per sequence: its input is [carried d_conv−1 rows |
  // its new rows]; output row t uses input rows t .. t + d_conv − 1. The last d_conv − 1
  // input rows become the new carried state. One parallel region for every sequence of the
  // batch; threads split the channels, so each updates its channels of a carried state in
  // place, after the outputs and the journal have read them (no copy of the rows).
  scratch.conv_out.resize(static_cast<size_t>(n * ch));
  CHECK(w.conv_by_tap != nullptr);  // made at load (conv_by_tap())
  // Per sequence its carried rows, and per token the rollback journal's slot for the carried
  // rows after it (speculative verify passes; null outside one), gathered before the threads.
  scratch.conv_states.clear();
  scratch.conv_journal.clear();
  for (const SeqRows& sr : seqs) {
    scratch.conv_states.push_back(sr.seq->conv_state(layer));
    for (int64_t t = 0; t < sr.n_rows; ++t) scratch.conv_journal.push_back(sr.seq->journal_conv(layer, sr.seq->n_past() + t));
  }
  const float* conv_taps = w.conv_by_tap;  // [taps][ch]
  pool.parallel_for(ch, 256, [&](int64_t c0, int64_t c1, int) {
    const size_t bytes = static_cast<size_t>(c1 - c0) * sizeof(float);
    size_t journal = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const SeqRows& sr = seqs[i];
      const int64_t m = sr.n_rows;
      float* carried = scratch.conv_states[i];                      // [taps − 1][ch]
      const float* fresh = scratch.qkv.data() + sr.row_begin * ch;  // [m][ch]
      // Input row r of [carried | fresh].
      const auto input = [&](int64_t r) { return r < taps - 1 ? carried + r * ch : fresh + (r - (taps - 1)) * ch; };
      float* conv_out = scratch.conv_out.data() + sr.row_begin * ch;
      // Per (t, c): acc = 0, then + w_j·x_(t+j) for j in order, then SiLU (the same
      // operations in the same order whatever the split).
      for (int64_t t = 0; t < m; ++t) {
        float* __restrict o = conv_out + t * ch;
        for (int64_t c = c0; c < c1; ++c) o[c] = 0;
        for (int64_t j = 0; j < taps; ++j) {
          const float* __restrict wj = conv_taps + j * ch;
          const float* __restrict xj = input(t + j);
          for (int64_t c = c0; c < c1; ++c) o[c] += wj[c] * xj[c];
        }
        cpu::silu_in_place(o + c0, c1 - c0);
      }
      for (int64_t t = 0; t < m; ++t) {
        if (float* slot = scratch.conv_journal[journal + static_cast<size_t>(t)]) {
          for (int64_t r = 0; r < taps - 1; ++r) std::memcpy(slot + r * ch + c0, input(t + 1 + r) + c0, bytes);
        }
      }
      journal += static_cast<size_t>(m);
      // The new carried rows, input rows m .. m + taps − 2, in ascending order: row r takes
      // input row m + r > r, a carried row not yet overwritten or a fresh one.
      for (int64_t r = 0; r < taps - 1; ++r) std::memcpy(carried + r * ch + c0, input(m + r) + c0, bytes);
    }
  });

  // Delta rule per V head j (Q/K head j mod n_k — the tiled mapping), token by token:
  //   S ← exp(g)·S;  δ = β·(v − Sᵀk);  S ← S + k δᵀ;  o = Sᵀq / sqrt(d_k)
  // S is d_k × d_v, stored row-major S[i][c] (i over d_k).
  // Per thread: the rule's [2·d_v] scratch, then β and the decay of each of up to n tokens.
  const int64_t per_thread = 2 * dv + 2 * n;
  scratch.head_tmp.resize(static_cast<size_t>(pool.size() * per_thread));
  scratch.y.resize(static_cast<size_t>(n * s.value_dim()));
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // Normalise q and k heads once per token (in place in conv_out).
  for (int64_t t = 0; t < n; ++t) {
    float* row = scratch.conv_out.data() + t * ch;
    for (int64_t h = 0; h < 2 * s.n_k_heads; ++h) cpu::l2_norm(row + h * dk, dk, s.rms_eps);
  }
  // Per (sequence, V head) (threads split them), the sequence's tokens in order through
  // cpu::delta_rule_tokens: S read and written once for all the tokens, with the records a
  // cut-back left pending applied first and, in a speculative verify, each token's record
  // written for the rollback journal (SequenceState::begin_ssm_pass says where). Then the
  // gated RMSNorm of each token's output: rmsnorm(o) · norm · SiLU(z).
  // Items go through parallel_for_balanced, so a slower core does not hold up the layer.
  scratch.ssm_passes.clear();
  for (const SeqRows& sr : seqs) scratch.ssm_passes.push_back(sr.seq->begin_ssm_pass(layer, sr.n_rows));
  const int64_t n_items = static_cast<int64_t>(seqs.size()) * s.n_v_heads;
  pool.parallel_for_balanced(n_items, 1, [&](int64_t begin, int64_t end, int thread) {
    float* tmp = scratch.head_tmp.data() + thread * per_thread;
    for (int64_t item = begin; item < end; ++item) {
      const SeqRows& sr = seqs[static_cast<size_t>(item / s.n_v_heads)];
      const SequenceState::SsmPass& pass = scratch.ssm_passes[static_cast<size_t>(item / s.n_v_heads)];
      const int64_t j = item % s.n_v_heads;
      const int64_t i_head = j % s.n_k_heads;
      const int64_t m = sr.n_rows;
      const float* rows = scratch.conv_out.data() + sr.row_begin * ch;
      const float* q = rows + i_head * dk;
      const float* k = rows + s.key_dim() + i_head * dk;
      const float* v = rows + 2 * s.key_dim() + j * dv;
      float* o = scratch.y.data() + sr.row_begin * s.value_dim() + j * dv;
      float* beta = tmp + 2 * dv;
      float* decay = beta + m;
      for (int64_t t = 0; t < m; ++t) {
        const int64_t at = (sr.row_begin + t) * s.n_v_heads + j;
        beta[t] = cpu::sigmoid(scratch.beta[at]);
        const float g = cpu::softplus(scratch.alpha[at] + w.dt_bias[j]) * w.a[j];
        decay[t] = math::exp_f32(g);
      }
      cpu::DeltaRuleTokens run = pass.head_run(j);
      run.n_tokens = m;
      run.q = q;
      run.k = k;
      run.v = v;
      run.stride = ch;
      run.beta = beta;
      run.decay = decay;
      run.q_scale = q_scale;
      run.out = o;
      run.out_stride = s.value_dim();
      run.scratch = tmp;
      cpu::delta_rule_tokens(run);
      for (int64_t t = 0; t < m; ++t) {
        float* ot = o + t * s.value_dim();
        cpu::rms_norm(ot, w.norm, dv, s.rms_eps, ot);
        const float* z = scratch.z.data() + (sr.row_begin + t) * s.value_dim() + j * dv;
        cpu::swiglu(z, ot, dv, ot);  // ot[c] · silu(z[c])
      }
    }
  });
  per_token.reset();
  cpu::matmul_f32(w.out, 0, scratch.y.data(), n, out, scratch.act, pool);
}

}  // namespace moetier
