#include "gpu/vulkan/vk_device.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace moetier::vk {

namespace {
constexpr uint64_t kRingBytes = 32ull << 20;
}

Result<std::unique_ptr<Device>> Device::open(int device_index, std::optional<SubgroupEmulation> emulation) {
  std::unique_ptr<Device> d(new Device());
  ASSIGN_OR_RETURN(d->ctx_, Context::create(device_index, emulation));
  d->alloc_ = std::make_unique<Allocator>(*d->ctx_);
  d->pipelines_ = std::make_unique<Pipelines>(*d->ctx_);
  d->stream_ = std::make_unique<Stream>(*d->ctx_, *d->pipelines_);
  ASSIGN_OR_RETURN(d->ring_, d->alloc_->allocate_staging(kRingBytes));
  return d;
}

Device::~Device() {
  if (stream_) (void)stream_->finish();
  stream_.reset();
  pipelines_.reset();
  alloc_.reset();
}

Result<BufferRef> Device::staging(uint64_t bytes) {
  const uint64_t aligned = (bytes + 255) / 256 * 256;
  if (aligned > ring_.size) return alloc_->allocate_staging(bytes);  // rare: a one-off buffer
  if (!stream_->recording()) {  // once the last submission is done, nothing can still read the ring
    RETURN_IF_ERROR(stream_->wait());
    ring_used_ = 0;
  }
  if (ring_used_ + aligned > ring_.size) {
    RETURN_IF_ERROR(stream_->finish());
    ring_used_ = 0;
  }
  BufferRef r = ring_.slice(ring_used_, bytes);
  ring_used_ += aligned;
  return r;
}

Status Device::upload(const BufferRef& dst, const void* data, uint64_t bytes) {
  if (bytes == 0) return Status::ok();
  CHECK(bytes <= dst.size);
  stream_->count_transfer(bytes, 0);
  // Large uploads go in ring-sized pieces.
  const auto* src = static_cast<const uint8_t*>(data);
  for (uint64_t off = 0; off < bytes; off += kRingBytes / 2) {
    const uint64_t n = std::min<uint64_t>(kRingBytes / 2, bytes - off);
    ASSIGN_OR_RETURN(BufferRef s, staging(n));
    std::memcpy(s.mapped, src + off, n);
    stream_->copy(s, dst.slice(off, n), n);
  }
  return Status::ok();
}

Status Device::download(const BufferRef& src, void* data, uint64_t bytes) {
  const Download one{.src = src, .data = data, .bytes = bytes};
  return download(std::span<const Download>(&one, 1));
}

Status Device::download(std::span<const Download> downloads) {
  // Mapped sources are read after one finish; the others are staged together when they fit
  // the ring, each copied in pieces otherwise.
  // The ones too big to stage together go first (each finishes the stream and reuses the
  // ring, which must not yet hold staged results).
  std::vector<const Download*> small;
  uint64_t staged_bytes = 0;
  for (const Download& d : downloads) stream_->count_transfer(0, d.bytes);
  for (const Download& d : downloads) {
    CHECK(d.bytes <= d.src.size);
    if (d.bytes == 0 || d.src.mapped) continue;
    const uint64_t aligned = (d.bytes + 255) / 256 * 256;
    if (staged_bytes + aligned > kRingBytes / 2) {
      RETURN_IF_ERROR(download_pieces(d.src, d.data, d.bytes));
    } else {
      small.push_back(&d);
      staged_bytes += aligned;
    }
  }
  if (ring_used_ + staged_bytes > ring_.size) {  // make them fit the ring together
    RETURN_IF_ERROR(stream_->finish());
    ring_used_ = 0;
  }
  std::vector<std::pair<BufferRef, const Download*>> staged;
  for (const Download* dp : small) {
    const Download& d = *dp;
    ASSIGN_OR_RETURN(BufferRef s, staging(d.bytes));
    stream_->copy(d.src, s, d.bytes);
    staged.emplace_back(s, &d);
  }
  RETURN_IF_ERROR(stream_->finish());
  for (const Download& d : downloads) {
    if (d.bytes > 0 && d.src.mapped) std::memcpy(d.data, d.src.mapped, d.bytes);
  }
  for (const auto& [s, d] : staged) std::memcpy(d->data, s.mapped, d->bytes);
  return Status::ok();
}

Status Device::download_pieces(const BufferRef& src, void* data, uint64_t bytes) {
  auto* dst = static_cast<uint8_t*>(data);
  for (uint64_t off = 0; off < bytes; off += kRingBytes / 2) {
    const uint64_t n = std::min<uint64_t>(kRingBytes / 2, bytes - off);
    ASSIGN_OR_RETURN(BufferRef s, staging(n));
    stream_->copy(src.slice(off, n), s, n);
    RETURN_IF_ERROR(stream_->finish());
    std::memcpy(dst + off, s.mapped, n);
  }
  return Status::ok();
}

Status Device::write_now(const BufferRef& dst, const void* data, uint64_t bytes) {
  if (dst.mapped && !stream_->recording()) {
    RETURN_IF_ERROR(stream_->wait());
    std::memcpy(dst.mapped, data, bytes);
    return Status::ok();
  }
  RETURN_IF_ERROR(upload(dst, data, bytes));
  return stream_->finish();
}

Result<BufferRef> Device::create_buffer(const void* data, uint64_t bytes, MemoryUse use) {
  ASSIGN_OR_RETURN(BufferRef b, alloc_->allocate(bytes, use));
  if (data) {
    RETURN_IF_ERROR(write_now(b, data, bytes));
  } else {
    stream_->fill_zero(b);
    RETURN_IF_ERROR(stream_->finish());
  }
  return b;
}

Result<GpuMatrix> upload_matrix(Device& dev, DType type, int64_t n_in, int64_t n_out, int64_t n_mat, int64_t row_bytes,
                                const uint8_t* data) {
  GpuMatrix m{.type = type, .n_in = n_in, .n_out = n_out, .n_mat = n_mat, .row_bytes = row_bytes};
  const uint64_t max_range = dev.allocator().max_range();
  const bool stack = n_mat > 1;
  const uint64_t unit_bytes = static_cast<uint64_t>(row_bytes) * (stack ? n_out : 1);  // one matrix or one row
  const int64_t units = stack ? n_mat : n_out;
  if (unit_bytes > max_range) {
    return Status::runtime(fmt::format("a {} of {} bytes does not fit one GPU buffer binding ({} bytes)",
                                       stack ? "matrix of the stack" : "row", unit_bytes, max_range));
  }
  const int64_t per_part = static_cast<int64_t>(std::min<uint64_t>(max_range / unit_bytes, static_cast<uint64_t>(units)));
  for (int64_t first = 0; first < units; first += per_part) {
    const int64_t count = std::min(per_part, units - first);
    const uint64_t bytes = unit_bytes * static_cast<uint64_t>(count);
    ASSIGN_OR_RETURN(BufferRef b, dev.allocator().allocate(bytes, MemoryUse::kWeights));
    RETURN_IF_ERROR(dev.write_now(b, data + unit_bytes * static_cast<uint64_t>(first), bytes));
    m.parts.push_back({.buffer = b, .first = first, .count = count});
  }
  return m;
}

uint64_t gpu_activation_row_bytes(DType type, int64_t n) {
  const uint64_t bytes = static_cast<uint64_t>(dtype_row_bytes(type, n));
  return (bytes + 3) / 4 * 4;
}

}  // namespace moetier::vk
