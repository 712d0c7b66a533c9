#include "cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/math.h"
#include "cpu/silu.h"

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

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  static const SiluKernels& k = silu_kernels(cpu_isa_tier());
  k.swiglu(gate, up, n, out);
}

void silu_in_place(float* x, int64_t n) {
  static const SiluKernels& k = silu_kernels(cpu_isa_tier());
  k.silu_in_place(x, n);
}

void axpy(float a, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace moetier::cpu
