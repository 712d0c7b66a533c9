// Recording and submitting GPU work: compute pipelines made from the embedded shaders
// (created on first use, kept in the on-disk pipeline cache), and a Stream that records
// dispatches and copies into one command buffer, submits it, and waits for it.
//
//   Stream s(ctx, pipelines);
//   s.dispatch("rms_norm", {x, w, out}, push, groups);   // recorded, with a barrier after
//   s.submit();  ... CPU work ...  s.wait();             // or s.finish() for both
//
// Every dispatch is followed by a full memory barrier: simple and always correct; kernels
// of one layer depend on each other almost everywhere anyway.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gpu/vulkan/vk_context.h"
#include "gpu/vulkan/vk_memory.h"

namespace moetier::vk {

inline constexpr uint32_t kMaxBindings = 8;
inline constexpr uint32_t kMaxPushBytes = 128;

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
};

class Pipelines {
 public:
  explicit Pipelines(const Context& ctx);
  ~Pipelines();
  // The pipeline of the named shader variant; errors when it does not exist or fails to
  // build (which names the shader).
  Result<Pipeline> get(std::string_view name);
  VkDescriptorSetLayout set_layout() const { return set_layout_; }

 private:
  const Context& ctx_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::map<std::string, Pipeline, std::less<>> cache_;
};

struct Groups {
  uint32_t x = 1, y = 1, z = 1;
};

class Stream {
 public:
  Stream(const Context& ctx, Pipelines& pipelines);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Records a dispatch of the named shader with `bindings` at binding 0, 1, ... and
  // `push_bytes` of push constants. Fails (and records nothing) for an unknown shader or
  // more than kMaxBindings / kMaxPushBytes. Workgroup counts above the device's limit are
  // the caller's error (CHECKed).
  Status dispatch(std::string_view shader, std::initializer_list<BufferRef> bindings, const void* push,
                  uint32_t push_bytes, Groups groups);
  template <class Push>
  Status dispatch(std::string_view shader, std::initializer_list<BufferRef> bindings, const Push& push, Groups groups) {
    static_assert(sizeof(Push) <= kMaxPushBytes);
    return dispatch(shader, bindings, &push, sizeof(Push), groups);
  }
  void copy(const BufferRef& src, const BufferRef& dst, uint64_t bytes);
  void fill_zero(const BufferRef& dst);

  // Submits what was recorded (nothing to do when empty); wait() blocks until the GPU is
  // done with it; finish() = submit() + wait(). Errors: device lost, out of memory.
  Status submit();
  Status wait();
  Status finish();
  bool recording() const { return recording_; }
  uint64_t dispatches() const { return n_dispatch_; }

 private:
  void begin();
  void barrier();
  VkDescriptorSet allocate_set();
  const Context& ctx_;
  Pipelines& pipelines_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t pool_in_use_ = 0;
  bool recording_ = false;
  bool in_flight_ = false;
  uint64_t n_dispatch_ = 0;
};

}  // namespace moetier::vk
