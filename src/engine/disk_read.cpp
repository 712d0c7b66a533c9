#include "engine/disk_read.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "platform/file.h"
#include "platform/memory.h"

namespace moetier {

Result<DiskReadResult> measure_disk_read(const std::string& path, const DiskReadParams& params) {
  ASSIGN_OR_RETURN(const platform::File file, platform::File::open_unbuffered(path));
  const uint64_t align = std::max<uint64_t>(4096, file.alignment());
  const uint64_t chunk = std::max<uint64_t>(align, params.chunk_bytes / align * align);
  DiskReadResult result{.unbuffered = file.alignment() > 1};
  if (file.size() < chunk) return result;
  // Chunk offsets over the whole file, aligned; a fixed seed so runs read the same places.
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<uint64_t> pick(0, (file.size() - chunk) / align);
  std::vector<uint64_t> offsets(static_cast<size_t>(std::max(1, params.chunks)));
  for (uint64_t& o : offsets) o = pick(rng) * align;
  const int threads = std::max(1, params.threads);
  std::vector<platform::AnonymousMemory> buffers;
  for (int i = 0; i < threads; ++i) {
    ASSIGN_OR_RETURN(platform::AnonymousMemory m, platform::AnonymousMemory::allocate({.bytes = chunk}));
    buffers.push_back(std::move(m));
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::mutex error_mutex;
  Status error;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i; (i = next++) < offsets.size();) {
        auto got = file.read_at(offsets[i], buffers[static_cast<size_t>(t)].data(), static_cast<size_t>(chunk));
        if (!got) {
          std::lock_guard lock(error_mutex);
          if (error) error = got.status();
          return;
        }
        bytes += *got;
        if (file.alignment() == 1) file.drop_cached(offsets[i], chunk);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (!error) return error;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bytes = bytes.load();
  result.gb_per_second = result.seconds > 0 ? static_cast<double>(result.bytes) / result.seconds / 1e9 : 0;
  return result;
}

}  // namespace moetier
