#include "cpu/interleave.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/status.h"

namespace moetier::cpu {

namespace {

struct GroupShape {
  int64_t block_bytes = 0;  // B
  int64_t n_blocks = 0;     // blocks per row
  int64_t head = 0;         // bytes before the words (Q8_0: its f16 scale)
  int64_t words = 0;        // (B - head) / 4
  int64_t tail = 0;         // (B - head) mod 4
};

GroupShape group_shape(DType type, int64_t n_in) {
  CHECK_MSG(interleavable(type), "no interleaved layout for {}", dtype_name(type));
  const DTypeTraits& t = dtype_traits(type);
  CHECK_MSG(n_in % t.block_elems == 0, "row of {} elements is not whole {} blocks", n_in, dtype_name(type));
  const int64_t head = type == DType::Q8_0 ? 2 : 0;
  return {.block_bytes = t.block_bytes, .n_blocks = n_in / t.block_elems, .head = head,
          .words = (t.block_bytes - head) / 4, .tail = (t.block_bytes - head) % 4};
}

// Copies between row-major rows and the interleaved group; kToGroup picks the direction.
template <bool kToGroup>
void convert_group(DType type, int64_t n_in, const uint8_t* src, uint8_t* dst) {
  const GroupShape s = group_shape(type, n_in);
  const int64_t row_bytes = s.block_bytes * s.n_blocks;
  for (int64_t b = 0; b < s.n_blocks; ++b) {
    const int64_t run = b * kInterleaveRows * s.block_bytes;  // the super-block's run in the group
    const int64_t words_at = run + s.head * kInterleaveRows;
    for (int i = 0; i < kInterleaveRows; ++i) {
      const int64_t block = i * row_bytes + b * s.block_bytes;  // row i's block b, row-major
      const int64_t head_at = run + i * s.head;
      if constexpr (kToGroup) {
        std::memcpy(dst + head_at, src + block, static_cast<size_t>(s.head));
      } else {
        std::memcpy(dst + block, src + head_at, static_cast<size_t>(s.head));
      }
      for (int64_t w = 0; w < s.words; ++w) {
        const int64_t at = words_at + (w * kInterleaveRows + i) * 4;
        if constexpr (kToGroup) {
          std::memcpy(dst + at, src + block + s.head + 4 * w, 4);
        } else {
          std::memcpy(dst + block + s.head + 4 * w, src + at, 4);
        }
      }
      const int64_t tail_at = words_at + s.words * kInterleaveRows * 4 + i * s.tail;
      const int64_t tail_from = block + s.head + 4 * s.words;
      if constexpr (kToGroup) {
        std::memcpy(dst + tail_at, src + tail_from, static_cast<size_t>(s.tail));
      } else {
        std::memcpy(dst + tail_from, src + tail_at, static_cast<size_t>(s.tail));
      }
    }
  }
}

}  // namespace

bool interleavable(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K ||
         type == DType::IQ4_XS;
}

void interleave_group(DType type, int64_t n_in, const uint8_t* src, uint8_t* dst) {
  convert_group<true>(type, n_in, src, dst);
}

void deinterleave_group(DType type, int64_t n_in, const uint8_t* src, uint8_t* dst) {
  convert_group<false>(type, n_in, src, dst);
}

void interleave_in_place(DType type, int64_t n_in, int64_t n_rows, uint8_t* data, int n_threads) {
  CHECK_MSG(n_rows % kInterleaveRows == 0, "{} rows are not whole groups of {}", n_rows, kInterleaveRows);
  const int64_t group_bytes = kInterleaveRows * dtype_row_bytes(type, n_in);
  const int64_t n_groups = n_rows / kInterleaveRows;
  const int threads = static_cast<int>(std::clamp<int64_t>(n_threads, 1, std::max<int64_t>(1, n_groups)));
  auto work = [&](int thread) {
    std::vector<uint8_t> rows(static_cast<size_t>(group_bytes));
    for (int64_t g = n_groups * thread / threads; g < n_groups * (thread + 1) / threads; ++g) {
      uint8_t* at = data + g * group_bytes;
      std::memcpy(rows.data(), at, rows.size());
      interleave_group(type, n_in, rows.data(), at);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace moetier::cpu
