// Deterministic random weights for synthesized models. Every row of every tensor is a pure
// function of (seed, tensor name, row index), so tensors and row ranges can be generated in
// any order and on any number of threads with identical bytes.
//
// Scales (fan_in = ne[0], the row length):
//   token_embd            N(0, 0.7^2): embeddings of RMS ~0.7
//   *_norm.weight         1 + N(0, 0.05^2)
//   input projections     N(0, 1/fan_in): outputs of RMS ~1 for unit-RMS (normed) inputs
//     (attn_q/k/v, attn_qkv, attn_gate, ssm_beta, ffn_gate/up(_exps/_shexp))
//   ssm_alpha             N(0, 0.25/fan_in): the gate input varies the decay per token a little
//   output projections    N(0, 0.25/fan_in) (attn_output, ssm_out, ffn_down*): each block adds
//                         about half the residual's RMS, so activations grow slowly and stay finite
//   router ffn_gate_inp   N(0, 9/fan_in): router logits with std ~3, so the top-k sets vary
//   ffn_gate_inp_shexp    N(0, 1/fan_in)
//   ssm_conv1d            N(0, 1/d_conv)
//   ssm_a                 -exp(A_log), A = U(1, 16) (Mamba2/Qwen3-Next's A_log init)
//   ssm_dt.bias           softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]; together with ssm_a
//                         the decay exp(-A * softplus(a + dt_bias)) spans ~0.2 .. 0.999
//   output                N(0, 9/fan_in): logits with std ~3; the rows of the last 5 tokens
//                         (the special tokens) scaled by 0.3 so greedy runs rarely pick them
//   anything else         N(0, 1/fan_in)
// `--routing locality` gives some tensors structured rows instead (synth/locality.h,
// InitKind::kLocality, LocalityRole::kBlockOut).
// "N" is approximately Gaussian: the variance-normalised sum of four 16-bit uniforms (one
// 64-bit draw per value; exact mean and variance, tails cut at 3.46 sigma). Cheap enough to
// fill the 35B model's 35 G values at several hundred M values/s per core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/arch.h"

namespace moetier::synth {

// splitmix64's output function: a bijective 64-bit mixer.
uint64_t mix64(uint64_t x);
// FNV-1a of the name, mixed with the seed.
uint64_t tensor_seed(uint64_t seed, std::string_view tensor_name);

enum class InitKind { kGaussian, kNormWeight, kSsmA, kSsmDtBias, kLocality };

// The structured rows of `--routing locality` (synth/locality.cpp fills them): which part
// a tensor plays and the few numbers its rows need.
enum class LocalityRole {
  kNone,
  kEmbedding,     // token_embd
  kRouter,        // ffn_gate_inp
  kQkv,           // a DeltaNet layer's attn_qkv
  kConvIdentity,  // ssm_conv1d: only the current token's tap, 1
  kConstC,        // rows that read only the constant part (attn_gate: z, ssm_beta)
  kConstant,      // every value `a` (ssm_alpha 0, ssm_a, ssm_dt.bias, ssm_norm)
  kStateOut,      // ssm_out: writes the state part
  kBlockOut,      // attn_output, ffn_down*: the default rows, zero outside the output part
};

struct LocalityRows {
  LocalityRole role = LocalityRole::kNone;
  int64_t n_embd = 0;
  int64_t n_const = 0;         // residual coordinates [0, n_const): a constant direction
  int64_t n_state = 0;         // then n_state coordinates: the carried state
  int64_t n_token = 0;         // then n_token: the token embeddings' noise; the rest: block outputs
  uint64_t sign_seed = 0;      // signs of the constant direction
  int64_t key_dim = 0;         // DeltaNet: n_k_heads * d_state
  int64_t head_dim = 0;        // DeltaNet: d_state (value head width)
  int64_t n_heads = 0;         // DeltaNet: value heads
  double a = 0, b = 0, c = 0;  // role-specific scales (locality.cpp)
  double tau_min = 0, tau_max = 0;
};

struct TensorInit {
  InitKind kind = InitKind::kGaussian;
  float mean = 0.0f;
  float stddev = 0.0f;
  uint64_t seed = 0;               // tensor_seed(seed, name)
  int64_t row_elems = 0;           // ne[0]
  int64_t scaled_rows_from = -1;   // rows >= this (within one 2-D slice) get row_scale; -1: none
  int64_t rows_per_slice = 0;      // ne[1]
  float row_scale = 1.0f;
  LocalityRows locality;           // kind == kLocality, or role kBlockOut with kGaussian rows
};

// How to initialise `spec` (from its name, role and shape) for a model of shape `hp`.
TensorInit tensor_init(const TensorSpec& spec, const HParams& hp, uint64_t seed);

// Approximately N(0, 1) from one 64-bit draw (see above).
float unit_gaussian(uint64_t bits);
// The start of row `row`'s random stream: value i of the row is drawn from
// mix64(state + (i + 1) * golden).
uint64_t row_stream(uint64_t tensor_seed, int64_t row);
inline constexpr uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ull;  // splitmix64's increment (2^64 / phi)

// Fill rows [first_row, first_row + n_rows) (rows of ne[0] values, 3-D tensors flattened)
// into out[n_rows * row_elems].
void fill_rows(const TensorInit& init, int64_t first_row, int64_t n_rows, float* out);

}  // namespace moetier::synth
