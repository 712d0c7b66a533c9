// platform/file.h on Linux: open + fstat, pread loops, posix_fadvise, mmap, $XDG_CACHE_HOME.
#include "platform/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "core/format.h"
#include "platform/linux/util.h"
#include "platform/memory.h"

namespace moetier::platform {

using linux_impl::errno_text;

namespace {
// Linux transfers at most 0x7ffff000 bytes per read call; ask for less.
constexpr size_t kMaxReadBytes = size_t{1} << 30;
}  // namespace

Result<File> File::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below); it changes
  // nothing for a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    // A missing or unreadable path is a usage error (exit 2), not a runtime failure.
    return Status::bad_input(fmt::format("cannot open '{}': {}", path, errno_text(e)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::runtime(fmt::format("cannot stat '{}': {}", path, errno_text(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::bad_input(fmt::format("'{}' is not a regular file", path));
  }
  return File(path, fd, static_cast<uint64_t>(st.st_size));
}

Result<File> File::open_unbuffered(const std::string& path) {
  ASSIGN_OR_RETURN(File buffered, open(path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd < 0) return buffered;  // EINVAL: the file system has no direct I/O (tmpfs)
  File direct(path, fd, buffered.size());
  // 4 KiB covers every logical block size in use (512 B and 4 KiB sectors).
  direct.alignment_ = 4096;
  return direct;
}

File::File(File&& other) noexcept
    : path_(std::move(other.path_)), handle_(other.handle_), size_(other.size_), alignment_(other.alignment_) {
  other.handle_ = -1;
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    handle_ = other.handle_;
    size_ = other.size_;
    alignment_ = other.alignment_;
    other.handle_ = -1;
  }
  return *this;
}

File::~File() { close(); }

void File::close() {
  if (handle_ >= 0) ::close(static_cast<int>(handle_));
  handle_ = -1;
}

Result<size_t> File::read_at(uint64_t offset, void* dst, size_t bytes) const {
  if (offset > size_) {
    return Status::runtime(
        fmt::format("{}: read at byte {} is past the end of the file ({} bytes)", path_, offset, size_));
  }
  auto* out = static_cast<uint8_t*>(dst);
  size_t got = 0;
  while (got < bytes) {
    const size_t want = std::min(bytes - got, kMaxReadBytes);
    const ssize_t r = ::pread(static_cast<int>(handle_), out + got, want, static_cast<off_t>(offset + got));
    if (r < 0) {
      const int e = errno;
      if (e == EINTR) continue;
      return Status::runtime(fmt::format("{}: read failed at byte {}: {}", path_, offset + got, errno_text(e)));
    }
    if (r == 0) break;  // the end of the file
    got += static_cast<size_t>(r);
  }
  return got;
}

Status File::read_exact(uint64_t offset, void* dst, size_t bytes) const {
  ASSIGN_OR_RETURN(const size_t got, read_at(offset, dst, bytes));
  if (got < bytes) {
    return Status::runtime(fmt::format("{}: read failed at byte {}: unexpected end of file", path_, offset + got));
  }
  return Status::ok();
}

void File::advise_sequential(uint64_t offset, uint64_t bytes) const {
  if (handle_ < 0) return;
  ::posix_fadvise(static_cast<int>(handle_), static_cast<off_t>(offset), static_cast<off_t>(bytes),
                  POSIX_FADV_SEQUENTIAL);
}

void File::drop_cached(uint64_t offset, uint64_t bytes) const {
  if (handle_ < 0) return;
  ::posix_fadvise(static_cast<int>(handle_), static_cast<off_t>(offset), static_cast<off_t>(bytes),
                  POSIX_FADV_DONTNEED);
}

Result<FileMapping> FileMapping::map(const File& file) {
  if (file.size() == 0) return FileMapping(nullptr, 0);
  void* p = ::mmap(nullptr, file.size(), PROT_READ, MAP_SHARED, static_cast<int>(file.handle_), 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    return Status::runtime(
        fmt::format("{}: mmap of {} failed: {}", file.path(), format_bytes(file.size()), errno_text(e)));
  }
  return FileMapping(static_cast<uint8_t*>(p), file.size());
}

FileMapping::FileMapping(FileMapping&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

FileMapping& FileMapping::operator=(FileMapping&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

FileMapping::~FileMapping() { unmap(); }

void FileMapping::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void FileMapping::drop_pages(uint64_t offset, uint64_t bytes) {
  if (data_ == nullptr || offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  // Inward to whole pages: a page the range only partly covers holds other data too.
  const uintptr_t page = page_size();
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(data_) + offset + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(data_) + offset + bytes) & ~(page - 1);
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

std::FILE* open_stdio_file(const std::string& path, const char* mode) { return std::fopen(path.c_str(), mode); }

Result<FileInfo> file_info(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    return Status::bad_input(fmt::format("cannot stat '{}': {}", path, errno_text(e)));
  }
  return FileInfo{.size = static_cast<uint64_t>(st.st_size),
                  .modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::string user_cache_dir() {
  return linux_impl::cache_dir_from(std::getenv("XDG_CACHE_HOME"), std::getenv("HOME"));
}

}  // namespace moetier::platform
