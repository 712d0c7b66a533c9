// The transcendental functions of the forward pass and the sampler, with results defined by
// this code alone: range reduction and polynomials written out in +, −, ×, / and exact
// operations (bit moves, float↔int conversions of integral values), compiled without FMA
// contraction (math.cpp). The C library's exp, log, sin, cos, pow and fmaf differ between
// C libraries (glibc's and MinGW's give different bits for the same input), so a build for
// another OS would compute different logits; these give the same bits on every x86-64 build.
// Accuracy (max error in ulp of the result, from tests/unit/math_test.cpp against long
// double) and the reasoning behind it: docs/numerics.md, "Elementary functions".
#pragma once

namespace moetier::math {

// e^x in float, < 1 ulp (0.95 measured); +inf above 88.72, 0 below −103.98 (subnormal
// results rounded once), NaN for NaN.
float exp_f32(float x);

// a·b + c rounded once to float (correctly rounded, every input): the product is exact in
// double, the sum is rounded to odd in double and then to float, which rounds once.
float fma_f32(float a, float b, float c);

// e^x in double, < 1 ulp; +inf above 709.79, 0 below −745.2 (subnormal results rounded once).
double exp_f64(double x);
// log(x) in double, ≤ 1.5 ulp for x > 0 (subnormals included); −inf at 0, NaN below 0, +inf at +inf.
double log_f64(double x);
// log(1 + x) in double for x ≥ −1, ≤ 3 ulp.
double log1p_f64(double x);
// cos(x) and sin(x) in double, ≤ 2 ulp for |x| ≤ 4 and ≤ 3 ulp for |x| < 2^22 (Cody–Waite reduction by π/2 in three
// parts); larger |x| stay defined but lose accuracy with the reduction; NaN from 2^60 on.
void cos_sin_f64(double x, double* cos_x, double* sin_x);
// base^e for base > 0 as exp(e · log(base)): relative error ≤ (|e·log(base)| + 2) ulp.
double pow_f64(double base, double e);

// The polynomial for e^r on |r| ≤ ln2/2 shared by exp_f32 and the vector exp of
// the flash-attention kernels (cpu/flash_attention_impl.h), so both give the same bits:
//   e^r ≈ 1 + r + r²·(c0·r⁵ + c1·r⁴ + c2·r³ + c3·r² + c4·r + c5), Horner from c0;
// x = n·ln2 + r with ln2 split as kLn2Hi + kLn2Lo (kLn2Hi has 9 bits, so n·kLn2Hi is exact).
inline constexpr float kExpF32Log2e = 1.44269504088896341f;
inline constexpr float kExpF32Ln2Hi = 0.693359375f;
inline constexpr float kExpF32Ln2Lo = -2.12194440e-4f;
inline constexpr float kExpF32Poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace moetier::math
