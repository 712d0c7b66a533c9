// Vulkan device access: the loader is opened at run time (volk), so a machine without any
// Vulkan driver gets a clear error here and the engine falls back to the CPU. One Context
// = one instance + one logical device with one compute queue. Everything GPU-side is
// created from a Context and passed explicitly (no global device).
#pragma once

#include <volk.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace moetier::vk {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string type;    // "discrete GPU", "integrated GPU", "virtual GPU", "CPU (software)", "other"
  std::string driver;  // driver name and version string, when the driver reports them
  uint32_t api_version = 0;
  uint64_t local_heap_bytes = 0;  // device-local heaps, in total
  uint64_t budget_bytes = 0;      // what this process may use now (VK_EXT_memory_budget), else the heap size
  uint64_t used_bytes = 0;        // used by every process (VK_EXT_memory_budget), else 0
  bool has_memory_budget = false;
  // The OS's name of the adapter (VkPhysicalDeviceIDProperties::deviceLUID, Vulkan 1.1;
  // Windows reports one), for the OS's memory budget where the driver has no
  // VK_EXT_memory_budget (platform/gpu_memory.h).
  std::array<uint8_t, 8> luid{};
  bool luid_valid = false;
  bool unified_memory = false;    // device-local memory is also host-visible (integrated GPUs, lavapipe)
  uint64_t max_storage_buffer_range = 0;  // bytes one storage-buffer binding may span (lavapipe: 128 MiB)
  uint64_t max_allocation_bytes = 0;
  uint64_t min_storage_offset_alignment = 0;
  uint32_t vendor_id = 0;          // PCI vendor: 0x10DE NVIDIA, 0x1002 AMD, 0x8086 Intel, 0x10005 Mesa (llvmpipe)
  uint32_t subgroup_size = 0;
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;  // VK 1.3 subgroup size control, else subgroup_size
  bool subgroup_arithmetic = false;  // subgroupAdd/Max in compute shaders
  bool subgroup_shuffle = false;     // subgroupShuffleXor in compute shaders
  bool subgroup_size_control = false;  // pipelines can ask for a subgroup size (VK 1.3)
  bool full_subgroups = false;       // pipelines can require full subgroups (VK 1.3 computeFullSubgroups)
  bool integer_dot = false;          // VK_KHR_shader_integer_dot_product (dotPacked4x8EXT)
  bool integer_dot_accelerated = false;  // ... and the driver says signed 4x8 dot products are fast
  bool timestamps = false;           // compute queues write timestamps (for bench --profile)
  double timestamp_period_ns = 0;    // nanoseconds per timestamp tick
  bool loop_limited = false;         // Mesa llvmpipe: loops end silently after 65,535 iterations (vk_ops.h)
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_shared_bytes = 0;
  std::array<uint32_t, 3> max_workgroup_count{};
  // Subgroup emulation (SubgroupEmulation below; 0: off). When on, subgroup_size, the
  // min/max sizes and vendor_id describe the emulated device (W wide, the smallest size 8 for
  // Intel, no subgroup size control or full-subgroup requests, the emulated vendor's tuning
  // row); native_* keep the device's own.
  uint32_t emulated_subgroup = 0;
  uint32_t native_subgroup_size = 0, native_vendor_id = 0;

  // What the fast kernels need (Vulkan 1.2, subgroup arithmetic and shuffles in compute
  // shaders, subgroups of at least 8, 512 invocations and 32 KiB of shared memory per
  // workgroup: every desktop GPU); otherwise the exact kernels run.
  bool fast_kernels_supported() const;
  // Shared memory a kernel with subgroup operations may declare besides what the subgroup
  // operations use: max_shared_bytes, less the emulation's scratch (4 KiB) when emulating.
  uint32_t subgroup_kernel_shared_bytes() const;
  // One line: "llvmpipe (LLVM 15.0.6, 256 bits), CPU (software), 23.4 GiB, Vulkan 1.3.230"
  std::string describe() const;
};

// A diagnostic: the backend behaves as if the device's subgroups were `width` (32 or 64)
// invocations wide. Every choice made from DeviceInfo's subgroup facts and vendor (workgroup
// sizes, lanes per query, tuning defaults: vk_tuning.h) follows the emulated device, and every
// shader with subgroup operations runs as its variant doing them `width` wide through
// shared memory (shaders/subgroup.glsl). So lavapipe (8- or 16-wide subgroups) executes the
// code paths of NVIDIA (32) and AMD (64) GPUs; results match the exact kernels within the
// native tolerances, speed means nothing.
struct SubgroupEmulation {
  uint32_t width = 0;      // 32 or 64; 0: off
  uint32_t vendor_id = 0;  // PCI vendor whose tuning row applies: NVIDIA for 32, AMD for 64 unless named
};
// The environment's MOETIER_VK_SUBGROUP: "32" or "64", optionally with the vendor whose
// defaults apply, "32:intel" (nvidia, amd, intel). Unset or empty: off. Errors (bad input)
// name the accepted values.
Result<SubgroupEmulation> parse_subgroup_emulation(std::string_view text);
Result<SubgroupEmulation> subgroup_emulation_from_env();
// `info` as the emulated device (see DeviceInfo::emulated_subgroup); no change when off.
void apply_subgroup_emulation(DeviceInfo& info, const SubgroupEmulation& emulation);
// "subgroups emulated 32 wide (native 8), NVIDIA defaults": the load line's text; "" when off.
std::string describe_subgroup_emulation(const DeviceInfo& info);

// Indented lines for `--list-devices -v`: the subgroup facts (and emulation), then the fast
// kernels' vendor defaults (vk_tuning.h) with this device's row marked.
std::string describe_device_details(const DeviceInfo& info);

// Every Vulkan device of the machine. Errors (runtime): no Vulkan loader, no driver, or
// instance creation failed; the message says which and what to install.
Result<std::vector<DeviceInfo>> list_devices();

class Context {
 public:
  // device_index: from list_devices(). Errors name the device and the failing step.
  // emulation: nullopt reads MOETIER_VK_SUBGROUP; when on, one line on stderr says so.
  static Result<std::unique_ptr<Context>> create(int device_index,
                                                 std::optional<SubgroupEmulation> emulation = std::nullopt);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  // Re-reads VK_EXT_memory_budget (budget and usage change as other processes allocate).
  DeviceInfo refreshed_info() const;

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }

  // Memory type for device buffers (device-local), and for staging (host-visible and
  // coherent; on unified-memory devices both are the same type).
  uint32_t device_memory_type() const { return device_type_; }
  uint32_t host_memory_type() const { return host_type_; }
  bool device_memory_is_host_visible() const { return device_host_visible_; }

 private:
  Context() = default;
  DeviceInfo info_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  uint32_t device_type_ = 0, host_type_ = 0;
  bool device_host_visible_ = false;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string pipeline_cache_path_;
  SubgroupEmulation emulation_;
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
const char* result_name(VkResult r);

}  // namespace moetier::vk
