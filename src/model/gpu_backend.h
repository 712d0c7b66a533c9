// The engine's view of a GPU backend (Vulkan today; a CUDA backend would implement the same
// interface beside it): a LayerExec for the layers placed on the GPU, moving the residual
// stream between host and device at the edges of GPU layers, the LM head, and the GPU part
// of each sequence's memory. Created from the placement plan at load (load_model); the
// DecoderModel owns it. All errors are values: a device lost or out of memory ends the
// forward pass with a clear Status.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/gpu_census.h"
#include "core/profiler.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "cpu/matmul.h"
#include "model/arch.h"
#include "model/layer_exec.h"
#include "state/sequence_state.h"

namespace moetier {

struct GpuBackendOptions {
  int device = 0;                    // -dev: index from --list-devices
  int64_t n_ubatch = 512;            // largest micro-batch (sizes the scratch buffers)
  int64_t n_layer = 0;
  std::vector<bool> layer_on_gpu;    // dense part (norms, attention/DeltaNet, router, shared expert)
  std::vector<bool> experts_on_gpu;  // routed experts
  bool output_on_gpu = false;        // output_norm + output (the LM head)
  uint64_t memory_limit_bytes = 0;   // refuse GPU allocations beyond this (0: the device's own limit)
  bool op_offload = true;            // see GpuPlacement
  uint64_t op_offload_limit_bytes = 0;  // see GpuPlacement
  int64_t op_offload_min_tokens = 32;
  bool op_offload_always = false;
  bool exact_kernels = false;        // see GpuPlacement
  std::vector<int> expert_cache_slots;  // see GpuPlacement
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  // The executor for layer `layer` of a micro-batch laid out as `seqs`. prepare = true only
  // uploads the weights the layer's blocks use (done once at load, with a progress bar).
  virtual LayerExec& begin_layer(int layer, std::span<const SeqRows> seqs, ThreadPool& pool, Profiler* profiler,
                                 bool prepare) = 0;
  // The residual stream [n][n_embd] host → GPU before the first GPU layer, and back after the
  // last one (or before a CPU layer).
  virtual Status upload_x(const float* x, int64_t n) = 0;
  virtual Status download_x(float* x, int64_t n) = 0;
  // logits [logit_rows.size()][n_vocab] = output · rmsnorm(x[row]) · output_norm, from the
  // residual stream on the GPU. prepare = true only uploads the two tensors.
  virtual Status lm_head(const cpu::WeightMatrix& output, const float* output_norm, std::span<const int64_t> logit_rows,
                         float* logits, bool prepare) = 0;
  // Completes every recorded GPU command; the first error the executor met, if any.
  virtual Status finish() = 0;

  // The GPU part of a sequence's memory, for the layers the specs mark on_device.
  virtual Result<std::unique_ptr<DeviceState>> new_state(const std::vector<LayerStateSpec>& specs,
                                                         const KvCacheOptions& options) = 0;
  virtual GpuMemoryReport memory() const = 0;
  // The census since the last call (and restarts it); timestamps: time every dispatch from
  // now on (costs a query per dispatch; for bench --profile).
  virtual GpuCensus take_census() = 0;
  virtual void set_timestamps(bool on) = 0;
  // "Vulkan (fast kernels)" and the device, for reports.
  virtual std::string describe() const = 0;
  // The VRAM expert cache's counters (zero when there is none).
  virtual GpuExpertCacheStats expert_cache_stats() const { return {}; }
};

struct GpuDeviceInfo {
  std::string description;  // one line: "llvmpipe (...), CPU (software), 2.0 GiB, Vulkan 1.3.230, ..."
  bool software = false;    // a rasteriser running on the CPU (lavapipe): slower than the CPU path
  uint64_t free_bytes = 0;  // device-local budget − usage (the heap size without VK_EXT_memory_budget)
  uint64_t used_bytes = 0;  // used by every process (0: unknown)
  bool free_from_driver = false;  // free_bytes came from VK_EXT_memory_budget (else: the heap size)
  // The OS's name of the adapter (Vulkan's deviceLUID), where the driver reports one: the
  // engine asks the OS for the budget when the driver does not (platform/gpu_memory.h).
  std::optional<std::array<uint8_t, 8>> luid;
  // Indented lines for `--list-devices -v`: subgroups, the kernels' vendor defaults.
  std::string details;
};

}  // namespace moetier
