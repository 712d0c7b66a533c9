// Compiled with -ffp-contract=off (CMakeLists.txt): every expression rounds as written.
// Derivations and measured errors: docs/numerics.md, "Elementary functions".
#include "core/math.h"

#include <cstdint>
#include <cstring>
#include <limits>

namespace moetier::math {

namespace {

// floor(v) for |v| < 2^31, by truncation (exact) and a correction (exact).
float floor_small(float v) {
  const float t = static_cast<float>(static_cast<int32_t>(v));
  return t > v ? t - 1.0f : t;
}
double floor_small(double v) {
  const double t = static_cast<double>(static_cast<int64_t>(v));
  return t > v ? t - 1.0 : t;
}

// 2^k as a float for −126 ≤ k ≤ 127, and as a double for −1022 ≤ k ≤ 1023 (exact).
float pow2_f32(int k) {
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float r;
  std::memcpy(&r, &bits, sizeof(r));
  return r;
}
double pow2_f64(int64_t k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double r;
  std::memcpy(&r, &bits, sizeof(r));
  return r;
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 32 significant bits, so k·kLn2Hi is exact for |k| < 2^21.
constexpr double kLn2Hi = 0x1.62e42ffp-1;
constexpr double kLn2Lo = -0x1.718432a1b0e26p-35;
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
// π/2 = kPio2A + kPio2B + kPio2C; A and B have 30 significant bits, so n·A and n·B are
// exact for |n| < 2^23.
constexpr double kPio2A = 0x1.921fb548p+0;
constexpr double kPio2B = -0x1.de973dc8p-31;
constexpr double kPio2C = -0x1.9d9cceba3f91fp-62;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;

// 1/k! for k = 0..13 (each a correctly rounded double).
constexpr double kInvFact[14] = {1.0,
                                 1.0,
                                 1.0 / 2,
                                 1.0 / 6,
                                 1.0 / 24,
                                 1.0 / 120,
                                 1.0 / 720,
                                 1.0 / 5040,
                                 1.0 / 40320,
                                 1.0 / 362880,
                                 1.0 / 3628800,
                                 1.0 / 39916800,
                                 1.0 / 479001600,
                                 1.0 / 6227020800.0};
// 1/k! for k = 14..18.
constexpr double kInvFact14 = 1.0 / 87178291200.0;
constexpr double kInvFact15 = 1.0 / 1307674368000.0;
constexpr double kInvFact16 = 1.0 / 20922789888000.0;
constexpr double kInvFact17 = 1.0 / 355687428096000.0;
constexpr double kInvFact18 = 1.0 / 6402373705728000.0;

// sin r and cos r for |r| ≤ π/4 + 2^−30: Taylor series to r^17 and r^18 (the first term left
// out is below 2^−62 of the result).
double sin_kernel(double r) {
  const double t = r * r;
  double p = -kInvFact17;
  p = p * t + kInvFact15;
  p = p * t - kInvFact[13];
  p = p * t + kInvFact[11];
  p = p * t - kInvFact[9];
  p = p * t + kInvFact[7];
  p = p * t - kInvFact[5];
  p = p * t + kInvFact[3];  // p = 1/3! − r²/5! + ... (sign flipped below)
  return r - r * t * p;
}
double cos_kernel(double r) {
  const double t = r * r;
  double p = kInvFact18;
  p = p * t - kInvFact16;
  p = p * t + kInvFact14;
  p = p * t - kInvFact[12];
  p = p * t + kInvFact[10];
  p = p * t - kInvFact[8];
  p = p * t + kInvFact[6];
  p = p * t - kInvFact[4];  // cos r = 1 − t/2 + t²·(1/4! − t/6! + ...) = 1 − t/2 − t²·p
  const double half_t = 0.5 * t;
  const double w = 1.0 - half_t;
  // (1 − w) − t/2 is the rounding error of w, exact (Sterbenz); added back with the tail.
  return w + (((1.0 - w) - half_t) - t * t * p);
}

}  // namespace

float exp_f32(float x) {
  if (x != x) return x + x;
  if (x > 89.0f) return std::numeric_limits<float>::infinity();
  if (x < -104.0f) return 0.0f;
  // x = n·ln2 + r, |r| ≤ ln2/2 (+ the product's rounding); n·kExpF32Ln2Hi is exact (9-bit
  // constant times |n| ≤ 151), and so is x − n·kExpF32Ln2Hi (Sterbenz, or n = 0).
  const float n = floor_small(x * kExpF32Log2e + 0.5f);
  float r = x - n * kExpF32Ln2Hi;
  r = r - n * kExpF32Ln2Lo;
  const float r2 = r * r;
  float y = kExpF32Poly[0];
  for (int i = 1; i < 6; ++i) y = y * r + kExpF32Poly[i];
  y = y * r2 + r + 1.0f;
  // y·2^n: the first factor keeps y·2^k exact and normal, the second rounds once (into the
  // subnormals below 2^−126, to ±inf above the float range).
  const int k = static_cast<int>(n);
  if (k > 127) return y * pow2_f32(127) * pow2_f32(k - 127);
  if (k < -126) return y * pow2_f32(k + 64) * pow2_f32(-64);
  return y * pow2_f32(k);
}

float fma_f32(float a, float b, float c) {
  const double p = static_cast<double>(a) * static_cast<double>(b);  // exact (24 + 24 bits)
  const double cd = static_cast<double>(c);
  double s = p + cd;
  if (s - s != 0.0) return static_cast<float>(s);  // ±inf or NaN
  // e = (p + c) − s exactly (TwoSum); when it is not 0, round s to odd: a double with an
  // odd last bit stands for "strictly between its neighbours", so the float rounding of it
  // is the float rounding of p + c (53 ≥ 24 + 2 bits).
  const double bv = s - p;
  const double e = (p - (s - bv)) + (cd - bv);
  if (e != 0.0) {
    uint64_t bits;
    std::memcpy(&bits, &s, sizeof(bits));
    if ((bits & 1) == 0) {
      bits = (e > 0) == (s > 0) ? bits + 1 : bits - 1;
      std::memcpy(&s, &bits, sizeof(bits));
    }
  }
  return static_cast<float>(s);
}

double exp_f64(double x) {
  if (x != x) return x + x;
  if (x > 709.8) return kInf;
  if (x < -745.2) return 0.0;
  const double n = floor_small(x * kInvLn2 + 0.5);
  // x − n·kLn2Hi is exact (n·kLn2Hi exact, Sterbenz); |r| ≤ ln2/2 + 2^−40.
  const double r = (x - n * kLn2Hi) - n * kLn2Lo;
  // e^r = 1 + r + r²·(1/2! + r/3! + ... + r^11/13!); the first term left out, r^14/14!,
  // is below 2^−62.
  double p = kInvFact[13];
  for (int k = 12; k >= 2; --k) p = p * r + kInvFact[k];
  const double y = 1.0 + (r + r * r * p);
  const int64_t k = static_cast<int64_t>(n);
  if (k > 1023) return y * pow2_f64(1023) * pow2_f64(k - 1023);
  if (k < -1022) return y * pow2_f64(k + 600) * pow2_f64(-600);
  return y * pow2_f64(k);
}

double log_f64(double x) {
  if (x != x) return x + x;
  if (x < 0) return kNaN;
  if (x == 0) return -kInf;
  if (x == kInf) return x;
  int64_t k = 0;
  if (x < 0x1p-1022) {
    x *= 0x1p54;  // subnormal: make it normal (exact)
    k = -54;
  }
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  k += static_cast<int64_t>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52);
  double m;
  std::memcpy(&m, &bits, sizeof(m));  // x = m·2^k, m in [1, 2)
  if (m > 0x1.6a09e667f3bcdp+0) {     // √2
    m *= 0.5;
    k += 1;
  }
  // log m = 2·atanh(s), s = f/(2 + f), f = m − 1 (exact), |s| ≤ 0.1716:
  //   log m = 2s + s·Q,  Q = 2s²/3 + 2s⁴/5 + ... + 2s²²/23  (next term < 2^−60 of 2s)
  // and, since 2s = f − s·f, log m = f − s·(f − Q): s's rounding then only touches the
  // correction s·(f − Q) ≈ f²/2, not the leading f.
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double t = s * s;
  double q = 2.0 / 23;
  for (int j = 21; j >= 3; j -= 2) q = q * t + 2.0 / j;
  q = q * t;
  const double log_m = f - s * (f - q);
  const double kd = static_cast<double>(k);
  return kd * kLn2Hi + (log_m + kd * kLn2Lo);
}

double log1p_f64(double x) {
  if (x != x) return x + x;
  const double u = 1.0 + x;
  if (u == 1.0) return x;  // |x| < 2^−53: log(1 + x) = x to within x²/2
  if (u == kInf) return u;
  // u = 1 + x + δ; log(u)·x/(u − 1) removes δ to first order (u − 1 is exact).
  return log_f64(u) * (x / (u - 1.0));
}

void cos_sin_f64(double x, double* cos_x, double* sin_x) {
  if (!(x < 0x1p60 && x > -0x1p60)) {  // ±inf, NaN, and beyond the reduction's range
    *cos_x = *sin_x = kNaN;
    return;
  }
  // n = nearest(x·2/π); from 2^52 on every double is an integer.
  const double v = x * kTwoOverPi;
  const double n = v < 0x1p52 && v > -0x1p52 ? floor_small(v + 0.5) : v;
  const double r = ((x - n * kPio2A) - n * kPio2B) - n * kPio2C;
  const double s = sin_kernel(r), c = cos_kernel(r);
  switch (static_cast<int64_t>(n) & 3) {
    case 0: *cos_x = c, *sin_x = s; break;
    case 1: *cos_x = -s, *sin_x = c; break;
    case 2: *cos_x = -c, *sin_x = -s; break;
    default: *cos_x = s, *sin_x = -c; break;
  }
}

double pow_f64(double base, double e) {
  if (e == 0.0) return 1.0;
  return exp_f64(e * log_f64(base));
}

}  // namespace moetier::math
