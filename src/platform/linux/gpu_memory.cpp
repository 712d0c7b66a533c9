// platform/gpu_memory.h on Linux: no OS source of a GPU's budget (Vulkan drivers report
// VK_EXT_memory_budget themselves).
#include "platform/gpu_memory.h"

namespace moetier::platform {

std::optional<GpuMemoryBudget> gpu_memory_budget(const std::array<uint8_t, 8>&) { return std::nullopt; }

}  // namespace moetier::platform
