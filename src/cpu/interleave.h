// The interleaved row layout: weight rows repacked once at load so that the tile kernels
// (cpu/dot.h, TileDotFn) read them as they are, instead of repacking kTileRows rows on
// every call. A MoE prompt gives each routed expert only ~16 tokens of a 512-token batch,
// so that per-call repack cost about half as much as the products it fed.
//
// Layout (kInterleaved8), for Q8_0, the K-quants and IQ4_XS: the rows of a matrix go in
// groups of kTileRows = 8, and a group takes exactly the bytes of its 8 rows (a row-major
// offset of a group's first row is still the group's offset). Inside a group, (super-)block b
// of the 8 rows is one run of 8 · B bytes (B = the block's size; H = the head: 2 for Q8_0,
// whose block starts with its f16 scale, else 0):
//   head:   for row i in [0, 8): the H bytes [0, H) of row i's block b (Q8_0: 8 scales, 16 bytes)
//   words:  for w in [0, (B-H)/4): for row i in [0, 8): the 4 bytes [H + 4w, H + 4w + 4) of row i's block b
//   tail:   for row i in [0, 8): the (B-H) mod 4 bytes after the words of row i's block b (Q6_K's d)
// so one 32-byte load of word w holds, in 32-bit lane i, row i's bytes of that word: the
// lanes of the tile kernels' integer dots are the rows, with no transpose. The codes'
// per-byte decoding (nibble shifts, masks, the IQ4_XS grid lookup) acts within a byte, so it
// decodes the interleaved words exactly as it decodes a row's own bytes.
//
// A batch of a few tokens (a speculative verify, parallel slots) then reads each weight word
// once for all its tokens with no per-call packing, which is what keeps its cost near one
// token's (docs/small-batches.md).
//
// Nothing but the bytes' order changes: interleave_group and deinterleave_group are exact
// inverses (tested), and the x8 tile kernels are bit-identical to the scalar reference on
// the original rows.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace moetier::cpu {

enum class RowLayout : uint8_t {
  kRows,          // the file's layout: row after row
  kInterleaved8,  // groups of 8 rows interleaved by 4-byte words, per super-block (above)
};

// Rows of this many go into one interleaved group (= kTileRows, cpu/dot.h).
inline constexpr int kInterleaveRows = 8;

// Whether the interleaved layout is defined for a weight type.
bool interleavable(DType type);

// One group: src holds kInterleaveRows rows of n_in elements, row after row; dst receives
// the interleaved group (the same number of bytes). src and dst must not overlap.
void interleave_group(DType type, int64_t n_in, const uint8_t* src, uint8_t* dst);
// The inverse: an interleaved group back to row after row.
void deinterleave_group(DType type, int64_t n_in, const uint8_t* src, uint8_t* dst);

// A whole matrix stack in place: n_rows rows (a multiple of kInterleaveRows) of n_in
// elements at data, group by group on n_threads threads (each with one group of scratch).
void interleave_in_place(DType type, int64_t n_in, int64_t n_rows, uint8_t* data, int n_threads);

}  // namespace moetier::cpu
