// Opening the GPU for tests. CI installs Mesa's lavapipe (a Vulkan implementation on the
// CPU) and sets MOETIER_REQUIRE_VULKAN=1, so there a missing device fails the test; on a
// developer machine without Vulkan the GPU tests are skipped with a message.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#if MOETIER_HAVE_VULKAN
#include "gpu/gpu.h"
#include "gpu/vulkan/vk_device.h"

namespace moetier::testing {

inline bool vulkan_required() { return std::getenv("MOETIER_REQUIRE_VULKAN") != nullptr; }

// The first Vulkan device, or null with the reason in `why`. emulation: subgroups emulated
// 32 or 64 wide (vk_context.h); nullopt leaves it to MOETIER_VK_SUBGROUP, which ctest sets
// for the emulated runs of this suite (tests/CMakeLists.txt).
inline std::unique_ptr<vk::Device> open_test_gpu(std::string& why,
                                                 std::optional<vk::SubgroupEmulation> emulation = std::nullopt) {
  auto dev = vk::Device::open(0, emulation);
  if (!dev) {
    why = dev.status().message();
    return nullptr;
  }
  return std::move(dev).value();
}

}  // namespace moetier::testing

// In a TEST body: `GPU_OR_SKIP(dev);` declares `std::unique_ptr<vk::Device> dev`.
#define GPU_OR_SKIP(dev)                                                                 \
  std::string gpu_why_##dev;                                                             \
  auto dev = ::moetier::testing::open_test_gpu(gpu_why_##dev);                           \
  if (!dev) {                                                                            \
    if (::moetier::testing::vulkan_required()) FAIL() << "no Vulkan device: " << gpu_why_##dev; \
    GTEST_SKIP() << "no Vulkan device: " << gpu_why_##dev;                               \
  }
#endif
