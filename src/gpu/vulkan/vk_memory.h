// GPU memory: buffers sub-allocated from large chunks (one VkDeviceMemory per chunk, not
// per tensor), so thousands of tensors cost a handful of allocations. A BufferRef is a
// byte range of one chunk; every range handed to a shader is at most the device's
// maxStorageBufferRange (lavapipe: 128 MiB), so callers split bigger tensors (see
// vk_tensor.h). Bytes are counted per purpose for the memory report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/vulkan/vk_context.h"

namespace moetier::vk {

enum class MemoryUse { kWeights, kKvCache, kState, kScratch, kStaging };
inline constexpr int kMemoryUses = 5;
const char* memory_use_name(MemoryUse u);

struct BufferRef {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;   // bytes into the buffer
  uint64_t size = 0;     // bytes
  uint8_t* mapped = nullptr;  // host pointer to `offset` when the memory is host-visible, else null
  bool valid() const { return buffer != VK_NULL_HANDLE; }
  BufferRef slice(uint64_t off, uint64_t n) const {
    return {.buffer = buffer, .offset = offset + off, .size = n, .mapped = mapped ? mapped + off : nullptr};
  }
};

class Allocator {
 public:
  // chunk_bytes: size of each device chunk (capped by the device's maxMemoryAllocationSize).
  Allocator(const Context& ctx, uint64_t chunk_bytes = 256ull << 20);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Device-local bytes (host-visible too on unified-memory devices). Aligned to the
  // storage-buffer offset alignment. Errors: out of device memory (names the request and
  // what is already allocated), or a request above maxStorageBufferRange.
  Result<BufferRef> allocate(uint64_t bytes, MemoryUse use);
  // Host-visible, coherent bytes for uploads and downloads.
  Result<BufferRef> allocate_staging(uint64_t bytes);

  uint64_t bytes(MemoryUse use) const { return used_[static_cast<int>(use)]; }
  uint64_t device_bytes() const;  // everything but staging
  uint64_t max_range() const { return max_range_; }
  // --vram-budget: refuse device allocations that would take the total past `bytes` (0: none).
  void set_limit(uint64_t bytes) { limit_ = bytes; }

 private:
  struct Chunk {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    uint64_t size = 0, used = 0;
    uint8_t* mapped = nullptr;
    bool host = false;
  };
  Result<BufferRef> take(uint64_t bytes, bool host, MemoryUse use);
  const Context& ctx_;
  uint64_t chunk_bytes_;
  uint64_t max_range_;
  uint64_t alignment_;
  std::vector<Chunk> chunks_;
  uint64_t used_[kMemoryUses] = {};
  uint64_t limit_ = 0;
};

}  // namespace moetier::vk
