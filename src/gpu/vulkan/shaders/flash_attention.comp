#version 450
// Flash attention: the causal softmax attention of attention.comp (same inputs, same
// AttentionDispatch contract), computed in one sweep over the keys with an online softmax
// instead of a score scratch, in plain f32 (the exact kernel sums in float-float). Launcher
// and the choice of the constants: src/gpu/vulkan/vk_ops_attention.cpp.
//
// Work split. A workgroup owns
//   * one KV head g (gl_WorkGroupID.y),
//   * a block of NQ = WG / LANES "query vectors" (gl_WorkGroupID.x): the pairs (row r, query
//     head h of KV head g) of one sequence, flattened as v = r · GROUP + (h − g · GROUP)
//     with GROUP = n_head / n_head_kv, so the whole GQA group of a row (and usually several
//     rows) shares every K/V tile it loads;
//   * one chunk of the keys (gl_WorkGroupID.z): keys [z · chunk_keys, (z + 1) · chunk_keys),
//     cut at the last key its rows may see (split-K; one chunk when not splitting).
// Each query vector has LANES consecutive lanes of one subgroup; lane l holds the vec4s
// l, l + LANES, ... of the query (scaled), of the output accumulator, and reads the same
// vec4s of each key/value from shared memory (LANES consecutive vec4s per vector: no bank
// conflicts, and vectors of the same keys broadcast).
//
// Per tile of TILE keys: all invocations load K and V (dequantized to f32, zero past the
// chunk) into shared memory; each lane forms its partial dot products with the TILE keys,
// subgroupShuffleXor sums them over the LANES lanes (a butterfly: every lane ends with the
// same bits), scores past the row's causal limit are masked, and the online softmax updates
// m (running max, in log2 units: the query carries scale · log2 e so exp2 suffices), l (the
// sum of exp2(s − m)) and o (Σ exp2(s − m) · v), rescaled by exp2(m_old − m_new).
//
// Output. FA_SPLIT off: o / l (· sigmoid(gate)) into out, one chunk covers all keys.
// FA_SPLIT on: the unnormalized o and (m, l) of this chunk into the partials;
// flash_attention_reduce.comp merges the chunks. A row that sees no key of the chunk writes
// (m, l, o) = (kNoScore, 0, 0); the reduce only reads chunks a row can see.
//
// Loop iterations per invocation (lavapipe's 65,535 limit, vk_ops.h): the tile loop runs
// chunk_keys / TILE times; all other loops have trip counts fixed by the specialization
// constants, and those over registers (q, o, scores) are unrolled, so the arrays stay in
// registers. The launcher bounds chunk_keys by the count with nothing unrolled.
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#include "common.glsl"

layout(local_size_x_id = 0) in;                 // WG: a multiple of LANES and of the subgroup size
#include "subgroup.glsl"  // after the workgroup size: the emulation sizes its scratch by it
layout(constant_id = 1) const uint HD = 128;    // head dim: 64, 128 or 256
layout(constant_id = 2) const uint LANES = 8;   // lanes per query vector: power of 2, ≤ subgroup size, HD / 4 / LANES ≥ 1
layout(constant_id = 3) const uint TILE = 16;   // keys per shared-memory tile
layout(constant_id = 4) const uint K_TYPE = 1;  // cache types: 0 f32, 1 f16, 2 q8_0, 3 q4_0
layout(constant_id = 5) const uint V_TYPE = 1;

const uint WG = gl_WorkGroupSize.x;
const uint HV = HD / 4u;                         // vec4s per head vector
const uint PER_LANE = HV / LANES;                // vec4s per lane
const uint NQ = WG / LANES;                      // query vectors per workgroup
const uint TILE_VEC4 = TILE * HV;                // vec4s of one K (or V) tile
const uint LOAD_STEPS = (TILE_VEC4 + WG - 1u) / WG;
const float kNoScore = -3.0e38;                  // "no key yet": finite, so kNoScore − kNoScore = 0

layout(push_constant) uniform Push {
  uint n_head;
  uint group;          // query heads per KV head (n_head / n_head_kv)
  uint n_rows;         // query rows of this dispatch
  uint pos0;           // position of row 0: row r sees keys 0 .. pos0 + r
  uint row_base;       // q, out and gate rows start at this micro-batch row
  uint k_row_bytes, v_row_bytes;  // bytes of one cache row (all KV heads)
  uint chunk_keys;     // keys per chunk (a multiple of TILE)
  float q_scale;       // scale · log2(e)
  uint has_gate;
  uint gate_row_stride, gate_head_stride, gate_offset;  // floats, in the gate buffer
} p;

layout(std430, binding = 0) readonly buffer Q { vec4 q4[]; };        // [row][n_head][HD]
// Cache rows [pos][n_head_kv · HD] of K_TYPE / V_TYPE: read as words (packed types) or as
// whole vec4s (f32, whose rows and heads are 16-byte aligned).
layout(std430, binding = 1) readonly buffer KW { uint k_words[]; };
layout(std430, binding = 1) readonly buffer KU4 { uvec4 k_u4[]; };
layout(std430, binding = 2) readonly buffer VW { uint v_words[]; };
layout(std430, binding = 2) readonly buffer VU4 { uvec4 v_u4[]; };
#ifdef FA_SPLIT
layout(std430, binding = 3) writeonly buffer PO { vec4 part_o[]; };  // [chunk][row][n_head][HD]
layout(std430, binding = 4) writeonly buffer PML { vec2 part_ml[]; }; // [chunk][row][n_head]: (m, l)
#else
layout(std430, binding = 3) writeonly buffer O { vec4 out4[]; };     // [row][n_head][HD]
layout(std430, binding = 4) readonly buffer G { float gate[]; };
#endif

// The only shared memory: 2 · TILE · HD · 4 bytes (hd 256, 16 keys: 32 KiB, lavapipe's all).
shared vec4 s_k[TILE_VEC4];  // [key][HV]
shared vec4 s_v[TILE_VEC4];

// The 32-bit word at a 2-byte aligned byte offset (q8_0 / q4_0 blocks are 34 / 18 bytes).
#define WORD_AT2(buf, byte_) \
  ((((byte_) & 2u) == 0u) ? buf[(byte_) >> 2u] : ((buf[(byte_) >> 2u] >> 16u) | (buf[((byte_) >> 2u) + 1u] << 16u)))

// Elements e .. e + 3 (e a multiple of 4) of cache row `pos`, as f32.
#define CACHE_VEC4(name, words, u4, TYPE, ROW_BYTES)                                       \
  vec4 name(uint pos, uint e) {                                                            \
    const uint row = pos * ROW_BYTES;                                                      \
    if (TYPE == 0u) return uintBitsToFloat(u4[(row >> 4u) + (e >> 2u)]);                   \
    if (TYPE == 1u) {                                                                      \
      const uint w = (row >> 2u) + (e >> 1u);                                              \
      return vec4(unpackHalf2x16(words[w]), unpackHalf2x16(words[w + 1u]));                \
    }                                                                                      \
    const uint j = e % 32u;                                                                \
    if (TYPE == 2u) {                                                                      \
      const uint blk = row + (e / 32u) * 34u;                                              \
      const float d = unpackHalf2x16(WORD_AT2(words, blk)).x;                              \
      const uint qs = WORD_AT2(words, blk + 2u + j);                                       \
      return vec4(sext8(qs & 0xFFu), sext8((qs >> 8u) & 0xFFu), sext8((qs >> 16u) & 0xFFu), \
                  sext8(qs >> 24u)) * d;                                                   \
    }                                                                                      \
    const uint blk = row + (e / 32u) * 18u;                                                \
    const float d = unpackHalf2x16(WORD_AT2(words, blk)).x;                                \
    const uint qs = WORD_AT2(words, blk + 2u + (j % 16u)) >> (j < 16u ? 0u : 4u);          \
    return (vec4(qs & 0xFu, (qs >> 8u) & 0xFu, (qs >> 16u) & 0xFu, (qs >> 24u) & 0xFu) - 8.0) * d; \
  }
CACHE_VEC4(k_vec4, k_words, k_u4, K_TYPE, p.k_row_bytes)
CACHE_VEC4(v_vec4, v_words, v_u4, V_TYPE, p.v_row_bytes)

void main() {
  // Lane numbering from the subgroup, so a query vector's LANES lanes are one aligned group
  // of a subgroup whatever order the device lays subgroups out in.
  const uint flat_id = SG_ID * SG_SIZE + SG_INVOCATION;
  const uint qv = flat_id / LANES, lane = flat_id % LANES;
  const uint tid = gl_LocalInvocationIndex;
  const uint kv_head = gl_WorkGroupID.y;
  const uint first_vec = gl_WorkGroupID.x * NQ;
  const uint vec = first_vec + qv;
  const uint r = vec / p.group;
  const uint h = kv_head * p.group + vec % p.group;
  const bool has_row = r < p.n_rows;

  // The chunk, cut at the last key any row of the block sees (uniform over the workgroup).
  const uint last_row = min(p.n_rows - 1u, (first_vec + NQ - 1u) / p.group);
  const uint k_begin = gl_WorkGroupID.z * p.chunk_keys;
  const uint k_end = min(k_begin + p.chunk_keys, p.pos0 + last_row + 1u);
  // No row of the block sees a key of this chunk (the reduce does not read it either).
  if (k_begin >= k_end) return;
  // Keys below `visible` count for this vector (none for an idle one).
  const uint visible = has_row ? min(k_end, p.pos0 + r + 1u) : 0u;
  const uint head_elem = kv_head * HD;  // first element of KV head g in a cache row

  vec4 qr[PER_LANE], acc[PER_LANE];
  const uint q_base = has_row ? ((p.row_base + r) * p.n_head + h) * HV : 0u;
  [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) {
    qr[i] = has_row ? q4[q_base + lane + LANES * i] * p.q_scale : vec4(0.0);
    acc[i] = vec4(0.0);
  }
  float m = kNoScore, l = 0.0;

  [[dont_unroll]] for (uint t0 = k_begin; t0 < k_end; t0 += TILE) {
    barrier();  // the previous tile's readers are done
    // K and V of the tile, consecutive invocations on consecutive vec4s of a key (coalesced).
    // Not unrolled on purpose: copies of the cache decoding would only cost compile time.
    for (uint step = 0u; step < LOAD_STEPS; ++step) {
      const uint u = step * WG + tid;
      if (TILE_VEC4 % WG == 0u || u < TILE_VEC4) {
        const uint key = t0 + u / HV, e = head_elem + 4u * (u % HV);
        const bool in_chunk = key < k_end;
        s_k[u] = in_chunk ? k_vec4(key, e) : vec4(0.0);
        s_v[u] = in_chunk ? v_vec4(key, e) : vec4(0.0);
      }
    }
    barrier();

    float s[TILE];
    [[unroll]] for (uint j = 0u; j < TILE; ++j) {
      float dot_part = 0.0;
      [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) dot_part += dot(qr[i], s_k[j * HV + lane + LANES * i]);
      s[j] = dot_part;
    }
    [[unroll]] for (uint j = 0u; j < TILE; ++j) {
      [[unroll]] for (uint mask = 1u; mask < LANES; mask <<= 1u) s[j] += sg_shuffle_xor(s[j], mask);
    }
    float m_new = m;
    [[unroll]] for (uint j = 0u; j < TILE; ++j) {
      s[j] = t0 + j < visible ? s[j] : kNoScore;
      m_new = max(m_new, s[j]);
    }
    const float rescale = exp2(m - m_new);
    l *= rescale;
    [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) acc[i] *= rescale;
    [[unroll]] for (uint j = 0u; j < TILE; ++j) {
      const float w = t0 + j < visible ? exp2(s[j] - m_new) : 0.0;
      l += w;
      [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) acc[i] += w * s_v[j * HV + lane + LANES * i];
    }
    m = m_new;
  }

  if (!has_row) return;
#ifdef FA_SPLIT
  const uint slot = (gl_WorkGroupID.z * p.n_rows + r) * p.n_head + h;
  [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) part_o[slot * HV + lane + LANES * i] = acc[i];
  if (lane == 0u) part_ml[slot] = vec2(m, l);
#else
  const float inv_l = 1.0 / l;
  const uint g_base = p.gate_offset + (p.row_base + r) * p.gate_row_stride + h * p.gate_head_stride;
  [[unroll]] for (uint i = 0u; i < PER_LANE; ++i) {
    const uint c = lane + LANES * i;
    vec4 o = acc[i] * inv_l;
    if (p.has_gate != 0u) {
      const uint gi = g_base + 4u * c;
      o *= vec4(sigmoid(gate[gi]), sigmoid(gate[gi + 1u]), sigmoid(gate[gi + 2u]), sigmoid(gate[gi + 3u]));
    }
    out4[q_base + c] = o;
  }
#endif
}
