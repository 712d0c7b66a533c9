// Shared helpers for the compute shaders. Buffers are declared as uint words and read byte
// by byte where a block format is not word-aligned (Q8_0 is 34 bytes, Q6_K 210), so no
// shader needs the 8- or 16-bit storage features and every Vulkan 1.1 device runs them.
// Conversions between f16/bf16 and f32 work on the bit patterns, exactly like the CPU's
// (src/tensor/fp16.cpp), so both backends see the same numbers.

#extension GL_EXT_control_flow_attributes : enable

// Byte `o` of a uint-word buffer `buf`.
#define BYTE_AT(buf, o) (((buf)[(o) >> 2u] >> (((o) & 3u) << 3u)) & 0xFFu)
// Little-endian u16 at any byte offset.
#define U16_AT(buf, o) (BYTE_AT(buf, o) | (BYTE_AT(buf, (o) + 1u) << 8u))
// Little-endian u32 at any byte offset.
#define U32_AT(buf, o) (U16_AT(buf, o) | (U16_AT(buf, (o) + 2u) << 16u))

int sext8(uint b) { return int(b << 24u) >> 24; }
int sext16(uint h) { return int(h << 16u) >> 16; }

// The linear workgroup index of a 2-D dispatch (dispatches wider than 65535 groups use y).
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

float f16_to_f32(uint h) {
  const uint sign = (h & 0x8000u) << 16u;
  const uint e = (h >> 10u) & 0x1Fu;
  const uint m = h & 0x3FFu;
  if (e == 0x1Fu) return uintBitsToFloat(sign | 0x7F800000u | (m << 13u) | (m != 0u ? 0x00400000u : 0u));
  if (e != 0u) return uintBitsToFloat(sign | ((e + 112u) << 23u) | (m << 13u));
  // Zero or subnormal half: m · 2^-24, exact in f32.
  const float v = float(m) * 5.9604644775390625e-8;
  return sign != 0u ? -v : v;
}

// Shift right by s (1..31) rounding to nearest, ties to even.
uint shift_round_even(uint v, uint s) {
  const uint kept = v >> s;
  const uint dropped = v & ((1u << s) - 1u);
  const uint half_ = 1u << (s - 1u);
  return kept + ((dropped > half_ || (dropped == half_ && (kept & 1u) != 0u)) ? 1u : 0u);
}

uint f32_to_f16(float f) {
  const uint bits = floatBitsToUint(f);
  const uint sign = (bits & 0x80000000u) >> 16u;
  const uint mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | 0x7E00u;
  if (mag >= 0x477FF000u) return sign | 0x7C00u;
  const int e = int(mag >> 23u);
  if (e - 112 >= 1) return sign | shift_round_even(mag - (112u << 23u), 13u);
  if (e == 0) return sign;
  const uint significand = (mag & 0x7FFFFFu) | 0x800000u;
  const int s = 126 - e;
  if (s > 24) return sign;
  return sign | shift_round_even(significand, uint(s));
}

float bf16_to_f32(uint h) { return uintBitsToFloat(h << 16u); }

uint f32_to_bf16(float f) {
  const uint bits = floatBitsToUint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (bits >> 16u) | 0x0040u;
  return (bits + 0x7FFFu + ((bits >> 16u) & 1u)) >> 16u;
}

// Exact products and sums carried in two floats (Dekker / Knuth), with no fused
// operations: Vulkan does not promise that fma() is fused.
vec2 two_sum(float a, float b) {
  precise float s = a + b;
  precise float bb = s - a;
  precise float err = (a - (s - bb)) + (b - bb);
  return vec2(s, err);
}
vec2 split_f(float a) {
  precise float c = 4097.0 * a;
  precise float hi = c - (c - a);
  precise float lo = a - hi;
  return vec2(hi, lo);
}
vec2 two_prod(float a, float b) {
  precise float prod = a * b;
  const vec2 sa = split_f(a), sb = split_f(b);
  precise float err = ((sa.x * sb.x - prod) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y;
  return vec2(prod, err);
}

// a / b rounded to nearest like the CPU's division, although Vulkan lets the hardware be
// off by 2.5 ulp: the residual a − q·b is computed exactly and corrects q once.
float div_rn(float a, float b) {
  precise float q = a / b;
  const vec2 qb = two_prod(q, b);
  precise float r = (a - qb.x) - qb.y;
  precise float q2 = q + r / b;
  return q2;
}

float silu(float x) { return x / (1.0 + exp(-x)); }
float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
