#include "gpu/vulkan/vk_memory.h"

#include <algorithm>

#include <fmt/format.h>

namespace moetier::vk {

const char* memory_use_name(MemoryUse u) {
  switch (u) {
    case MemoryUse::kWeights: return "weights";
    case MemoryUse::kKvCache: return "KV cache";
    case MemoryUse::kState: return "recurrent state";
    case MemoryUse::kScratch: return "scratch";
    case MemoryUse::kStaging: return "staging";
  }
  return "?";
}

Allocator::Allocator(const Context& ctx, uint64_t chunk_bytes) : ctx_(ctx) {
  const DeviceInfo& info = ctx.info();
  max_range_ = info.max_storage_buffer_range;
  alignment_ = std::max<uint64_t>(info.min_storage_offset_alignment, 256);
  chunk_bytes_ = chunk_bytes;
  if (info.max_allocation_bytes > 0) chunk_bytes_ = std::min(chunk_bytes_, info.max_allocation_bytes);
}

Allocator::~Allocator() {
  for (auto& c : chunks_) {
    if (c.mapped) vkUnmapMemory(ctx_.device(), c.memory);
    vkDestroyBuffer(ctx_.device(), c.buffer, nullptr);
    vkFreeMemory(ctx_.device(), c.memory, nullptr);
  }
}

uint64_t Allocator::device_bytes() const {
  uint64_t b = 0;
  for (int i = 0; i < kMemoryUses; ++i) {
    if (i != static_cast<int>(MemoryUse::kStaging)) b += used_[i];
  }
  return b;
}

Result<BufferRef> Allocator::allocate(uint64_t bytes, MemoryUse use) { return take(bytes, false, use); }

Result<BufferRef> Allocator::allocate_staging(uint64_t bytes) { return take(bytes, true, MemoryUse::kStaging); }

Result<BufferRef> Allocator::take(uint64_t bytes, bool host, MemoryUse use) {
  // Shaders read buffers as 32-bit words: a range that ends inside a word (a Q6_K or Q8_0
  // tensor of an odd number of blocks) must cover that whole word.
  bytes = std::max<uint64_t>((bytes + 3) / 4 * 4, 4);
  if (!host && bytes > max_range_) {
    return Status::runtime(fmt::format("GPU buffer of {} bytes exceeds the device's storage-buffer range of {} bytes",
                                       bytes, max_range_));
  }
  const uint64_t size = (bytes + alignment_ - 1) / alignment_ * alignment_;
  if (!host && limit_ > 0 && device_bytes() + size > limit_) {
    return Status::runtime(fmt::format("GPU memory budget (--vram-budget {:.0f} MiB) exhausted: {:.1f} MiB in use, {:.1f} MiB "
                                       "more asked for {}",
                                       limit_ / 1048576.0, device_bytes() / 1048576.0, size / 1048576.0,
                                       memory_use_name(use)));
  }
  for (auto& c : chunks_) {
    if (c.host == host && c.size - c.used >= size) {
      BufferRef r{.buffer = c.buffer, .offset = c.used, .size = bytes, .mapped = c.mapped ? c.mapped + c.used : nullptr};
      c.used += size;
      used_[static_cast<int>(use)] += size;
      return r;
    }
  }
  // A new chunk: at least chunk_bytes_, or the request itself when it is bigger.
  Chunk c;
  c.host = host;
  c.size = std::max(size, host ? std::min<uint64_t>(chunk_bytes_, 64ull << 20) : chunk_bytes_);
  const VkBufferCreateInfo bci{.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = c.size,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkResult r = vkCreateBuffer(ctx_.device(), &bci, nullptr, &c.buffer);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("vkCreateBuffer({} bytes) failed: {}", c.size, result_name(r)));
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(ctx_.device(), c.buffer, &req);
  const uint32_t type = host ? ctx_.host_memory_type() : ctx_.device_memory_type();
  if (!(req.memoryTypeBits & (1u << type))) {
    vkDestroyBuffer(ctx_.device(), c.buffer, nullptr);
    return Status::runtime("no memory type usable for storage buffers");
  }
  const VkMemoryAllocateInfo mai{.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                 .memoryTypeIndex = type};
  r = vkAllocateMemory(ctx_.device(), &mai, nullptr, &c.memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(ctx_.device(), c.buffer, nullptr);
    return Status::runtime(fmt::format("out of {} memory: allocating {:.1f} MiB for {} with {:.1f} MiB already in use ({})",
                                       host ? "host-visible" : "GPU", c.size / 1048576.0, memory_use_name(use),
                                       device_bytes() / 1048576.0, result_name(r)));
  }
  vkBindBufferMemory(ctx_.device(), c.buffer, c.memory, 0);
  if (host || ctx_.device_memory_is_host_visible()) {
    void* p = nullptr;
    if (vkMapMemory(ctx_.device(), c.memory, 0, VK_WHOLE_SIZE, 0, &p) == VK_SUCCESS) c.mapped = static_cast<uint8_t*>(p);
  }
  chunks_.push_back(c);
  return take(bytes, host, use);
}

}  // namespace moetier::vk
