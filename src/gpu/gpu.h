// The GPU backends of this build: Vulkan (gpu/vulkan/) when it was built with the Vulkan
// headers, volk and glslc, else none (gpu/gpu_none.cpp). The engine hands
// create_gpu_backend to a model through GpuPlacement; the model itself never names a backend.
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "model/gpu_backend.h"

namespace moetier {

// The Vulkan backend, or an error when this build has none, or the device cannot be
// opened (no driver, index out of range): the caller then runs everything on the CPU.
Result<std::unique_ptr<GpuBackend>> create_gpu_backend(const HParams& hp, const GpuBackendOptions& options);

// The Vulkan devices, in -dev order (--list-devices), or the reason there are none.
Result<std::vector<GpuDeviceInfo>> list_gpu_devices();

}  // namespace moetier
