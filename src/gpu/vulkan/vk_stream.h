// Recording and submitting GPU work: compute pipelines made from the embedded shaders
// (created on first use per set of specialization constants, kept in the on-disk pipeline
// cache), and a Stream that records dispatches and copies into one command buffer, submits
// it, and waits for it.
//
//   Stream s(ctx, pipelines);
//   s.dispatch("rms_norm", {x, w, out}, push, groups);   // recorded
//   s.submit();  ... CPU work ...  s.wait();             // or s.finish() for both
//
// Barriers only where needed: the Stream knows, from each shader's SPIR-V, which of its
// bindings it writes (bindings declared `readonly` it only reads), and keeps the byte ranges
// read and written since the last barrier. A dispatch or copy gets a barrier before it only
// when it reads or writes a range written since then, or writes a range read since then;
// independent work (the q/k/v projections of one input, the router and the shared expert)
// runs without one. The census (GpuCensus) counts dispatches, barriers, submits, host waits
// and bytes, and with timestamps on, GPU time per shader.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_census.h"
#include "core/status.h"
#include "gpu/vulkan/vk_context.h"
#include "gpu/vulkan/vk_memory.h"

namespace moetier::vk {

inline constexpr uint32_t kMaxBindings = 8;
inline constexpr uint32_t kMaxPushBytes = 128;

inline constexpr uint32_t kMaxSpecConstants = 8;

// Specialization constants of a shader variant: constant_id i gets values[i] for i < count.
// Fast shaders use constant_id 0 for their workgroup size (local_size_x_id = 0).
struct Spec {
  std::array<uint32_t, kMaxSpecConstants> values{};
  uint32_t count = 0;
  Spec() = default;
  Spec(std::initializer_list<uint32_t> v) {
    CHECK(v.size() <= kMaxSpecConstants);
    for (uint32_t x : v) values[count++] = x;
  }
};

struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  uint32_t n_bindings = 0;
  std::array<bool, kMaxBindings> writes{};  // binding i is written (not declared readonly)
};

// Which descriptor bindings (set 0) a SPIR-V compute shader declares and which of them it
// may write. Errors for a malformed module.
struct BindingAccess {
  uint32_t n_bindings = 0;  // highest binding + 1
  std::array<bool, kMaxBindings> writes{};
  bool subgroup_ops = false;  // declares a GroupNonUniform capability (native subgroup operations)
};
Result<BindingAccess> reflect_bindings(std::span<const uint32_t> spirv);

class Pipelines {
 public:
  explicit Pipelines(const Context& ctx);
  ~Pipelines();
  // The pipeline of the named shader variant with these specialization constants; errors
  // when it does not exist or fails to build (which names the shader).
  Result<Pipeline> get(std::string_view name, const Spec& spec = {});
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
  Status dispatch(std::string_view shader, const Spec& spec, std::initializer_list<BufferRef> bindings,
                  const void* push, uint32_t push_bytes, Groups groups);
  template <class Push>
  Status dispatch(std::string_view shader, std::initializer_list<BufferRef> bindings, const Push& push, Groups groups) {
    static_assert(sizeof(Push) <= kMaxPushBytes);
    return dispatch(shader, Spec{}, bindings, &push, sizeof(Push), groups);
  }
  template <class Push>
  Status dispatch(std::string_view shader, const Spec& spec, std::initializer_list<BufferRef> bindings,
                  const Push& push, Groups groups) {
    static_assert(sizeof(Push) <= kMaxPushBytes);
    return dispatch(shader, spec, bindings, &push, sizeof(Push), groups);
  }
  void copy(const BufferRef& src, const BufferRef& dst, uint64_t bytes);
  void fill_zero(const BufferRef& dst);

  // The census since the last take_census(); counting is always on, timestamps only when
  // set_timestamps(true) (they cost a query per dispatch).
  GpuCensus take_census();
  void set_timestamps(bool on) { timestamps_ = on; }
  // Weight bytes the last recorded dispatch(es) read (called by the matmul launchers).
  void count_weight_bytes(uint64_t bytes) {
    census_.weight_bytes += bytes;
    if (last_op_) last_op_->weight_bytes += bytes;
  }
  void count_transfer(uint64_t up, uint64_t down) {
    census_.bytes_up += up;
    census_.bytes_down += down;
  }

  // Submits what was recorded (nothing to do when empty); wait() blocks until the GPU is
  // done with it; finish() = submit() + wait(). Errors: device lost, out of memory.
  Status submit();
  Status wait();
  Status finish();
  bool recording() const { return recording_; }
  uint64_t dispatches() const { return n_dispatch_; }

 private:
  struct Range {
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t begin = 0, end = 0;
  };
  void begin();
  void barrier();
  // Records a barrier first when an access to `reads` / `writes` depends on earlier work
  // since the last barrier; then remembers them.
  void order(std::span<const Range> reads, std::span<const Range> writes);
  void read_timestamps();
  VkDescriptorSet allocate_set();
  std::vector<Range> pending_reads_, pending_writes_;
  GpuCensus census_;
  GpuCensus::Op* last_op_ = nullptr;  // the census entry of the last dispatch's shader
  bool timestamps_ = false;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;
  uint32_t queries_used_ = 0;
  std::vector<std::string> query_names_;  // shader of query i (query 0: the start)
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
