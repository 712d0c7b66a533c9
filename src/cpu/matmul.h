// Matrix products of GGUF weight matrices (kept in their block format) with f32
// activations. Activations are converted once per call to the weight type's activation
// type (see dot.h), then every (output row, token) pair is one dot product.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/interleave.h"
#include "tensor/dtype.h"

namespace moetier::cpu {

// A view of a 2-D weight matrix, or of a stack of them (3-D expert tensors).
// ggml order: n_in = ne0 (row length, blocks run along it), n_out = ne1, n_mat = ne2.
struct WeightMatrix {
  DType type = DType::F32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t n_mat = 1;
  int64_t row_bytes = 0;
  const uint8_t* data = nullptr;
  // kInterleaved8 (cpu/interleave.h): rows in groups of 8; row(mat, r) with r a multiple of 8
  // is then the group's start. matmul and the MoE block read such matrices with
  // DotKernel::tile_x8; nothing may read their rows one by one (embedding lookups).
  RowLayout layout = RowLayout::kRows;

  const uint8_t* row(int64_t mat, int64_t r) const { return data + (mat * n_out + r) * row_bytes; }
};

// Decode streams weight rows: while row o is computed, ask for row o + kPrefetchRows (the
// hardware prefetchers ramp up slowly at the start of each slice or expert item, and the
// MoE's gate/up interleave breaks their stride).
inline constexpr int64_t kPrefetchRows = 2;
inline void prefetch_row(const uint8_t* row, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
}

// Activation rows converted to one activation type; reused across calls (grows, never
// shrinks) so steady-state decoding does not allocate.
struct QuantizedActivations {
  DType type = DType::F32;
  int64_t n_in = 0;
  int64_t n_rows = 0;
  int64_t row_bytes = 0;
  std::vector<uint8_t> bytes;
  const uint8_t* row(int64_t r) const { return bytes.data() + r * row_bytes; }
};

// Convert x[n_rows][n_in] (f32, row-major) to `type` rows, as ggml's CPU backend does:
// Q8_K and Q8_0 round to nearest even with scale 127/amax, F16/BF16 round to nearest even.
void quantize_activations(DType type, const float* x, int64_t n_rows, int64_t n_in, QuantizedActivations& out,
                          ThreadPool& pool);

// Shapes `out` for n_rows rows of n_in elements of `type` without converting anything, so
// that rows can then be filled from inside a parallel region (quantize_activation_row).
void prepare_activations(DType type, int64_t n_rows, int64_t n_in, QuantizedActivations& out);
// Converts one f32 row (out.n_in elements) into row r of a prepared `out`.
void quantize_activation_row(const float* x_row, QuantizedActivations& out, int64_t r);

// y[t][o] = Σ_i W[mat][o][i] · x[t][i] for t < xq.n_rows, o < n_out; y is row-major
// [n_rows][n_out]. xq must have been made with activation_type_for(w.type).
void matmul(const WeightMatrix& w, int64_t mat, const QuantizedActivations& xq, float* y, ThreadPool& pool);

// One f32 input x[n_rows][n_in] converted lazily to each activation type its consumers
// need, so projections that read the same input (q/k/v; qkv/z/β/α; the router and the
// experts) convert it once per type instead of once per matmul. Buffers are reused across
// calls (no allocation once warm).
class ActivationCache {
 public:
  // A new input; forgets previous conversions. x must stay valid while the cache is used.
  void reset(const float* x, int64_t n_rows, int64_t n_in);
  // x converted to the activation type of `weight_type` (converted on first request).
  const QuantizedActivations& get(DType weight_type, ThreadPool& pool);
  const float* x() const { return x_; }
  int64_t n_rows() const { return n_rows_; }

 private:
  const float* x_ = nullptr;
  int64_t n_rows_ = 0, n_in_ = 0;
  struct Slot {
    bool valid = false;
    QuantizedActivations q;
  };
  // Indexed by activation DType id. A fixed array: callers hold the references get()
  // returns while asking for other types (a growing vector would move the slots).
  static constexpr size_t kSlots = 64;
  std::array<Slot, kSlots> slots_;
};

// matmul of w with the cached input converted to w's activation type.
void matmul_cached(const WeightMatrix& w, int64_t mat, ActivationCache& x, float* y, ThreadPool& pool);

// Convenience: quantize x then matmul (uses `scratch` for the converted activations).
void matmul_f32(const WeightMatrix& w, int64_t mat, const float* x, int64_t n_rows, float* y,
                QuantizedActivations& scratch, ThreadPool& pool);

}  // namespace moetier::cpu
