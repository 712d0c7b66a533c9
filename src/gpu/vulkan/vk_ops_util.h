// Small helpers shared by the vk_ops_*.cpp launchers (not part of the ops' interface).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/vulkan/vk_device.h"
#include "tensor/dtype.h"

namespace moetier::vk::detail {

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// "Q4_K" → "q4_k": shader variant names use lower-case type names.
inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Workgroups for `n` items of work: x up to the device limit, the rest in y (shaders read
// the linear index with group_index()).
inline Groups spread(const Device& dev, int64_t n, uint32_t z = 1) {
  const uint32_t max_x = dev.info().max_workgroup_count[0];
  const uint64_t count = static_cast<uint64_t>(std::max<int64_t>(n, 1));
  if (count <= max_x) return {.x = static_cast<uint32_t>(count), .y = 1, .z = z};
  return {.x = max_x, .y = static_cast<uint32_t>((count + max_x - 1) / max_x), .z = z};
}

// Weights per block of a weight type on the GPU (32 for F32/F16/BF16 rows, which the kernels
// read in chunks of 32); 0 for a type the GPU has no kernels for.
inline int64_t gpu_block_elems(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q8_0: return 32;
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS: return 256;
    default: return 0;
  }
}

// The KV cache type codes the attention shaders take: 0 f32, 1 f16, 2 q8_0, 3 q4_0.
inline Result<uint32_t> cache_type_code(DType t) {
  switch (t) {
    case DType::F32: return 0u;
    case DType::F16: return 1u;
    case DType::Q8_0: return 2u;
    case DType::Q4_0: return 3u;
    default: return Status::bad_input(std::string("no GPU KV cache of type ") + std::string(dtype_name(t)));
  }
}

}  // namespace moetier::vk::detail
