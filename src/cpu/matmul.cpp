#include "cpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "cpu/dot.h"
#include "tensor/blocks.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"
#include "tensor/types/activation_quant.h"

namespace moetier::cpu {

namespace {

void quantize_row(DType type, const float* x, uint8_t* out, int64_t n) {
  switch (type) {
    case DType::F32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16: {
      f32_to_fp16_row(x, reinterpret_cast<uint16_t*>(out), n);
      return;
    }
    case DType::BF16: {
      auto* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(x[i]);
      return;
    }
    case DType::Q8_0:
      types::quantize_row_q8_0_activations(x, reinterpret_cast<BlockQ8_0*>(out), n);
      return;
    case DType::Q8_K:
      type_ops(DType::Q8_K)->quantize_row(x, out, n);
      return;
    default:
      CHECK_MSG(false, "no activation quantizer for {}", dtype_name(type));
  }
}

// Prompt matmuls with a tile kernel (DotKernel::tile): each activation row's block terms
// once, then groups of kTileRows output rows, each against all tokens (the packed weights
// of a group, ~n_in/32 · 288 bytes, stay in L1 while the activations stream from L2/L3).
// Bit-identical to the per-row kernels, so the choice never changes a result.
void matmul_tiled(const DotKernel& kernel, const WeightMatrix& w, int64_t mat, const QuantizedActivations& xq, float* y,
                  ThreadPool& pool) {
  const int64_t n_out = w.n_out, n_tokens = xq.n_rows, n_blocks = w.n_in / kQK8_0;
  std::vector<Q8_0ActBlock> act_blocks;
  if (xq.type == DType::Q8_0) {
    act_blocks.resize(static_cast<size_t>(n_tokens * n_blocks));
    pool.parallel_for(n_tokens, 16, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t) dot::q8_0_act_blocks(w.n_in, xq.row(t), act_blocks.data() + t * n_blocks);
    });
  }
  const int64_t n_groups = (n_out + kTileRows - 1) / kTileRows;
  pool.parallel_for_balanced(n_groups, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t g = begin; g < end; ++g) {
      const int64_t o = g * kTileRows;
      kernel.tile({.n = w.n_in,
                   .weight_rows = w.row(mat, o),
                   .weight_stride = w.row_bytes,
                   .n_rows = static_cast<int>(std::min<int64_t>(kTileRows, n_out - o)),
                   .activation_rows = xq.row(0),
                   .activation_stride = xq.row_bytes,
                   .n_act = n_tokens,
                   .act_blocks = act_blocks.empty() ? nullptr : act_blocks.data(),
                   .out = y + o,
                   .out_stride = n_out});
    }
  });
}

// Interleaved rows (cpu/interleave.h, the loader's repack): groups of kTileRows rows through
// tile_x8 for every token count (one token: the x8 decode kernel, 8 rows in the lanes and no
// per-row reduction; more: each super-block's codes decoded once for all tokens). A thread
// takes blocks of kGroupsPerBlock groups (~100-200 KiB of weights, kept in L2) against the
// tokens kTokenChunk at a time (their activations, ~600 KiB at n_in 2048, in L2 or L3), so
// a long prompt reads the weights from memory once per chunk, not once per token.
// Bit-identical to the per-row kernels on the file's rows. The blocks are handed out by
// parallel_for_balanced: each thread walks its half in order, and one that finishes early
// takes blocks from the end of the other's, so a slower core does not hold up the token.
void matmul_interleaved(const DotKernel& kernel, const WeightMatrix& w, int64_t mat, const QuantizedActivations& xq,
                        float* y, ThreadPool& pool) {
  CHECK_MSG(kernel.tile_x8 != nullptr && w.n_out % kTileRows == 0, "matmul: {} rows interleaved without a kernel",
            dtype_name(w.type));
  constexpr int64_t kGroupsPerBlock = 16, kTokenChunk = 256;
  const int64_t n_out = w.n_out, n_tokens = xq.n_rows, n_groups = n_out / kTileRows, n_blocks = w.n_in / kQK8_0;
  // Q8_0 activations' block terms, once per token for every group (TileDotArgs::act_blocks).
  std::vector<Q8_0ActBlock> act_blocks;
  if (xq.type == DType::Q8_0) {
    act_blocks.resize(static_cast<size_t>(n_tokens * n_blocks));
    if (n_tokens == 1) {
      dot::q8_0_act_blocks(w.n_in, xq.row(0), act_blocks.data());
    } else {
      pool.parallel_for(n_tokens, 16, [&](int64_t begin, int64_t end, int) {
        for (int64_t t = begin; t < end; ++t) dot::q8_0_act_blocks(w.n_in, xq.row(t), act_blocks.data() + t * n_blocks);
      });
    }
  }
  pool.parallel_for_balanced(n_groups, kGroupsPerBlock, [&](int64_t g0, int64_t g1, int) {
    for (int64_t t = 0; t < n_tokens; t += kTokenChunk) {
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t o = g * kTileRows;
        kernel.tile_x8({.n = w.n_in,
                        .weight_rows = w.row(mat, o),
                        .n_rows = kTileRows,
                        .activation_rows = xq.row(t),
                        .activation_stride = xq.row_bytes,
                        .n_act = std::min(kTokenChunk, n_tokens - t),
                        .act_blocks = act_blocks.empty() ? nullptr : act_blocks.data() + t * n_blocks,
                        .out = y + t * n_out + o,
                        .out_stride = n_out});
      }
    }
  });
}

}  // namespace

void quantize_activations(DType type, const float* x, int64_t n_rows, int64_t n_in, QuantizedActivations& out,
                          ThreadPool& pool) {
  out.type = type;
  out.n_in = n_in;
  out.n_rows = n_rows;
  out.row_bytes = dtype_row_bytes(type, n_in);
  const size_t need = static_cast<size_t>(out.row_bytes * n_rows);
  if (out.bytes.size() < need) out.bytes.resize(need);
  if (type == DType::F32) {
    std::memcpy(out.bytes.data(), x, need);
    return;
  }
  pool.parallel_for(n_rows, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) quantize_row(type, x + r * n_in, out.bytes.data() + r * out.row_bytes, n_in);
  });
}

void prepare_activations(DType type, int64_t n_rows, int64_t n_in, QuantizedActivations& out) {
  out.type = type;
  out.n_in = n_in;
  out.n_rows = n_rows;
  out.row_bytes = dtype_row_bytes(type, n_in);
  const size_t need = static_cast<size_t>(out.row_bytes * n_rows);
  if (out.bytes.size() < need) out.bytes.resize(need);
}

void quantize_activation_row(const float* x_row, QuantizedActivations& out, int64_t r) {
  quantize_row(out.type, x_row, out.bytes.data() + r * out.row_bytes, out.n_in);
}

void matmul(const WeightMatrix& w, int64_t mat, const QuantizedActivations& xq, float* y, ThreadPool& pool) {
  const DotKernel* kernel = best_dot_kernel(w.type, cpu_features());
  CHECK_MSG(kernel && kernel->activation_type == xq.type, "matmul: {} weights with {} activations",
            dtype_name(w.type), dtype_name(xq.type));
  CHECK(xq.n_in == w.n_in);
  if (w.layout == RowLayout::kInterleaved8) {
    matmul_interleaved(*kernel, w, mat, xq, y, pool);
    return;
  }
  const int64_t n_out = w.n_out, n_tokens = xq.n_rows;
  // From a few tokens on, the tile kernel's packing pays for itself many times over.
  constexpr int64_t kTileMinTokens = 8;
  if (kernel->tile != nullptr && n_tokens >= kTileMinTokens) {
    matmul_tiled(*kernel, w, mat, xq, y, pool);
    return;
  }
  // Split output rows across threads: every thread streams a disjoint slice of the
  // weights once, which is what bounds decode speed (weights >> activations). For several
  // tokens, rows are taken kRowTile at a time (their weights stay in L1) against tiles of
  // kMaxDotRows tokens, so each weight block is unpacked once per token tile; every
  // (row, token) value is the same dot product whatever the tiling. The first token tile
  // prefetches rows as decode does (a few tokens' rows are read from memory once, as one's).
  // Chunks of kRowChunk rows through parallel_for_balanced (contiguous per thread, the tail
  // shared when one thread runs slower); the prefetch runs on past a chunk's end, where the
  // same thread usually goes next.
  constexpr int64_t kRowTile = 16, kRowChunk = 32;
  pool.parallel_for_balanced(n_out, kRowChunk, [&](int64_t begin, int64_t end, int) {
    if (n_tokens == 1) {
      for (int64_t o = begin; o < end; ++o) {
        if (o + kPrefetchRows < n_out) prefetch_row(w.row(mat, o + kPrefetchRows), w.row_bytes);
        y[o] = kernel->fn(w.n_in, w.row(mat, o), xq.row(0));
      }
      return;
    }
    float tile[kMaxDotRows];
    for (int64_t o0 = begin; o0 < end; o0 += kRowTile) {
      const int64_t o1 = std::min(end, o0 + kRowTile);
      for (int64_t t = 0; t < n_tokens; t += kMaxDotRows) {
        const int m = static_cast<int>(std::min<int64_t>(kMaxDotRows, n_tokens - t));
        for (int64_t o = o0; o < o1; ++o) {
          if (t == 0 && o + kPrefetchRows < n_out) prefetch_row(w.row(mat, o + kPrefetchRows), w.row_bytes);
          dot_rows(*kernel, w.n_in, w.row(mat, o), xq.row(t), xq.row_bytes, m, tile);
          for (int j = 0; j < m; ++j) y[(t + j) * n_out + o] = tile[j];
        }
      }
    }
  });
}

void ActivationCache::reset(const float* x, int64_t n_rows, int64_t n_in) {
  x_ = x;
  n_rows_ = n_rows;
  n_in_ = n_in;
  for (auto& slot : slots_) slot.valid = false;
}

const QuantizedActivations& ActivationCache::get(DType weight_type, ThreadPool& pool) {
  const auto act = activation_type_for(weight_type);
  CHECK_MSG(act.has_value(), "no kernels for weight type {}", dtype_name(weight_type));
  const auto index = static_cast<size_t>(*act);
  CHECK_MSG(index < kSlots, "activation type id {} out of range", index);
  Slot& slot = slots_[index];
  if (!slot.valid) {
    quantize_activations(*act, x_, n_rows_, n_in_, slot.q, pool);
    slot.valid = true;
  }
  return slot.q;
}

void matmul_cached(const WeightMatrix& w, int64_t mat, ActivationCache& x, float* y, ThreadPool& pool) {
  matmul(w, mat, x.get(w.type, pool), y, pool);
}

void matmul_f32(const WeightMatrix& w, int64_t mat, const float* x, int64_t n_rows, float* y,
                QuantizedActivations& scratch, ThreadPool& pool) {
  const auto act = activation_type_for(w.type);
  CHECK_MSG(act.has_value(), "no kernels for weight type {}", dtype_name(w.type));
  quantize_activations(*act, x, n_rows, w.n_in, scratch, pool);
  matmul(w, mat, scratch, y, pool);
}

}  // namespace moetier::cpu
