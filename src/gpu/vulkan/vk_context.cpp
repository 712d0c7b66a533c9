#include "gpu/vulkan/vk_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "core/utf8_path.h"
#include "gpu/vulkan/vk_tuning.h"
#include "platform/file.h"

namespace moetier::vk {

namespace {

Status loader_status() {
  static std::once_flag once;
  static VkResult result = VK_SUCCESS;
  std::call_once(once, [] { result = volkInitialize(); });
  if (result != VK_SUCCESS) {
    // The build names the library volk.c opens on this OS and how users get one (CMakeLists.txt).
    return Status::runtime("no Vulkan loader (" MOETIER_VULKAN_LOADER ") on this machine; " MOETIER_VULKAN_DRIVER_HINT
                           " to use the GPU");
  }
  return Status::ok();
}

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
  for (const auto& e : exts) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

std::vector<VkExtensionProperties> device_extensions(VkPhysicalDevice pd) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data());
  return exts;
}

Result<VkInstance> create_instance() {
  RETURN_IF_ERROR(loader_status());
  uint32_t version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_1) {
    // Also what a loader without any usable driver reports (Wine's without an X display).
    return Status::runtime("the Vulkan loader offers only Vulkan 1.0: no driver, or one older than Vulkan 1.1, which "
                           "moetier needs");
  }
  uint32_t n_ext = 0;
  vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, nullptr);
  std::vector<VkExtensionProperties> exts(n_ext);
  vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, exts.data());
  std::vector<const char*> enable;
  VkInstanceCreateFlags flags = 0;
  if (has_extension(exts, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
    enable.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);  // MoltenVK lists its devices only then
    flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
  }
  VkApplicationInfo app{.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                        .pApplicationName = "moetier",
                        .applicationVersion = 1,
                        .pEngineName = "moetier",
                        .engineVersion = 1,
                        .apiVersion = std::min<uint32_t>(version, VK_API_VERSION_1_3)};
  VkInstanceCreateInfo ci{.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                          .flags = flags,
                          .pApplicationInfo = &app,
                          .enabledExtensionCount = static_cast<uint32_t>(enable.size()),
                          .ppEnabledExtensionNames = enable.data()};
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = vkCreateInstance(&ci, nullptr, &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    // The loader is there but no driver answered (none installed; under Wine, no X display).
    return Status::runtime("the Vulkan loader found no driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
  }
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("vkCreateInstance failed: {}", result_name(r)));
  volkLoadInstanceOnly(instance);
  return instance;
}

Result<std::vector<VkPhysicalDevice>> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  VkResult r = vkEnumeratePhysicalDevices(instance, &n, nullptr);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("vkEnumeratePhysicalDevices failed: {}", result_name(r)));
  std::vector<VkPhysicalDevice> devices(n);
  vkEnumeratePhysicalDevices(instance, &n, devices.data());
  return devices;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU (software)";
    default: return "other";
  }
}

DeviceInfo describe_device(VkPhysicalDevice pd, int index) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceProperties base{};
  vkGetPhysicalDeviceProperties(pd, &base);
  VkPhysicalDeviceSubgroupProperties subgroup{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceDriverProperties driver{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 props{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &subgroup};
  if (base.apiVersion >= VK_API_VERSION_1_2) subgroup.pNext = &driver;
  vkGetPhysicalDeviceProperties2(pd, &props);
  const auto& p = props.properties;
  info.name = p.deviceName;
  info.type = type_name(p.deviceType);
  if (base.apiVersion >= VK_API_VERSION_1_2) info.driver = fmt::format("{} {}", driver.driverName, driver.driverInfo);
  info.api_version = p.apiVersion;
  info.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  info.min_storage_offset_alignment = p.limits.minStorageBufferOffsetAlignment;
  info.max_workgroup_invocations = p.limits.maxComputeWorkGroupInvocations;
  info.max_shared_bytes = p.limits.maxComputeSharedMemorySize;
  for (int i = 0; i < 3; ++i) info.max_workgroup_count[static_cast<size_t>(i)] = p.limits.maxComputeWorkGroupCount[i];
  info.vendor_id = info.native_vendor_id = p.vendorID;
  info.subgroup_size = info.native_subgroup_size = subgroup.subgroupSize;
  info.min_subgroup_size = info.max_subgroup_size = subgroup.subgroupSize;
  const bool compute_stage = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  info.subgroup_arithmetic = compute_stage && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  info.subgroup_shuffle = compute_stage && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  if (base.apiVersion >= VK_API_VERSION_1_2) info.loop_limited = driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE;
  if (base.apiVersion >= VK_API_VERSION_1_3) {
    VkPhysicalDeviceSubgroupSizeControlProperties sizes{
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceShaderIntegerDotProductProperties dot{
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES, .pNext = &sizes};
    VkPhysicalDeviceProperties2 p13{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &dot};
    vkGetPhysicalDeviceProperties2(pd, &p13);
    VkPhysicalDeviceVulkan13Features f13{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    VkPhysicalDeviceFeatures2 f{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f13};
    vkGetPhysicalDeviceFeatures2(pd, &f);
    if (f13.subgroupSizeControl && (sizes.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
      info.subgroup_size_control = true;
      info.min_subgroup_size = sizes.minSubgroupSize;
      info.max_subgroup_size = sizes.maxSubgroupSize;
    }
    info.full_subgroups = f13.computeFullSubgroups;
    info.integer_dot = f13.shaderIntegerDotProduct;
    info.integer_dot_accelerated = info.integer_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
  }
  info.timestamps = p.limits.timestampComputeAndGraphics;
  info.timestamp_period_ns = p.limits.timestampPeriod;
  VkPhysicalDeviceMaintenance3Properties m3{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 props2{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
  vkGetPhysicalDeviceProperties2(pd, &props2);
  info.max_allocation_bytes = m3.maxMemoryAllocationSize;

  if (base.apiVersion >= VK_API_VERSION_1_1) {
    VkPhysicalDeviceIDProperties id{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
    VkPhysicalDeviceProperties2 pid{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
    vkGetPhysicalDeviceProperties2(pd, &pid);
    info.luid_valid = id.deviceLUIDValid == VK_TRUE;
    if (info.luid_valid) std::copy(std::begin(id.deviceLUID), std::end(id.deviceLUID), info.luid.begin());
  }
  info.has_memory_budget = has_extension(device_extensions(pd), VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mem{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                        .pNext = info.has_memory_budget ? &budget : nullptr};
  vkGetPhysicalDeviceMemoryProperties2(pd, &mem);
  const auto& mp = mem.memoryProperties;
  for (uint32_t h = 0; h < mp.memoryHeapCount; ++h) {
    if (!(mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    const VkDeviceSize heap = mp.memoryHeaps[h].size;
    info.local_heap_bytes += heap;
    // Some drivers report a budget above the heap's size (counting memory they would spill
    // to system RAM): a heap holds no more than its size.
    info.budget_bytes += info.has_memory_budget ? std::min(budget.heapBudget[h], heap) : heap;
    info.used_bytes += info.has_memory_budget ? std::min(budget.heapUsage[h], heap) : 0;
  }
  for (uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    const auto f = mp.memoryTypes[t].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
      info.unified_memory = p.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    }
  }
  return info;
}

// moetier's folder in the user's cache folder (Linux: ~/.cache/moetier; Windows:
// %LOCALAPPDATA%/moetier); "" when the environment names none.
std::string cache_dir() {
  const std::string user = platform::user_cache_dir();
  return user.empty() ? std::string() : user + "/moetier";
}

}  // namespace

const char* result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VK_ERROR (unknown)";
  }
}

bool DeviceInfo::fast_kernels_supported() const {
  return api_version >= VK_API_VERSION_1_2 && subgroup_arithmetic && subgroup_shuffle && subgroup_size >= 8 &&
         max_workgroup_invocations >= 512 && max_shared_bytes >= 32768;  // matmat's tiles take ~22 KiB
}

std::string DeviceInfo::describe() const {
  return fmt::format("{}, {}, {:.1f} GiB{}, Vulkan {}.{}.{}{}", name, type, local_heap_bytes / 1073741824.0,
                     has_memory_budget ? fmt::format(" ({:.1f} GiB free)", (budget_bytes > used_bytes ? budget_bytes - used_bytes : 0) / 1073741824.0) : "",
                     VK_API_VERSION_MAJOR(api_version), VK_API_VERSION_MINOR(api_version),
                     VK_API_VERSION_PATCH(api_version), driver.empty() ? "" : ", " + driver);
}

Result<std::vector<DeviceInfo>> list_devices() {
  ASSIGN_OR_RETURN(const SubgroupEmulation emulation, subgroup_emulation_from_env());
  ASSIGN_OR_RETURN(VkInstance instance, create_instance());
  auto devices = physical_devices(instance);
  std::vector<DeviceInfo> out;
  if (devices) {
    for (size_t i = 0; i < devices->size(); ++i) {
      out.push_back(describe_device((*devices)[i], static_cast<int>(i)));
      apply_subgroup_emulation(out.back(), emulation);
    }
  }
  vkDestroyInstance(instance, nullptr);
  if (!devices) return devices.status();
  return out;
}

Result<SubgroupEmulation> parse_subgroup_emulation(std::string_view text) {
  SubgroupEmulation e;
  if (text.empty()) return e;
  const size_t colon = text.find(':');
  const std::string_view width = text.substr(0, colon);
  const std::string_view vendor = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  if (width == "32") {
    e = {.width = 32, .vendor_id = kVendorNvidia};
  } else if (width == "64") {
    e = {.width = 64, .vendor_id = kVendorAmd};
  }
  if (vendor == "nvidia") e.vendor_id = kVendorNvidia;
  else if (vendor == "amd") e.vendor_id = kVendorAmd;
  else if (vendor == "intel") e.vendor_id = kVendorIntel;
  else if (colon != std::string_view::npos) e.width = 0;  // an unknown or empty vendor
  if (e.width == 0) {
    return Status::bad_input(fmt::format("MOETIER_VK_SUBGROUP={}: expected 32 or 64, optionally with :nvidia, :amd "
                                         "or :intel (e.g. 32:intel)", text));
  }
  return e;
}

Result<SubgroupEmulation> subgroup_emulation_from_env() {
  const char* env = std::getenv("MOETIER_VK_SUBGROUP");
  return parse_subgroup_emulation(env ? std::string_view(env) : std::string_view());
}

void apply_subgroup_emulation(DeviceInfo& info, const SubgroupEmulation& e) {
  if (e.width == 0) return;
  info.emulated_subgroup = e.width;
  info.subgroup_size = info.min_subgroup_size = info.max_subgroup_size = e.width;
  // Intel's compilers pick 8, 16 or 32 lanes per shader: the launchers then fit a query's or
  // a column's lanes in 8 and round workgroups to 32 (vk_ops_attention.cpp). The emulated
  // kernels run 32 wide, one of the widths such a device may choose.
  if (e.vendor_id == kVendorIntel) info.min_subgroup_size = std::min<uint32_t>(8, e.width);
  info.subgroup_size_control = false;
  info.full_subgroups = false;
  info.vendor_id = e.vendor_id;
}

uint32_t DeviceInfo::subgroup_kernel_shared_bytes() const {
  // The emulated kernels' scratch: one word per invocation, for workgroups of up to 1024.
  constexpr uint32_t kScratchBytes = 1024 * 4;
  if (!emulated_subgroup) return max_shared_bytes;
  return max_shared_bytes > kScratchBytes ? max_shared_bytes - kScratchBytes : 0;
}

std::string describe_subgroup_emulation(const DeviceInfo& info) {
  if (!info.emulated_subgroup) return "";
  return fmt::format("subgroups emulated {} wide (native {}), {} defaults (MOETIER_VK_SUBGROUP; a diagnostic, slow)",
                     info.emulated_subgroup, info.native_subgroup_size, vendor_defaults(info).vendor);
}

std::string describe_device_details(const DeviceInfo& info) {
  std::string out = fmt::format("    subgroups: {} wide (sizes {}..{}{}{}), vendor 0x{:04x}, fast kernels: {}\n",
                                info.subgroup_size, info.min_subgroup_size, info.max_subgroup_size,
                                info.subgroup_size_control ? ", size control" : "",
                                info.full_subgroups ? ", full subgroups" : "", info.vendor_id,
                                info.fast_kernels_supported() ? "yes" : "no");
  if (info.emulated_subgroup) out += fmt::format("    {}\n", describe_subgroup_emulation(info));
  return out + describe_vendor_defaults(info);
}

Result<std::unique_ptr<Context>> Context::create(int device_index, std::optional<SubgroupEmulation> emulation) {
  if (!emulation) {
    ASSIGN_OR_RETURN(emulation, subgroup_emulation_from_env());
  }
  std::unique_ptr<Context> c(new Context());
  ASSIGN_OR_RETURN(c->instance_, create_instance());
  ASSIGN_OR_RETURN(auto devices, physical_devices(c->instance_));
  if (devices.empty()) return Status::runtime("the Vulkan loader found no device (is a Vulkan driver installed?)");
  if (device_index < 0 || device_index >= static_cast<int>(devices.size())) {
    return Status::bad_input(fmt::format("-dev {}: there are {} Vulkan devices (0..{}; see --list-devices)",
                                         device_index, devices.size(), devices.size() - 1));
  }
  c->physical_ = devices[static_cast<size_t>(device_index)];
  c->info_ = describe_device(c->physical_, device_index);
  if (c->info_.api_version < VK_API_VERSION_1_1) {
    return Status::runtime(fmt::format("{}: Vulkan 1.1 is needed, the device has {}.{}", c->info_.name,
                                       VK_API_VERSION_MAJOR(c->info_.api_version),
                                       VK_API_VERSION_MINOR(c->info_.api_version)));
  }

  uint32_t n_families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &n_families, nullptr);
  std::vector<VkQueueFamilyProperties> families(n_families);
  vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &n_families, families.data());
  bool found = false;
  for (uint32_t i = 0; i < n_families; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      c->queue_family_ = i;
      found = true;
      break;
    }
  }
  if (!found) return Status::runtime(fmt::format("{}: no compute queue", c->info_.name));
  c->info_.timestamps = c->info_.timestamps && families[c->queue_family_].timestampValidBits >= 32;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                              .queueFamilyIndex = c->queue_family_,
                              .queueCount = 1,
                              .pQueuePriorities = &priority};
  std::vector<const char*> exts;
  if (c->info_.has_memory_budget) exts.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  // Vulkan 1.3 features the fast kernels use where the device has them.
  VkPhysicalDeviceVulkan13Features f13{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceFeatures2 features{.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  if (c->info_.api_version >= VK_API_VERSION_1_3) {
    f13.subgroupSizeControl = c->info_.subgroup_size_control;
    f13.computeFullSubgroups = c->info_.full_subgroups;
    f13.shaderIntegerDotProduct = c->info_.integer_dot;
    features.pNext = &f13;
  }
  VkDeviceCreateInfo dci{.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                         .pNext = c->info_.api_version >= VK_API_VERSION_1_3 ? &features : nullptr,
                         .queueCreateInfoCount = 1,
                         .pQueueCreateInfos = &qci,
                         .enabledExtensionCount = static_cast<uint32_t>(exts.size()),
                         .ppEnabledExtensionNames = exts.data()};
  VkResult r = vkCreateDevice(c->physical_, &dci, nullptr, &c->device_);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("{}: vkCreateDevice failed: {}", c->info_.name, result_name(r)));
  volkLoadDevice(c->device_);
  vkGetDeviceQueue(c->device_, c->queue_family_, 0, &c->queue_);

  VkPhysicalDeviceMemoryProperties mp{};
  vkGetPhysicalDeviceMemoryProperties(c->physical_, &mp);
  std::optional<uint32_t> device_type, host_type;
  constexpr auto kHost = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t t = 0; t < mp.memoryTypeCount; ++t) {
    const auto f = mp.memoryTypes[t].propertyFlags;
    if (!device_type && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) device_type = t;
    if (!host_type && (f & kHost) == kHost) host_type = t;
  }
  if (!device_type || !host_type) return Status::runtime(fmt::format("{}: no usable memory types", c->info_.name));
  c->device_type_ = *device_type;
  c->host_type_ = *host_type;
  c->device_host_visible_ = (mp.memoryTypes[*device_type].propertyFlags & kHost) == kHost;

  // Pipeline cache, kept on disk per device and driver so that later runs skip the shader
  // compiles (seconds on some drivers).
  VkPhysicalDeviceProperties p{};
  vkGetPhysicalDeviceProperties(c->physical_, &p);
  std::vector<char> blob;
  if (const std::string dir = cache_dir(); !dir.empty()) {
    std::string uuid;
    for (uint8_t b : p.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
    c->pipeline_cache_path_ = fmt::format("{}/vk-pipelines-{:04x}-{:04x}-{}.bin", dir, p.vendorID, p.deviceID, uuid);
    std::ifstream in(utf8_path(c->pipeline_cache_path_), std::ios::binary);
    if (in) blob.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo pci{.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                .initialDataSize = blob.size(),
                                .pInitialData = blob.empty() ? nullptr : blob.data()};
  if (vkCreatePipelineCache(c->device_, &pci, nullptr, &c->pipeline_cache_) != VK_SUCCESS) {
    pci.initialDataSize = 0;  // a stale or damaged file: start empty
    pci.pInitialData = nullptr;
    vkCreatePipelineCache(c->device_, &pci, nullptr, &c->pipeline_cache_);
  }
  // After the device exists: it was created with the native subgroup features.
  c->emulation_ = *emulation;
  apply_subgroup_emulation(c->info_, c->emulation_);
  if (c->info_.emulated_subgroup) {
    std::fprintf(stderr, "moetier: GPU %s: %s\n", c->info_.name.c_str(), describe_subgroup_emulation(c->info_).c_str());
  }
  return c;
}

DeviceInfo Context::refreshed_info() const {
  DeviceInfo i = describe_device(physical_, info_.index);
  apply_subgroup_emulation(i, emulation_);
  return i;
}

Context::~Context() {
  if (device_) {
    vkDeviceWaitIdle(device_);
    if (pipeline_cache_) {
      size_t size = 0;
      if (!pipeline_cache_path_.empty() && vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) == VK_SUCCESS &&
          size > 0) {
        std::vector<char> data(size);
        if (vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) == VK_SUCCESS) {
          std::error_code ec;
          std::filesystem::create_directories(utf8_path(pipeline_cache_path_).parent_path(), ec);
          const std::string tmp = pipeline_cache_path_ + ".tmp";
          std::ofstream out(utf8_path(tmp), std::ios::binary);
          out.write(data.data(), static_cast<std::streamsize>(size));
          out.close();
          if (out) std::filesystem::rename(utf8_path(tmp), utf8_path(pipeline_cache_path_), ec);
        }
      }
      vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
    }
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

}  // namespace moetier::vk
