#include "gpu/vulkan/vk_stream.h"

#include <array>

#include <fmt/format.h>

#include "gpu/vulkan/vk_shaders.h"

namespace moetier::vk {

namespace {
constexpr uint32_t kSetsPerPool = 1024;
}

Pipelines::Pipelines(const Context& ctx) : ctx_(ctx) {
  std::array<VkDescriptorSetLayoutBinding, kMaxBindings> bindings{};
  for (uint32_t i = 0; i < kMaxBindings; ++i) {
    bindings[i] = {.binding = i,
                   .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                   .descriptorCount = 1,
                   .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  }
  const VkDescriptorSetLayoutCreateInfo dsl{.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                            .bindingCount = kMaxBindings,
                                            .pBindings = bindings.data()};
  vkCreateDescriptorSetLayout(ctx_.device(), &dsl, nullptr, &set_layout_);
  const VkPushConstantRange push{.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = kMaxPushBytes};
  const VkPipelineLayoutCreateInfo pl{.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &set_layout_,
                                      .pushConstantRangeCount = 1,
                                      .pPushConstantRanges = &push};
  vkCreatePipelineLayout(ctx_.device(), &pl, nullptr, &layout_);
}

Pipelines::~Pipelines() {
  for (auto& [name, p] : cache_) vkDestroyPipeline(ctx_.device(), p.pipeline, nullptr);
  vkDestroyPipelineLayout(ctx_.device(), layout_, nullptr);
  vkDestroyDescriptorSetLayout(ctx_.device(), set_layout_, nullptr);
}

Result<Pipeline> Pipelines::get(std::string_view name) {
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  const ShaderBinary* binary = nullptr;
  for (const auto& b : shader_binaries()) {
    if (b.name == name) binary = &b;
  }
  if (!binary) return Status::runtime(fmt::format("no GPU shader named '{}' (a bug: the shader list is built in)", name));
  const VkShaderModuleCreateInfo smi{.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = binary->words.size() * sizeof(uint32_t),
                                     .pCode = binary->words.data()};
  VkShaderModule module = VK_NULL_HANDLE;
  VkResult r = vkCreateShaderModule(ctx_.device(), &smi, nullptr, &module);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("shader '{}': vkCreateShaderModule: {}", name, result_name(r)));
  const VkComputePipelineCreateInfo cpi{
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main"},
      .layout = layout_};
  Pipeline p{.layout = layout_};
  r = vkCreateComputePipelines(ctx_.device(), ctx_.pipeline_cache(), 1, &cpi, nullptr, &p.pipeline);
  vkDestroyShaderModule(ctx_.device(), module, nullptr);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("shader '{}': vkCreateComputePipelines: {}", name, result_name(r)));
  cache_.emplace(std::string(name), p);
  return p;
}

Stream::Stream(const Context& ctx, Pipelines& pipelines) : ctx_(ctx), pipelines_(pipelines) {
  const VkCommandPoolCreateInfo cpi{.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = ctx_.queue_family()};
  vkCreateCommandPool(ctx_.device(), &cpi, nullptr, &pool_);
  const VkCommandBufferAllocateInfo cai{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = pool_,
                                        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1};
  vkAllocateCommandBuffers(ctx_.device(), &cai, &cmd_);
  const VkFenceCreateInfo fci{.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vkCreateFence(ctx_.device(), &fci, nullptr, &fence_);
}

Stream::~Stream() {
  if (in_flight_) vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  for (auto p : descriptor_pools_) vkDestroyDescriptorPool(ctx_.device(), p, nullptr);
  vkDestroyFence(ctx_.device(), fence_, nullptr);
  vkDestroyCommandPool(ctx_.device(), pool_, nullptr);
}

void Stream::begin() {
  if (recording_) return;
  if (in_flight_) wait();
  vkResetCommandBuffer(cmd_, 0);
  const VkCommandBufferBeginInfo bi{.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  vkBeginCommandBuffer(cmd_, &bi);
  recording_ = true;
}

void Stream::barrier() {
  const VkMemoryBarrier mb{.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
}

VkDescriptorSet Stream::allocate_set() {
  for (;;) {
    if (pool_in_use_ == descriptor_pools_.size()) {
      const VkDescriptorPoolSize size{.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = kSetsPerPool * kMaxBindings};
      const VkDescriptorPoolCreateInfo dpi{.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = kSetsPerPool,
                                           .poolSizeCount = 1,
                                           .pPoolSizes = &size};
      VkDescriptorPool pool = VK_NULL_HANDLE;
      vkCreateDescriptorPool(ctx_.device(), &dpi, nullptr, &pool);
      descriptor_pools_.push_back(pool);
    }
    const VkDescriptorSetLayout layout = pipelines_.set_layout();
    const VkDescriptorSetAllocateInfo ai{.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                         .descriptorPool = descriptor_pools_[pool_in_use_],
                                         .descriptorSetCount = 1,
                                         .pSetLayouts = &layout};
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (vkAllocateDescriptorSets(ctx_.device(), &ai, &set) == VK_SUCCESS) return set;
    ++pool_in_use_;  // this pool is full: the next one
  }
}

Status Stream::dispatch(std::string_view shader, std::initializer_list<BufferRef> bindings, const void* push,
                        uint32_t push_bytes, Groups groups) {
  if (bindings.size() > kMaxBindings || push_bytes > kMaxPushBytes) {
    return Status::runtime(fmt::format("shader '{}': too many bindings or push constants", shader));
  }
  ASSIGN_OR_RETURN(Pipeline p, pipelines_.get(shader));
  const auto& limit = ctx_.info().max_workgroup_count;
  CHECK(groups.x >= 1 && groups.y >= 1 && groups.z >= 1 && groups.x <= limit[0] && groups.y <= limit[1] &&
        groups.z <= limit[2]);
  begin();
  VkDescriptorSet set = allocate_set();
  std::array<VkDescriptorBufferInfo, kMaxBindings> infos{};
  std::array<VkWriteDescriptorSet, kMaxBindings> writes{};
  uint32_t n = 0;
  for (const BufferRef& b : bindings) {
    infos[n] = {.buffer = b.buffer, .offset = b.offset, .range = b.size};
    writes[n] = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                 .dstSet = set,
                 .dstBinding = n,
                 .descriptorCount = 1,
                 .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                 .pBufferInfo = &infos[n]};
    ++n;
  }
  vkUpdateDescriptorSets(ctx_.device(), n, writes.data(), 0, nullptr);
  vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (push_bytes > 0) vkCmdPushConstants(cmd_, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(cmd_, groups.x, groups.y, groups.z);
  barrier();
  ++n_dispatch_;
  return Status::ok();
}

void Stream::copy(const BufferRef& src, const BufferRef& dst, uint64_t bytes) {
  begin();
  const VkBufferCopy region{.srcOffset = src.offset, .dstOffset = dst.offset, .size = bytes};
  vkCmdCopyBuffer(cmd_, src.buffer, dst.buffer, 1, &region);
  barrier();
}

void Stream::fill_zero(const BufferRef& dst) {
  begin();
  vkCmdFillBuffer(cmd_, dst.buffer, dst.offset, (dst.size + 3) / 4 * 4, 0);
  barrier();
}

Status Stream::submit() {
  if (!recording_) return Status::ok();
  vkEndCommandBuffer(cmd_);
  recording_ = false;
  const VkSubmitInfo si{.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd_};
  vkResetFences(ctx_.device(), 1, &fence_);
  const VkResult r = vkQueueSubmit(ctx_.queue(), 1, &si, fence_);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("vkQueueSubmit failed: {}", result_name(r)));
  in_flight_ = true;
  return Status::ok();
}

Status Stream::wait() {
  if (!in_flight_) return Status::ok();
  const VkResult r = vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  in_flight_ = false;
  for (size_t i = 0; i < descriptor_pools_.size(); ++i) vkResetDescriptorPool(ctx_.device(), descriptor_pools_[i], 0);
  pool_in_use_ = 0;
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("waiting for the GPU failed: {}", result_name(r)));
  return Status::ok();
}

Status Stream::finish() {
  RETURN_IF_ERROR(submit());
  return wait();
}

}  // namespace moetier::vk
