#include "cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/math.h"
#include "cpu/simd.h"

namespace moetier::cpu {

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void l2_norm(float* x, int64_t n, float eps) {
  double sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::max(static_cast<float>(std::sqrt(sum_sq)), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

void rope_angles(int64_t n_rot, int64_t pos, float base, float* cos_sin) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double theta = static_cast<double>(pos) * math::pow_f64(static_cast<double>(base), -2.0 * i / n_rot);
    double c = 0, s = 0;
    math::cos_sin_f64(theta, &c, &s);
    cos_sin[2 * i] = static_cast<float>(c);
    cos_sin[2 * i + 1] = static_cast<float>(s);
  }
}

void rope_neox_with(float* head, int64_t n_rot, const float* cos_sin) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const float a = head[i];
    const float b = head[i + half];
    head[i] = a * c - b * s;
    head[i + half] = a * s + b * c;
  }
}

void softmax(float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = math::exp_f32(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

namespace {

// 8 lanes (GNU vectors: two SSE registers on the base ISA).
using Lanes = float __attribute__((vector_size(32)));
using IntLanes = int32_t __attribute__((vector_size(32)));

// SiLU of in[0..7] into out[0..7], x / (1 + e^−x) with e^−x from simd::exp_f32_lanes, so every
// lane is silu() bit for bit where −87 ≤ −x ≤ 88 (this unit compiles without contraction).
// False, writing nothing, when a lane is outside (or NaN): the caller then uses silu().
bool silu8(const float* in, float* out) {
  const Lanes x = simd::load<Lanes>(in);
  const Lanes e_arg = -x;
  bool ok = true;
  for (int i = 0; i < 8; ++i) ok = ok && e_arg[i] >= -87.0f && e_arg[i] <= 88.0f;
  if (!ok) return false;
  simd::store(out, x / (1.0f + simd::exp_f32_lanes<Lanes, IntLanes>(e_arg)));
  return true;
}

}  // namespace

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float s[8];
    if (!silu8(gate + i, s)) break;  // the rest one by one (a lane whose e^−x leaves the range)
    for (int l = 0; l < 8; ++l) out[i + l] = s[l] * up[i + l];
  }
  for (; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void silu_in_place(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (!silu8(x + i, x + i)) break;
  }
  for (; i < n; ++i) x[i] = silu(x[i]);
}

void axpy(float a, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace moetier::cpu
