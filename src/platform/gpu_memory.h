// A GPU's memory as the OS accounts for it, for Vulkan drivers without
// VK_EXT_memory_budget: the GPU is named by the 8-byte LUID Vulkan reports
// (VkPhysicalDeviceIDProperties::deviceLUID). Windows: DXGI's budget and usage of the
// adapter's local memory for this process (IDXGIAdapter3::QueryVideoMemoryInfo); the OS
// moves allocations past the budget to system RAM. Linux: nullopt (drivers there report
// VK_EXT_memory_budget, and no OS source exists).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace moetier::platform {

struct GpuMemoryBudget {
  uint64_t budget_bytes = 0;  // what this process may use before the OS starts moving memory out
  uint64_t used_bytes = 0;    // what this process uses now
};

// nullopt when the OS does not say, or no adapter has this LUID.
std::optional<GpuMemoryBudget> gpu_memory_budget(const std::array<uint8_t, 8>& luid);

}  // namespace moetier::platform
