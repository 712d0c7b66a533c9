// platform/memory.h on Linux: mmap/madvise/mlock, /proc/meminfo, transparent huge pages in
// /sys, /proc/self/smaps and /proc/self/status.
#include "platform/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "core/format.h"
#include "platform/linux/proc_text.h"
#include "platform/linux/util.h"

namespace moetier::platform {

using linux_impl::errno_text;
using linux_impl::widen_to_pages;

size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));  // fixed for the process
  return page;
}

// The PMD size THP uses with 4 KiB base pages on x86-64 and arm64 (the machines moetier
// runs on); region alignment needs no more.
size_t huge_page_size() { return size_t{2} << 20; }

Result<AnonymousMemory> AnonymousMemory::allocate(const AnonymousMemoryParams& params) {
  if (params.bytes == 0) return AnonymousMemory();
  const size_t page = page_size();
  const size_t align = params.alignment == 0 ? page : params.alignment;
  if (align < page || (align & (align - 1)) != 0) {
    return Status::bad_input(
        fmt::format("alignment {} is not a power of two at least the page size ({})", align, page));
  }
  const size_t bytes = (params.bytes + page - 1) / page * page;
  // Over-allocate by the alignment and give back the unaligned head and the tail.
  const size_t span = align > page ? bytes + align : bytes;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    return Status::runtime(fmt::format("cannot allocate {}: {}", format_bytes(params.bytes), errno_text(e)));
  }
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (raw + align - 1) & ~static_cast<uintptr_t>(align - 1);
  if (aligned > raw) ::munmap(p, aligned - raw);
  const uintptr_t tail = aligned + bytes;
  if (raw + span > tail) ::munmap(reinterpret_cast<void*>(tail), raw + span - tail);
  // Transparent huge pages for this region (honoured in "madvise" and "always" modes).
  if (params.huge_pages) ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return AnonymousMemory(reinterpret_cast<uint8_t*>(aligned), params.bytes, reinterpret_cast<void*>(aligned), bytes);
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      base_(std::exchange(other.base_, nullptr)),
      base_bytes_(std::exchange(other.base_bytes_, 0)) {}

AnonymousMemory& AnonymousMemory::operator=(AnonymousMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    base_ = std::exchange(other.base_, nullptr);
    base_bytes_ = std::exchange(other.base_bytes_, 0);
  }
  return *this;
}

AnonymousMemory::~AnonymousMemory() { release(); }

void AnonymousMemory::release() {
  // munmap also ends any mlock on the range.
  if (base_ != nullptr) ::munmap(base_, base_bytes_);
  data_ = nullptr;
  size_ = 0;
  base_ = nullptr;
  base_bytes_ = 0;
}

void advise_will_need(const void* addr, size_t bytes) {
  if (bytes == 0) return;
  const auto r = widen_to_pages(addr, bytes, page_size());
  ::madvise(r.ptr(), r.bytes, MADV_WILLNEED);
}

void prefault_read(const void* addr, size_t bytes) {
  if (bytes == 0) return;
  const size_t page = page_size();
  const auto r = widen_to_pages(addr, bytes, page);
#ifdef MADV_POPULATE_READ
  // Linux 5.14+: fills the page tables in one call.
  if (::madvise(r.ptr(), r.bytes, MADV_POPULATE_READ) == 0) return;
#endif
  // Older kernels: one read per page, one page fault at a time.
  volatile uint8_t sink = 0;
  for (uintptr_t a = r.begin; a < r.begin + r.bytes; a += page) sink = sink + *reinterpret_cast<const uint8_t*>(a);
}

void prefault_write(void* addr, size_t bytes) {
  if (bytes == 0) return;
#ifdef MADV_POPULATE_WRITE
  const auto r = widen_to_pages(addr, bytes, page_size());
  ::madvise(r.ptr(), r.bytes, MADV_POPULATE_WRITE);  // harmless when unsupported: the copy faults instead
#endif
}

namespace {
std::string memlock_limit_text() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return "unknown";
  if (lim.rlim_cur == RLIM_INFINITY) return "unlimited";
  return format_bytes(lim.rlim_cur);
}
}  // namespace

Status lock_in_ram(const void* addr, size_t bytes) {
  if (bytes == 0) return Status::ok();
  const auto r = widen_to_pages(addr, bytes, page_size());
  if (::mlock(r.ptr(), r.bytes) != 0) {
    const int e = errno;
    return Status::runtime(procfs::lock_error_message(bytes, errno_text(e), memlock_limit_text()));
  }
  return Status::ok();
}

MemoryInfo memory_info() { return procfs::parse_meminfo(linux_impl::read_text_file("/proc/meminfo")); }

namespace {
// Transparent huge pages' mode: "always [madvise] never".
constexpr const char* kThpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled";
}  // namespace

HugePageMode huge_page_mode() { return procfs::parse_thp_enabled(linux_impl::read_text_file(kThpEnabled)); }

std::string_view huge_page_setting_location() { return huge_page_help(OsFamily::kLinux).setting; }

std::string_view available_memory_source() { return huge_page_help(OsFamily::kLinux).available; }

RegionPages region_pages(const void* addr) {
  return procfs::parse_smaps_entry(linux_impl::read_text_file("/proc/self/smaps"), reinterpret_cast<uintptr_t>(addr));
}

ProcessMemory process_memory() {
  return procfs::parse_process_status(linux_impl::read_text_file("/proc/self/status"));
}

bool reset_peak_resident() {
  // "5" resets the peak resident set size (VmHWM) to the current one.
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

void release_free_heap() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace moetier::platform
