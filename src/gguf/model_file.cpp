// Making a GGUF file's tensor data addressable: mmap (pages fault in on first use, shared
// with the page cache) or read into private anonymous memory (--no-mmap: pays the read up
// front at disk speed, immune to page-cache eviction). Either way, optionally mlock'ed.
#include "gguf/model_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/progress.h"

namespace moetier::gguf {
namespace {

// 64 MiB reads: large enough that per-call overhead is noise even at 10+ GB/s, small enough
// for a smooth progress bar.
constexpr uint64_t kReadChunkBytes = 64ull << 20;

// Closes a file descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Bytes from the data section start to the end of the last tensor (padding after it is
// not needed). The header guarantees every tensor lies inside the file.
uint64_t used_data_bytes(const GgufFile& h) {
  uint64_t end = 0;
  for (const TensorInfo& t : h.tensors) end = std::max(end, t.offset + t.n_bytes);
  return end;
}

// MemAvailable from /proc/meminfo in bytes (0 when unknown).
uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "MemAvailable: %lu kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib * 1024;
}

// Maps every page of [data, data + bytes) in 64 MiB steps with a progress bar:
// MADV_POPULATE_READ (Linux 5.14+) fills the page tables in bulk; where it is missing,
// touching one byte per page does the same one fault at a time.
void prefault(const uint8_t* data, uint64_t bytes, bool progress) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first_page = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end_addr = reinterpret_cast<uintptr_t>(data) + bytes;
  ::madvise(reinterpret_cast<void*>(first_page), end_addr - first_page, MADV_WILLNEED);
  ProgressBar bar({.label = "prefault", .total = bytes, .bytes = true, .enabled = progress && bytes >= (1ull << 30)});
  volatile uint8_t sink = 0;
  constexpr uintptr_t kStep = 64ull << 20;
  bool populate = true;
  for (uintptr_t addr = first_page; addr < end_addr;) {
    const uintptr_t next = std::min(end_addr, addr + kStep);
#ifdef MADV_POPULATE_READ
    if (populate && ::madvise(reinterpret_cast<void*>(addr), next - addr, MADV_POPULATE_READ) != 0) populate = false;
#else
    populate = false;
#endif
    if (!populate) {
      for (uintptr_t a = std::max(addr, reinterpret_cast<uintptr_t>(data)); a < next; a += page) {
        sink = sink + *reinterpret_cast<const uint8_t*>(a);
      }
    }
    addr = next;
    bar.update(std::min<uint64_t>(bytes, next - reinterpret_cast<uintptr_t>(data)));
  }
  bar.finish();
}

std::string memlock_limit_text() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return "unknown";
  if (lim.rlim_cur == RLIM_INFINITY) return "unlimited";
  return format_bytes(lim.rlim_cur);
}

Status lock_range(const std::string& path, const void* addr, size_t bytes) {
  if (bytes == 0) return Status::ok();
  // mlock works on whole pages; round the start down to a page boundary.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(addr) / page * page;
  const size_t len = bytes + (reinterpret_cast<uintptr_t>(addr) - begin);
  if (::mlock(reinterpret_cast<void*>(begin), len) != 0) {
    const int e = errno;
    return Status::runtime(fmt::format(
        "{}: --mlock could not lock {} of tensor data: {} (locked-memory limit {}); raise it with 'ulimit -l "
        "unlimited' (or memlock in /etc/security/limits.conf), or run without --mlock",
        path, format_bytes(bytes), std::strerror(e), memlock_limit_text()));
  }
  return Status::ok();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path, const LoadOptions& options) {
  ASSIGN_OR_RETURN(GgufFile header, read_header(path));
  const auto start = std::chrono::steady_clock::now();

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::bad_input(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  FdCloser closer{fd};
  // The header was validated against this size; a file changed since then is refused.
  const off_t size_now = ::lseek(fd, 0, SEEK_END);
  if (size_now < 0 || static_cast<uint64_t>(size_now) != header.file_size) {
    return Status::runtime(fmt::format("{}: the file changed size while being opened", path));
  }

  std::unique_ptr<ModelFile> mf(new ModelFile());
  mf->mode_ = options.mode;
  const uint64_t data_bytes = used_data_bytes(header);
  mf->stats_.bytes = data_bytes;

  if (options.mode == LoadMode::kMmap) {
    void* map = ::mmap(nullptr, header.file_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      return Status::runtime(
          fmt::format("{}: mmap of {} failed: {}", path, format_bytes(header.file_size), std::strerror(errno)));
    }
    mf->map_ = map;
    mf->map_bytes_ = header.file_size;
    uint8_t* data = static_cast<uint8_t*>(map) + header.data_offset;
    if (options.mlock) {
      // Locking faults every page in: this is the actual read of the file.
      RETURN_IF_ERROR(lock_range(path, data, data_bytes));
      mf->locked_ = true;
    } else if (options.prefault && data_bytes > 0 && data_bytes < available_memory_bytes()) {
      // Map every page now (reading the file through the page cache) so that decoding does
      // not take a page fault each time a token first routes to an expert. Skipped when
      // the data cannot fit in free memory: then paging on demand is the only option.
      prefault(data, data_bytes, options.progress);
      mf->prefaulted_ = true;
    }
  } else if (data_bytes > 0) {
    void* buf = ::mmap(nullptr, data_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
      return Status::runtime(fmt::format("{}: cannot allocate {} for --no-mmap: {}", path, format_bytes(data_bytes),
                                         std::strerror(errno)));
    }
    mf->buffer_ = static_cast<uint8_t*>(buf);
    mf->buffer_bytes_ = data_bytes;
    // Ask for transparent huge pages: 2 MiB pages cut page faults while reading and TLB
    // misses when experts are read at random (ignored where THP is off).
    if (options.huge_pages) ::madvise(buf, data_bytes, MADV_HUGEPAGE);
    if (options.mlock) {
      RETURN_IF_ERROR(lock_range(path, buf, data_bytes));
      mf->locked_ = true;
    }
    ::posix_fadvise(fd, static_cast<off_t>(header.data_offset), static_cast<off_t>(data_bytes), POSIX_FADV_SEQUENTIAL);
    ProgressBar bar({.label = "loading", .total = data_bytes, .bytes = true, .enabled = options.progress});
    uint64_t done = 0;
    while (done < data_bytes) {
      const size_t want = static_cast<size_t>(std::min(kReadChunkBytes, data_bytes - done));
#ifdef MADV_POPULATE_WRITE
      // Fault the chunk's pages in with one call: far cheaper than pread taking one page
      // fault per 4 KiB page of fresh anonymous memory (harmless when unsupported).
      ::madvise(mf->buffer_ + done, want, MADV_POPULATE_WRITE);
#endif
      const ssize_t got = ::pread(fd, mf->buffer_ + done, want, static_cast<off_t>(header.data_offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        return Status::runtime(fmt::format("{}: read failed at byte {}: {}", path, header.data_offset + done,
                                           got < 0 ? std::strerror(errno) : "unexpected end of file"));
      }
      done += static_cast<uint64_t>(got);
      bar.update(done);
    }
    bar.finish();
  }

  mf->stats_.seconds = seconds_since(start);
  mf->stats_.gb_per_second = mf->stats_.seconds > 0 ? static_cast<double>(data_bytes) / mf->stats_.seconds / 1e9 : 0;
  if (options.verbose) {
    if (options.mode == LoadMode::kRead) {
      std::fprintf(stderr, "%s: read %s of tensor data in %.2f s (%.2f GB/s, --no-mmap%s)\n", path.c_str(),
                   format_bytes(data_bytes).c_str(), mf->stats_.seconds, mf->stats_.gb_per_second,
                   mf->locked_ ? ", mlock" : "");
    } else {
      std::fprintf(stderr, "%s: mapped %s of tensor data (mmap%s)\n", path.c_str(), format_bytes(data_bytes).c_str(),
                   mf->locked_       ? ", mlock: all pages resident"
                   : mf->prefaulted_ ? fmt::format(", prefaulted in {:.2f} s", mf->stats_.seconds).c_str()
                                     : "; pages load on first use");
    }
  }
  mf->header_ = std::move(header);
  return mf;
}

ModelFile::~ModelFile() {
  // munmap also drops any mlock on the range.
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  if (buffer_ != nullptr) ::munmap(buffer_, buffer_bytes_);
}

const uint8_t* ModelFile::tensor_data(const TensorInfo& t) const {
  if (map_ != nullptr) return static_cast<const uint8_t*>(map_) + t.file_offset;
  CHECK_MSG(t.offset + t.n_bytes <= buffer_bytes_, "tensor '{}' is not in this file's data", t.name);
  return buffer_ + t.offset;
}

}  // namespace moetier::gguf
