// The subgroup operations of the fast kernels, native or emulated. Shaders use these names
// only, never the gl_Subgroup* built-ins or subgroup*() directly:
//   SG_SIZE, SG_INVOCATION, SG_ID, SG_COUNT   subgroup width, lane, subgroup id, subgroups
//   sg_elect(), sg_add(float), sg_max(float), sg_min(uint), sg_shuffle_xor(float, mask)
// Include it after the shader's `layout(local_size_...) in;` (the emulation's scratch is
// sized by gl_WorkGroupSize, which is (1, 1, 1) before that declaration).
// Native (the default): the GL_KHR_shader_subgroup built-ins, so the SPIR-V is what the
// built-ins alone give. EMULATED_SUBGROUP_SIZE = W (variants "<name>_sgW", shaders.cmake):
// the workgroup is cut into subgroups of W consecutive invocations (gl_LocalInvocationIndex
// / W), and every operation goes through one shared word per invocation with barriers, so
// that a device with other subgroups (lavapipe: 8 or 16) runs the code paths of a W-wide
// device (the launcher picks sizes from DeviceInfo, which then says W). Contract for the
// emulated operations: call them in workgroup-uniform control flow (they contain barriers);
// lanes past the end of the workgroup (a last, partial subgroup) count as the operation's
// identity, as inactive lanes do natively. Cost: 2 barriers per exchange, log2(W)
// exchanges per reduction: a test mode, not a fast path.
#ifndef SUBGROUP_GLSL
#define SUBGROUP_GLSL

#ifdef EMULATED_SUBGROUP_SIZE
const uint SG_SIZE = EMULATED_SUBGROUP_SIZE;
const uint SG_WG = gl_WorkGroupSize.x * gl_WorkGroupSize.y * gl_WorkGroupSize.z;
#define SG_INVOCATION (gl_LocalInvocationIndex % SG_SIZE)
#define SG_ID (gl_LocalInvocationIndex / SG_SIZE)
#define SG_COUNT ((SG_WG + SG_SIZE - 1u) / SG_SIZE)

shared uint sg_scratch[SG_WG];  // one word per invocation

bool sg_elect() { return SG_INVOCATION == 0u; }

// The word of invocation (this one XOR mask), `outside` when that is past the workgroup.
// mask < SG_SIZE keeps the partner in the same emulated subgroup.
uint sg_exchange(uint x, uint mask, uint outside) {
  barrier();  // earlier readers of the scratch are done
  sg_scratch[gl_LocalInvocationIndex] = x;
  barrier();
  const uint other = gl_LocalInvocationIndex ^ mask;
  return other < SG_WG ? sg_scratch[other] : outside;
}

float sg_shuffle_xor(float x, uint mask) { return uintBitsToFloat(sg_exchange(floatBitsToUint(x), mask, floatBitsToUint(x))); }

// Butterflies: every lane ends with the same bits (each step combines the same two values
// in both partners, and + and max are commutative).
float sg_add(float x) {
  [[unroll]] for (uint m = 1u; m < SG_SIZE; m <<= 1u) x += uintBitsToFloat(sg_exchange(floatBitsToUint(x), m, 0u));
  return x;
}
float sg_max(float x) {
  const uint lowest = 0xFF800000u;  // -inf
  [[unroll]] for (uint m = 1u; m < SG_SIZE; m <<= 1u) x = max(x, uintBitsToFloat(sg_exchange(floatBitsToUint(x), m, lowest)));
  return x;
}
uint sg_min(uint x) {
  [[unroll]] for (uint m = 1u; m < SG_SIZE; m <<= 1u) x = min(x, sg_exchange(x, m, 0xFFFFFFFFu));
  return x;
}

#else
#define SG_SIZE gl_SubgroupSize
#define SG_INVOCATION gl_SubgroupInvocationID
#define SG_ID gl_SubgroupID
#define SG_COUNT gl_NumSubgroups
#define sg_elect subgroupElect
#define sg_add subgroupAdd
#define sg_max subgroupMax
#define sg_min subgroupMin
#define sg_shuffle_xor subgroupShuffleXor
#endif

#endif  // SUBGROUP_GLSL
