// One opened GPU: its Context, memory Allocator, Pipelines and the Stream all work is
// recorded into, plus host <-> device transfers through a staging ring.
//
// Transfers keep the order of the stream: upload() records a copy from staging memory, so
// it may be called between dispatches; download() records a copy into staging memory and
// finishes the stream before reading it. Weights loaded before any compute use
// write_now(), which maps memory directly when the device allows it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "gpu/vulkan/vk_context.h"
#include "gpu/vulkan/vk_memory.h"
#include "gpu/vulkan/vk_stream.h"
#include "tensor/dtype.h"

namespace moetier::vk {

class Device {
 public:
  // emulation: as Context::create (nullopt: MOETIER_VK_SUBGROUP decides).
  static Result<std::unique_ptr<Device>> open(int device_index,
                                              std::optional<SubgroupEmulation> emulation = std::nullopt);
  ~Device();

  Context& context() { return *ctx_; }
  const DeviceInfo& info() const { return ctx_->info(); }
  Allocator& allocator() { return *alloc_; }
  Stream& stream() { return *stream_; }

  // Records host → device: `bytes` from `data` into dst (through the staging ring).
  Status upload(const BufferRef& dst, const void* data, uint64_t bytes);
  // Finishes the stream, then copies device → host.
  Status download(const BufferRef& src, void* data, uint64_t bytes);
  // Several device → host copies behind one finish (one GPU round trip).
  struct Download {
    BufferRef src;
    void* data = nullptr;
    uint64_t bytes = 0;
  };
  Status download(std::span<const Download> downloads);
  // Immediate write when nothing is recorded or running (weights at load time): a memcpy
  // into mapped memory, else a staged copy that is finished at once.
  Status write_now(const BufferRef& dst, const void* data, uint64_t bytes);
  // Allocates and fills a buffer (write_now).
  Result<BufferRef> create_buffer(const void* data, uint64_t bytes, MemoryUse use);

 private:
  Device() = default;
  Result<BufferRef> staging(uint64_t bytes);
  Status download_pieces(const BufferRef& src, void* data, uint64_t bytes);
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<Pipelines> pipelines_;
  std::unique_ptr<Stream> stream_;
  BufferRef ring_;          // staging ring, reset whenever the stream has been waited for
  uint64_t ring_used_ = 0;
  uint64_t ring_epoch_ = 0;
};

// A weight matrix, or a stack of matrices (experts), in GPU memory in its GGUF block format,
// split into parts of whole rows (whole matrices for stacks) so that no part exceeds the
// device's storage-buffer range.
struct GpuMatrix {
  DType type = DType::F32;
  int64_t n_in = 0, n_out = 0, n_mat = 1;
  int64_t row_bytes = 0;
  struct Part {
    BufferRef buffer;
    int64_t first = 0;  // first row (2-D) or first matrix (stack) in this part
    int64_t count = 0;
  };
  std::vector<Part> parts;
  uint64_t bytes() const { return static_cast<uint64_t>(row_bytes * n_out * n_mat); }
};

// Uploads rows of `type` (row_bytes each): n_out rows per matrix, n_mat matrices.
Result<GpuMatrix> upload_matrix(Device& dev, DType type, int64_t n_in, int64_t n_out, int64_t n_mat, int64_t row_bytes,
                                const uint8_t* data);

// Bytes of one activation row of `n` elements in activation type `type` on the GPU: the
// CPU's layout, padded to a multiple of 4 bytes (Q8_0 rows of an odd block count).
uint64_t gpu_activation_row_bytes(DType type, int64_t n);

}  // namespace moetier::vk
