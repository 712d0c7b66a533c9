// Memory from and about the OS: pages, anonymous allocations with optional huge pages, work
// on the page tables of a range (read-ahead, prefault, lock), the machine's RAM, the
// huge-page mode, and this process's resident memory. The OS side (Linux: mmap, madvise,
// mlock, /proc, /sys; Windows: VirtualAlloc, VirtualLock, GlobalMemoryStatusEx,
// GetProcessMemoryInfo) lives in platform/<os>/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace moetier::platform {

// The OS's base page size in bytes (4096 on x86-64 Linux and Windows).
size_t page_size();
// The huge-page size anonymous memory can get, and so the alignment that lets every such
// piece of a region be one huge page: 2 MiB (x86-64 and arm64 with 4 KiB base pages).
size_t huge_page_size();

struct AnonymousMemoryParams {
  size_t bytes = 0;
  // 0: the page size. Otherwise a power of two that is a multiple of the page size (e.g.
  // huge_page_size(), so every aligned 2 MiB of the region can be one huge page).
  size_t alignment = 0;
  // Ask for huge pages (Linux: transparent huge pages with madvise; ignored where the OS
  // gives none): fewer page faults while filling it, fewer TLB misses reading it at random.
  bool huge_pages = false;
};

// Private, zero-filled, read-write memory straight from the OS (no heap): fresh pages are
// faulted in on first touch. Move-only; returned to the OS on destruction.
class AnonymousMemory {
 public:
  AnonymousMemory() = default;  // empty: data() == nullptr, size() == 0
  // kRuntime "cannot allocate <bytes>: <reason>". bytes == 0 gives an empty object.
  static Result<AnonymousMemory> allocate(const AnonymousMemoryParams& params);
  AnonymousMemory(AnonymousMemory&& other) noexcept;
  AnonymousMemory& operator=(AnonymousMemory&& other) noexcept;
  AnonymousMemory(const AnonymousMemory&) = delete;
  AnonymousMemory& operator=(const AnonymousMemory&) = delete;
  ~AnonymousMemory();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  AnonymousMemory(uint8_t* data, size_t size, void* base, size_t base_bytes)
      : data_(data), size_(size), base_(base), base_bytes_(base_bytes) {}
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  // What the OS handed out and takes back: data_ lies inside it (an OS that cannot give back
  // part of an allocation keeps the alignment slack; Linux trims it, so base_ == data_).
  void* base_ = nullptr;
  size_t base_bytes_ = 0;
};

// Work on the page tables of [addr, addr + bytes), a range inside a FileMapping or an
// AnonymousMemory. The range is widened to whole pages. None changes the bytes.
//
// Start reading the range's file pages in the background (a hint; returns at once).
void advise_will_need(const void* addr, size_t bytes);
// Map every page of the range now, for reading, so that later reads take no page fault
// (for a file mapping: reads the file into the cache). Linux: MADV_POPULATE_READ where the
// kernel has it (5.14+), else one read per page.
void prefault_read(const void* addr, size_t bytes);
// Map every page of anonymous memory now, writable, before filling it: one call instead of
// a page fault per page inside the copy that follows (nothing where unsupported).
void prefault_write(void* addr, size_t bytes);
// Keeps the range's pages in RAM until unmapped (faulting them in). kRuntime when the OS
// refuses: "cannot lock <bytes> in RAM: <reason> (locked-memory limit <limit>); raise it
// with 'ulimit -l unlimited' (or memlock in /etc/security/limits.conf)" on Linux: what is
// missing and how to grant it.
Status lock_in_ram(const void* addr, size_t bytes);

// The text of lock_in_ram's refusal on Windows (a pure function, so it is tested on every
// OS). Windows locks only pages that fit the process's minimum working set, so lock_in_ram
// first raises that minimum by the range (SetProcessWorkingSetSizeEx), then calls
// VirtualLock; either can fail.
struct WindowsLockFailure {
  uint64_t bytes = 0;                // what was to be locked
  bool working_set_refused = false;  // true: raising the working set failed; false: VirtualLock did
  bool privilege_missing = false;    // the error was ERROR_PRIVILEGE_NOT_HELD
  std::string reason;                // the system's text of the error
  uint64_t min_working_set = 0;      // the working set asked for, bytes
  uint64_t max_working_set = 0;
};
// "cannot lock <bytes> in RAM: <what failed>: <reason>; <what is missing and how to grant
// it>" (the caller may add ", or run without --mlock").
std::string windows_lock_error_message(const WindowsLockFailure& failure);

// The machine's RAM in bytes (nullopt: unknown).
struct MemoryInfo {
  std::optional<uint64_t> total;
  // What can be allocated without swapping: free memory plus reclaimable file cache
  // (Linux: MemAvailable).
  std::optional<uint64_t> available;
};
MemoryInfo memory_info();

// Whether anonymous memory gets huge pages (Linux:
// /sys/kernel/mm/transparent_hugepage/enabled).
enum class HugePageMode {
  kAlways,       // every large enough anonymous region
  kMadvise,      // only regions that ask (AnonymousMemoryParams::huge_pages)
  kNever,        // disabled: 4 KiB pages everywhere
  kUnavailable,  // the OS has none, or the setting cannot be read
};
HugePageMode huge_page_mode();
std::string_view huge_page_mode_name(HugePageMode mode);  // "always", "madvise", "never", "unavailable"

// For messages that tell the user where to look: where the OS keeps the huge-page setting
// (Linux: "/sys/kernel/mm/transparent_hugepage/enabled"), and what MemoryInfo::available is
// read from (Linux: "MemAvailable in /proc/meminfo").
std::string_view huge_page_setting_location();
std::string_view available_memory_source();

// How an OS names huge pages and how its user gets them, for messages (text only). Every
// OS's texts are compiled everywhere, so each OS's messages can be tested on any of them.
struct HugePageHelp {
  std::string_view name;        // "transparent huge pages" (Linux), "large pages" (Windows)
  std::string_view short_name;  // "THP", "large pages"
  std::string_view setting;     // where the setting is: huge_page_setting_location()
  std::string_view enable;      // what the user does to get them, a clause
  std::string_view available;   // what MemoryInfo::available is read from: available_memory_source()
};
enum class OsFamily { kLinux, kWindows };
HugePageHelp huge_page_help(OsFamily os);
HugePageHelp huge_page_help();  // this OS's

// How the OS backs the mapping that contains addr, in bytes (nullopt: unknown on this OS, or
// no mapping contains addr). The mapping is one allocation or FileMapping, or several
// adjacent ones with the same settings that the kernel merged.
struct RegionPages {
  std::optional<uint64_t> resident;         // in RAM (Linux: Rss)
  std::optional<uint64_t> anon_huge_pages;  // anonymous memory in huge pages (AnonHugePages)
  std::optional<uint64_t> file_huge_pages;  // file cache mapped with huge entries (FilePmdMapped)
};
RegionPages region_pages(const void* addr);

// This process's memory in RAM, bytes (nullopt: unknown).
struct ProcessMemory {
  std::optional<uint64_t> resident;       // now (Linux: VmRSS)
  std::optional<uint64_t> peak_resident;  // the most so far, or since reset_peak_resident (VmHWM)
};
ProcessMemory process_memory();
// Restarts peak_resident from the current resident size (Linux >= 4.0: /proc/self/clear_refs).
// false where not permitted: the peak then covers the whole process life.
bool reset_peak_resident();
// Returns the heap's free memory to the OS (glibc keeps it otherwise), so that the next
// resident-memory peak starts from what is really in use.
void release_free_heap();

}  // namespace moetier::platform
