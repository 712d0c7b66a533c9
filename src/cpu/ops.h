// Element-wise and row-wise f32 operations of the forward pass (scalar, vectorised by
// the compiler). Shapes are given per call; rows are contiguous.
#pragma once

#include <cstdint>

#include "core/math.h"

namespace moetier::cpu {

// out[i] = x[i] / sqrt(mean(x²) + eps) * w[i]   (one row of n; out may alias x)
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
// x / max(‖x‖₂, eps), in place
void l2_norm(float* x, int64_t n, float eps);
// NEOX rotary embedding of the first n_rot dims of a head at position pos (pairs i and
// i + n_rot/2 rotated by θ_i = pos · base^(−2i/n_rot)), in two steps so that the angles of
// one position are computed once for all heads: rope_angles fills cos_sin[2 · (n_rot/2)]
// (cos, sin pairs), rope_neox_with rotates one head with them.
void rope_angles(int64_t n_rot, int64_t pos, float base, float* cos_sin);
void rope_neox_with(float* head, int64_t n_rot, const float* cos_sin);
// Softmax over n values in place (max-subtracted, accumulated in double).
void softmax(float* x, int64_t n);

// e^x is math::exp_f32 here and in softmax, not the C library's: its bits are the same on
// every OS (core/math.h).
inline float sigmoid(float x) { return 1.0f / (1.0f + math::exp_f32(-x)); }
inline float silu(float x) { return x / (1.0f + math::exp_f32(-x)); }
// log(1 + e^x), with ggml's overflow guard (x > 20 returns x); evaluated in double and
// rounded once.
inline float softplus(float x) {
  return x > 20.0f ? x : static_cast<float>(math::log1p_f64(math::exp_f64(static_cast<double>(x))));
}

// out[i] = silu(gate[i]) * up[i] (out may alias gate or up), and x[i] = silu(x[i]): the bits
// of silu() per element, a vector of the CPU's tier at a time (cpu/silu.h).
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void silu_in_place(float* x, int64_t n);
// y[i] += a * x[i]
void axpy(float a, const float* x, int64_t n, float* y);

}  // namespace moetier::cpu
