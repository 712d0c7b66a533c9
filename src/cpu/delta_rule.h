// One token of the Gated DeltaNet delta rule for one V head, the recurrence of
// model/blocks/delta_net. S is the head's d_k × d_v state, row-major S[i][c]:
//   S ← decay·S;  δ = β·(v − Sᵀk);  S ← S + k δᵀ;  out = (Sᵀq)·q_scale
// Two passes over S, element-wise along c, sums over i in order. The same source
// (delta_rule_impl.h) is compiled for the base ISA (delta_rule.cpp, the reference) and per
// tier (delta_rule_<tier>.cpp), without FMA contraction: every build is bit-identical.
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace moetier::cpu {

struct DeltaRuleStep {
  float* state = nullptr;       // [d_k][d_v], updated in place
  int64_t d_k = 0, d_v = 0;
  const float* q = nullptr;     // [d_k] (L2-normalised)
  const float* k = nullptr;     // [d_k] (L2-normalised)
  const float* v = nullptr;     // [d_v]
  float beta = 0, decay = 0, q_scale = 0;
  float* out = nullptr;         // [d_v]
  float* scratch = nullptr;     // [d_v]
};

// The build the CPU runs best (cpu_isa_tier()), chosen on the first call.
void delta_rule_step(const DeltaRuleStep& step);

// A token's record: what the rule did to S between its two passes,
//   S ← decay·S;  S ← S + k δᵀ   (element-wise, each product and sum rounded once),
// stored as [k: d_k][δ: d_v][decay] (delta_rule_record_elems floats). Applying a run's
// records, in order, to the state the run started from gives back, bit for bit, the state
// after any of its tokens: how a speculative verify is cut back without a copy of S per
// token (SequenceState keeps the run's first state and the records).
constexpr int64_t delta_rule_record_elems(int64_t d_k, int64_t d_v) { return d_k + d_v + 1; }

// n_tokens consecutive tokens of one V head (a prompt's run, a verify step), bit-identical
// to n_tokens calls of delta_rule_step. Column c of S, Sᵀk, δ and out depend on column c
// alone, so the run goes by column blocks (16-64 columns: a 16-32 KiB slice of S at d_k 128,
// which stays in L1) and takes every token through a block before the next: pass 2 of token
// t and pass 1 of token t + 1 touch each element in turn,
//   S += k_t·δ_t;  out_t += S·q_t;  S *= decay_(t+1);  sk_(t+1) += S·k_(t+1),
// the same operations on it in the same order (sums over i still in order). S is read from
// memory and written back once per run, whatever the number of tokens (S of a head, 64 KiB
// at d 128, does not stay in a 48 KiB L1 between tokens).
struct DeltaRuleTokens {
  float* state = nullptr;     // [d_k][d_v]: S after the run is written here
  // Where the run's first state is read from (null: `state`, updated in place). Another
  // place is left as it was (the origin of later replays), unless write_back_replay.
  float* source = nullptr;
  int64_t d_k = 0, d_v = 0;
  int64_t n_tokens = 0;
  const float* q = nullptr;   // token t's q, k, v at q + t·stride, k + t·stride, v + t·stride
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t stride = 0;         // floats
  const float* beta = nullptr;   // [n_tokens]
  const float* decay = nullptr;  // [n_tokens]
  float q_scale = 0;
  float* out = nullptr;       // token t's [d_v] at out + t·out_stride
  int64_t out_stride = 0;
  float* scratch = nullptr;   // [2·d_v]
  // Records of earlier tokens applied to the source first, in order, in the same pass over S
  // (a cut-back's pending replay): record r at replay + r·record_stride.
  const float* replay = nullptr;
  int64_t n_replay = 0;
  bool write_back_replay = false;  // the source is overwritten with the replayed state
  // This run's first n_record tokens' records are written to record + t·record_stride
  // (a speculative verify's journal; may be null).
  float* record = nullptr;
  int64_t n_record = 0;
  int64_t record_stride = 0;  // floats between records
};
void delta_rule_tokens(const DeltaRuleTokens& run);

// state = source with n records applied (record r at records + r·record_stride), in the
// records' arithmetic: bit-identical to the state the recorded run left after its n tokens.
// source may equal state. (A one-off materialisation, e.g. to save a slot: the base build.)
struct DeltaRuleReplay {
  const float* source = nullptr;  // [d_k][d_v]
  float* state = nullptr;         // [d_k][d_v]
  int64_t d_k = 0, d_v = 0;
  const float* records = nullptr;
  int64_t n = 0;
  int64_t record_stride = 0;
};
void delta_rule_replay(const DeltaRuleReplay& r);

struct DeltaRuleKernels {
  void (*step)(const DeltaRuleStep& step);
  void (*tokens)(const DeltaRuleTokens& run);
  IsaTier tier;  // the build
};
// The build that serves a tier (cpu/isa.h; AVX-VNNI has none of its own: AVX2's serves it).
// Only call a tier's kernels where isa_tier_runs_on(tier, cpu).
const DeltaRuleKernels& delta_rule_kernels(IsaTier tier);

namespace delta_rule {
// The builds, one per unit (delta_rule_kernels picks among them).
extern const DeltaRuleKernels kScalarBuild;
extern const DeltaRuleKernels kAvx2Build;
extern const DeltaRuleKernels kAvx512Build;
}  // namespace delta_rule

}  // namespace moetier::cpu
