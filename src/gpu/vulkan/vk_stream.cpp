#include "gpu/vulkan/vk_stream.h"

#include <array>

#include <fmt/format.h>

#include "gpu/vulkan/vk_shaders.h"

namespace moetier::vk {

namespace {
constexpr uint32_t kSetsPerPool = 1024;
constexpr uint32_t kMaxQueries = 4096;  // timestamps per command buffer (one per dispatch, plus the start)

// SPIR-V opcodes and decorations the binding reflection reads.
constexpr uint32_t kOpTypeStruct = 30, kOpTypePointer = 32, kOpVariable = 59, kOpDecorate = 71, kOpMemberDecorate = 72;
constexpr uint32_t kDecorationNonWritable = 24, kDecorationBinding = 33;
constexpr uint32_t kOpCapability = 17;
constexpr uint32_t kCapabilityGroupNonUniform = 61, kCapabilityGroupNonUniformQuad = 68;  // 61 ... 68: the KHR subgroup set

bool overlaps(const auto& a, const auto& b) { return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end; }
}  // namespace

Result<BindingAccess> reflect_bindings(std::span<const uint32_t> spirv) {
  if (spirv.size() < 5 || spirv[0] != 0x07230203u) return Status::runtime("not a SPIR-V module");
  std::map<uint32_t, uint32_t> binding_of;           // variable id → binding
  std::map<uint32_t, bool> var_non_writable;         // variable id → decorated NonWritable
  std::map<uint32_t, std::map<uint32_t, bool>> member_non_writable;  // struct id → member → NonWritable
  std::map<uint32_t, uint32_t> members_of;           // struct id → member count
  std::map<uint32_t, uint32_t> pointee;              // pointer type id → pointee type id
  std::map<uint32_t, uint32_t> type_of_var;          // variable id → pointer type id
  bool subgroup_ops = false;
  for (size_t i = 5; i < spirv.size();) {
    const uint32_t words = spirv[i] >> 16, op = spirv[i] & 0xFFFFu;
    if (words == 0 || i + words > spirv.size()) return Status::runtime("malformed SPIR-V module");
    const uint32_t* w = &spirv[i];
    if (op == kOpCapability && words >= 2) {
      subgroup_ops = subgroup_ops || (w[1] >= kCapabilityGroupNonUniform && w[1] <= kCapabilityGroupNonUniformQuad);
    } else if (op == kOpDecorate && words >= 3) {
      if (w[2] == kDecorationBinding && words >= 4) binding_of[w[1]] = w[3];
      if (w[2] == kDecorationNonWritable) var_non_writable[w[1]] = true;
    } else if (op == kOpMemberDecorate && words >= 4 && w[3] == kDecorationNonWritable) {
      member_non_writable[w[1]][w[2]] = true;
    } else if (op == kOpTypeStruct) {
      members_of[w[1]] = words - 2;
    } else if (op == kOpTypePointer && words >= 4) {
      pointee[w[1]] = w[3];
    } else if (op == kOpVariable && words >= 4) {
      type_of_var[w[2]] = w[1];
    }
    i += words;
  }
  BindingAccess out;
  out.subgroup_ops = subgroup_ops;
  for (const auto& [var, binding] : binding_of) {
    if (binding >= kMaxBindings) return Status::runtime(fmt::format("binding {} beyond the {} the layout has", binding, kMaxBindings));
    out.n_bindings = std::max(out.n_bindings, binding + 1);
    bool read_only = var_non_writable.count(var) > 0;
    if (!read_only && type_of_var.count(var) && pointee.count(type_of_var[var])) {
      const uint32_t st = pointee[type_of_var[var]];
      const uint32_t n = members_of.count(st) ? members_of[st] : 0;
      read_only = n > 0 && member_non_writable.count(st) && member_non_writable[st].size() == n;
    }
    out.writes[binding] = !read_only;
  }
  return out;
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

Result<Pipeline> Pipelines::get(std::string_view requested, const Spec& spec) {
  std::string key(requested);
  for (uint32_t i = 0; i < spec.count; ++i) key += fmt::format(":{}", spec.values[i]);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  // Subgroup emulation (DeviceInfo::emulated_subgroup): a shader with subgroup operations
  // runs as its "<name>_sgW" variant, which does them W wide in shared memory.
  const auto& info = ctx_.info();
  const std::string emulated = info.emulated_subgroup ? fmt::format("{}_sg{}", requested, info.emulated_subgroup) : "";
  const ShaderBinary* binary = nullptr;
  const ShaderBinary* emulated_binary = nullptr;
  for (const auto& b : shader_binaries()) {
    if (b.name == requested) binary = &b;
    if (!emulated.empty() && b.name == emulated) emulated_binary = &b;
  }
  if (!binary) return Status::runtime(fmt::format("no GPU shader named '{}' (a bug: the shader list is built in)", requested));
  if (emulated_binary) binary = emulated_binary;
  const std::string_view name = binary->name;
  const VkShaderModuleCreateInfo smi{.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = binary->words.size() * sizeof(uint32_t),
                                     .pCode = binary->words.data()};
  VkShaderModule module = VK_NULL_HANDLE;
  VkResult r = vkCreateShaderModule(ctx_.device(), &smi, nullptr, &module);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("shader '{}': vkCreateShaderModule: {}", name, result_name(r)));
  auto access = reflect_bindings(binary->words);
  if (!access) return Status::runtime(fmt::format("shader '{}': {}", name, access.status().message()));
  if (info.emulated_subgroup && access->subgroup_ops) {
    // Native subgroups of another width would silently give the emulated sizes wrong sums.
    vkDestroyShaderModule(ctx_.device(), module, nullptr);
    return Status::runtime(fmt::format("shader '{}' uses subgroup operations and has no variant emulating {}-wide "
                                       "subgroups (a bug: add it to shaders.cmake)", name, info.emulated_subgroup));
  }
  std::array<VkSpecializationMapEntry, kMaxSpecConstants> entries{};
  for (uint32_t i = 0; i < spec.count; ++i) entries[i] = {.constantID = i, .offset = 4 * i, .size = 4};
  const VkSpecializationInfo spec_info{.mapEntryCount = spec.count,
                                       .pMapEntries = entries.data(),
                                       .dataSize = 4 * spec.count,
                                       .pData = spec.values.data()};
  // Fast shaders (workgroup size as constant 0, a multiple of the largest subgroup) ask for
  // full subgroups, so their subgroup reductions see whole subgroups on every vendor. Under
  // emulation no pipeline uses native subgroups, and none asks for anything about them.
  const bool full = !info.emulated_subgroup && spec.count > 0 && info.full_subgroups && info.max_subgroup_size > 0 &&
                    spec.values[0] % info.max_subgroup_size == 0;
  const VkComputePipelineCreateInfo cpi{
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .flags = full ? VkPipelineShaderStageCreateFlags{VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT}
                              : VkPipelineShaderStageCreateFlags{0},
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = spec.count > 0 ? &spec_info : nullptr},
      .layout = layout_};
  Pipeline p{.layout = layout_, .n_bindings = access->n_bindings, .writes = access->writes};
  r = vkCreateComputePipelines(ctx_.device(), ctx_.pipeline_cache(), 1, &cpi, nullptr, &p.pipeline);
  vkDestroyShaderModule(ctx_.device(), module, nullptr);
  if (r != VK_SUCCESS) return Status::runtime(fmt::format("shader '{}': vkCreateComputePipelines: {}", name, result_name(r)));
  cache_.emplace(std::move(key), p);
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
  if (ctx_.info().timestamps) {
    const VkQueryPoolCreateInfo qpi{.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = kMaxQueries};
    if (vkCreateQueryPool(ctx_.device(), &qpi, nullptr, &query_pool_) != VK_SUCCESS) query_pool_ = VK_NULL_HANDLE;
  }
}

Stream::~Stream() {
  if (in_flight_) vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  for (auto p : descriptor_pools_) vkDestroyDescriptorPool(ctx_.device(), p, nullptr);
  if (query_pool_) vkDestroyQueryPool(ctx_.device(), query_pool_, nullptr);
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
  // Work of an earlier submission may still run: order it before this one (one barrier per
  // command buffer; pipeline barriers reach across command buffers of a queue).
  barrier();
  queries_used_ = 0;
  query_names_.clear();
  if (timestamps_ && query_pool_) {
    vkCmdResetQueryPool(cmd_, query_pool_, 0, kMaxQueries);
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, query_pool_, queries_used_++);
    query_names_.emplace_back();
  }
}

void Stream::barrier() {
  const VkMemoryBarrier mb{.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr, 0,
                       nullptr);
  ++census_.barriers;
  pending_reads_.clear();
  pending_writes_.clear();
}

void Stream::order(std::span<const Range> reads, std::span<const Range> writes) {
  bool hazard = false;
  for (const Range& r : reads) {
    for (const Range& w : pending_writes_) hazard = hazard || overlaps(r, w);
  }
  for (const Range& r : writes) {
    for (const Range& w : pending_writes_) hazard = hazard || overlaps(r, w);
    for (const Range& w : pending_reads_) hazard = hazard || overlaps(r, w);
  }
  if (hazard) barrier();
  pending_reads_.insert(pending_reads_.end(), reads.begin(), reads.end());
  pending_writes_.insert(pending_writes_.end(), writes.begin(), writes.end());
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

Status Stream::dispatch(std::string_view shader, const Spec& spec, std::initializer_list<BufferRef> bindings,
                        const void* push, uint32_t push_bytes, Groups groups) {
  if (bindings.size() > kMaxBindings || push_bytes > kMaxPushBytes) {
    return Status::runtime(fmt::format("shader '{}': too many bindings or push constants", shader));
  }
  ASSIGN_OR_RETURN(Pipeline p, pipelines_.get(shader, spec));
  if (bindings.size() < p.n_bindings) {
    return Status::runtime(fmt::format("shader '{}' has {} bindings, {} given (a bug)", shader, p.n_bindings, bindings.size()));
  }
  const auto& limit = ctx_.info().max_workgroup_count;
  CHECK(groups.x >= 1 && groups.y >= 1 && groups.z >= 1 && groups.x <= limit[0] && groups.y <= limit[1] &&
        groups.z <= limit[2]);
  begin();
  std::array<Range, kMaxBindings> read_ranges{}, write_ranges{};
  size_t n_reads = 0, n_writes = 0, binding = 0;
  for (const BufferRef& b : bindings) {
    const Range r{.buffer = b.buffer, .begin = b.offset, .end = b.offset + b.size};
    if (binding < p.n_bindings && p.writes[binding]) {
      write_ranges[n_writes++] = r;
    } else {
      read_ranges[n_reads++] = r;
    }
    ++binding;
  }
  order(std::span<const Range>(read_ranges.data(), n_reads), std::span<const Range>(write_ranges.data(), n_writes));
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
  ++n_dispatch_;
  ++census_.dispatches;
  auto& op = census_.ops[std::string(shader)];
  ++op.dispatches;
  last_op_ = &op;
  if (timestamps_ && query_pool_ && queries_used_ < kMaxQueries) {
    vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, query_pool_, queries_used_++);
    query_names_.emplace_back(shader);
  }
  return Status::ok();
}

void Stream::copy(const BufferRef& src, const BufferRef& dst, uint64_t bytes) {
  begin();
  const Range r{.buffer = src.buffer, .begin = src.offset, .end = src.offset + bytes};
  const Range w{.buffer = dst.buffer, .begin = dst.offset, .end = dst.offset + bytes};
  order(std::span<const Range>(&r, 1), std::span<const Range>(&w, 1));
  ++census_.transfers;
  const VkBufferCopy region{.srcOffset = src.offset, .dstOffset = dst.offset, .size = bytes};
  vkCmdCopyBuffer(cmd_, src.buffer, dst.buffer, 1, &region);
}

void Stream::fill_zero(const BufferRef& dst) {
  begin();
  const uint64_t bytes = (dst.size + 3) / 4 * 4;
  const Range w{.buffer = dst.buffer, .begin = dst.offset, .end = dst.offset + bytes};
  order({}, std::span<const Range>(&w, 1));
  ++census_.transfers;
  vkCmdFillBuffer(cmd_, dst.buffer, dst.offset, bytes, 0);
}

void Stream::read_timestamps() {
  if (queries_used_ < 2 || !query_pool_) return;
  std::vector<uint64_t> ticks(queries_used_);
  if (vkGetQueryPoolResults(ctx_.device(), query_pool_, 0, queries_used_, ticks.size() * 8, ticks.data(), 8,
                            VK_QUERY_RESULT_64_BIT) != VK_SUCCESS) {
    return;
  }
  // A dispatch's time: from the previous dispatch's end to its own (with no barrier between
  // them they overlap, and the time goes to the one that ends last).
  const double period = ctx_.info().timestamp_period_ns;
  for (uint32_t q = 1; q < queries_used_; ++q) {
    const uint64_t t = ticks[q] > ticks[q - 1] ? ticks[q] - ticks[q - 1] : 0;
    census_.ops[query_names_[q]].gpu_ns += static_cast<double>(t) * period;
  }
  census_.timed = true;
  queries_used_ = 0;
}

GpuCensus Stream::take_census() {
  GpuCensus c = std::move(census_);
  census_ = {};
  last_op_ = nullptr;
  return c;
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
  ++census_.submits;
  return Status::ok();
}

Status Stream::wait() {
  if (!in_flight_) return Status::ok();
  ++census_.syncs;
  if (vkGetFenceStatus(ctx_.device(), fence_) != VK_SUCCESS) ++census_.host_waits;
  const VkResult r = vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  in_flight_ = false;
  if (r == VK_SUCCESS) read_timestamps();
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
