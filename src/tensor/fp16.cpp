// IEEE binary16 and bfloat16 <-> binary32, done on the bit patterns so the result does not
// depend on the compiler, the FPU's rounding mode or the presence of F16C.
//
// Behaviour (identical to ggml's scalar conversions, checked over all 2^32 floats):
//   f32 -> f16: round to nearest, ties to even; overflow (|x| >= 65520) gives +-inf;
//               results below 2^-14 become subnormals; every NaN becomes sign | 0x7E00.
//   f16 -> f32: exact; a NaN keeps its payload and comes back quiet.
//   f32 -> bf16: round to nearest even on the top 16 bits; a NaN keeps its top bits and is
//               forced quiet (bit 6 of the half set).
//   bf16 -> f32: exact (the 16 bits become the high half of the float).
#include "tensor/fp16.h"

#include <bit>

namespace moetier {
namespace {

constexpr uint32_t kF32SignMask = 0x80000000u;
constexpr uint32_t kF32AbsMask = 0x7FFFFFFFu;
constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32QuietBit = 0x00400000u;
constexpr int kF32MantissaBits = 23;
constexpr int kF16MantissaBits = 10;
constexpr int kF32ExpBias = 127;
constexpr int kF16ExpBias = 15;

// Shift `value` right by `shift` bits (1..31), rounding to nearest with ties to even.
uint32_t shift_right_round_even(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const bool round_up = dropped > half || (dropped == half && (kept & 1u));
  return kept + (round_up ? 1u : 0u);
}

}  // namespace

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> kF16MantissaBits) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {
    // Inf or NaN: widen the payload; a NaN is returned quiet (what the hardware does too).
    bits = kF32Inf | (mantissa << (kF32MantissaBits - kF16MantissaBits));
    if (mantissa != 0) bits |= kF32QuietBit;
  } else if (exponent != 0) {
    const uint32_t f32_exponent = exponent - kF16ExpBias + kF32ExpBias;
    bits = (f32_exponent << kF32MantissaBits) | (mantissa << (kF32MantissaBits - kF16MantissaBits));
  } else if (mantissa == 0) {
    bits = 0;  // +-0
  } else {
    // Subnormal half: value = mantissa * 2^-24. Normalise it: move the leading 1 to bit 10.
    int f32_exponent = 1 - kF16ExpBias + kF32ExpBias;  // exponent of 2^-14
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --f32_exponent;
    }
    mantissa &= 0x3FFu;
    bits = (static_cast<uint32_t>(f32_exponent) << kF32MantissaBits) |
           (mantissa << (kF32MantissaBits - kF16MantissaBits));
  }
  return std::bit_cast<float>(sign | bits);
}

uint16_t f32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits & kF32SignMask) >> 16);
  const uint32_t magnitude = bits & kF32AbsMask;

  if (magnitude > kF32Inf) return sign | 0x7E00u;  // NaN: canonical quiet NaN
  // 65520 = 65504 + half an ulp; ties go to the even neighbour, which is 2^16 = inf.
  constexpr uint32_t kF32Bits65520 = 0x477FF000u;
  if (magnitude >= kF32Bits65520) return sign | 0x7C00u;

  const int exponent = static_cast<int>(magnitude >> kF32MantissaBits);  // biased f32 exponent
  const int half_exponent = exponent - kF32ExpBias + kF16ExpBias;
  if (half_exponent >= 1) {
    // Normal half. Keep the top 10 mantissa bits, round on the 13 dropped ones; a carry out of
    // the mantissa correctly bumps the exponent (the inf case was handled above).
    const uint32_t rebased = magnitude - (static_cast<uint32_t>(kF32ExpBias - kF16ExpBias) << kF32MantissaBits);
    return sign | static_cast<uint16_t>(shift_right_round_even(rebased, kF32MantissaBits - kF16MantissaBits));
  }
  // Subnormal (or zero) half: the result counts units of 2^-24. With the implicit bit m is the
  // f32 significand (value = m * 2^(exponent - 150)), so the count is m * 2^(exponent - 126).
  if (exponent == 0) return sign;  // f32 subnormal: far below half the smallest half subnormal
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const int shift = 126 - exponent;  // >= 14 here, since half_exponent <= 0 means exponent <= 112
  if (shift > 24) return sign;       // significand < 2^24, so the count is < 0.5: rounds to 0
  // A result of 0x400 is the smallest normal half, which is the right encoding as well.
  return sign | static_cast<uint16_t>(shift_right_round_even(significand, shift));
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t f32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & kF32AbsMask) > kF32Inf) {
    constexpr uint16_t kBf16QuietBit = 0x0040u;
    return static_cast<uint16_t>(bits >> 16) | kBf16QuietBit;
  }
  // Round to nearest even on the low 16 bits. Adding 0x7FFF (+1 when the kept part is odd)
  // carries into the kept half exactly when the dropped half is above (or at, for odd) 0x8000;
  // a carry out of the mantissa bumps the exponent, up to inf, as rounding should.
  const uint32_t odd = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + odd) >> 16);
}

}  // namespace moetier
