// Builds without the Vulkan backend (no Vulkan headers, volk or glslc at build time).
#include "gpu/gpu.h"

#if !MOETIER_HAVE_VULKAN
namespace moetier {

Result<std::unique_ptr<GpuBackend>> create_gpu_backend(const HParams&, const GpuBackendOptions&) {
  return Status::runtime("this moetier was built without the Vulkan GPU backend (rebuild with libvulkan-dev, "
                         "libvulkan-volk-dev and glslc installed)");
}

Result<std::vector<GpuDeviceInfo>> list_gpu_devices() {
  return Status::runtime("this moetier was built without the Vulkan GPU backend");
}

}  // namespace moetier
#endif
