// The compute shaders of the Vulkan backend, compiled from src/gpu/vulkan/shaders/*.comp by
// glslc at build time and embedded in the binary (cmake/embed_spirv.cmake). One entry per
// variant: a shader compiled with different defines (e.g. one matmul per weight type) is
// several entries.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace moetier::vk {

struct ShaderBinary {
  std::string_view name;
  std::span<const uint32_t> words;
};

std::span<const ShaderBinary> shader_binaries();

}  // namespace moetier::vk
