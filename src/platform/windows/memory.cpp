// platform/memory.h on Windows: VirtualAlloc (large pages when the user holds the "Lock pages
// in memory" right), PrefetchVirtualMemory, VirtualLock, GlobalMemoryStatusEx, VirtualQuery
// with QueryWorkingSetEx, GetProcessMemoryInfo.
#include "platform/memory.h"

#include <windows.h>
#include <malloc.h>
#include <psapi.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/format.h"
#include "platform/windows/util.h"

namespace moetier::platform {

using windows_impl::last_error_text;
using windows_impl::widen_to_pages;

namespace {

const SYSTEM_INFO& system_info() {
  static const SYSTEM_INFO info = [] {
    SYSTEM_INFO si{};
    ::GetSystemInfo(&si);
    return si;
  }();
  return info;
}

// Large pages need SeLockMemoryPrivilege ("Lock pages in memory") held by the user and
// enabled in this process's token; enabling it is the one-time step here. A process-wide
// fact: the right is granted at sign-in and does not change while the program runs.
bool large_pages_usable() {
  static const bool usable = [] {
    if (::GetLargePageMinimum() == 0) return false;
    HANDLE token = nullptr;
    if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_ADJUST_PRIVILEGES | TOKEN_QUERY, &token)) return false;
    TOKEN_PRIVILEGES tp{};
    tp.PrivilegeCount = 1;
    tp.Privileges[0].Attributes = SE_PRIVILEGE_ENABLED;
    bool enabled = false;
    if (::LookupPrivilegeValueW(nullptr, L"SeLockMemoryPrivilege", &tp.Privileges[0].Luid) &&
        ::AdjustTokenPrivileges(token, FALSE, &tp, 0, nullptr, nullptr)) {
      // AdjustTokenPrivileges succeeds with ERROR_NOT_ALL_ASSIGNED when the user lacks the right.
      enabled = ::GetLastError() == ERROR_SUCCESS;
    }
    ::CloseHandle(token);
    return enabled;
  }();
  return usable;
}

}  // namespace

size_t page_size() { return static_cast<size_t>(system_info().dwPageSize); }

// x64's large page (GetLargePageMinimum() there); region alignment needs no more.
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
  if (params.huge_pages && large_pages_usable()) {
    // Large pages are committed, zeroed and locked in RAM at once (never paged out), and
    // aligned to their size. Windows needs physically contiguous 2 MiB pieces: when memory
    // is too fragmented this fails, and small pages follow (region_pages tells which).
    const size_t large = ::GetLargePageMinimum();
    if (align <= large) {
      const size_t large_bytes = (bytes + large - 1) / large * large;
      void* p = ::VirtualAlloc(nullptr, large_bytes, MEM_RESERVE | MEM_COMMIT | MEM_LARGE_PAGES, PAGE_READWRITE);
      if (p != nullptr) return AnonymousMemory(static_cast<uint8_t*>(p), params.bytes, p, large_bytes);
    }
  }
  // VirtualAlloc aligns to the allocation granularity (64 KiB). For more, reserve the
  // alignment on top and commit the aligned part; Windows releases only whole
  // reservations, so the slack stays reserved (address space only, no memory).
  const size_t granularity = system_info().dwAllocationGranularity;
  if (align <= granularity) {
    void* p = ::VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (p == nullptr) {
      return Status::runtime(fmt::format("cannot allocate {}: {}", format_bytes(params.bytes), last_error_text()));
    }
    return AnonymousMemory(static_cast<uint8_t*>(p), params.bytes, p, bytes);
  }
  const size_t span = bytes + align;
  void* base = ::VirtualAlloc(nullptr, span, MEM_RESERVE, PAGE_NOACCESS);
  if (base == nullptr) {
    return Status::runtime(fmt::format("cannot allocate {}: {}", format_bytes(params.bytes), last_error_text()));
  }
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + align - 1) & ~static_cast<uintptr_t>(align - 1);
  if (::VirtualAlloc(reinterpret_cast<void*>(aligned), bytes, MEM_COMMIT, PAGE_READWRITE) == nullptr) {
    const std::string reason = last_error_text();
    ::VirtualFree(base, 0, MEM_RELEASE);
    return Status::runtime(fmt::format("cannot allocate {}: {}", format_bytes(params.bytes), reason));
  }
  return AnonymousMemory(reinterpret_cast<uint8_t*>(aligned), params.bytes, base, span);
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
  // Releasing the reservation also ends any VirtualLock on it.
  if (base_ != nullptr) ::VirtualFree(base_, 0, MEM_RELEASE);
  data_ = nullptr;
  size_ = 0;
  base_ = nullptr;
  base_bytes_ = 0;
}

void advise_will_need(const void* addr, size_t bytes) {
  if (bytes == 0) return;
  const auto r = widen_to_pages(addr, bytes, page_size());
  WIN32_MEMORY_RANGE_ENTRY range{.VirtualAddress = r.ptr(), .NumberOfBytes = r.bytes};
  ::PrefetchVirtualMemory(::GetCurrentProcess(), 1, &range, 0);
}

void prefault_read(const void* addr, size_t bytes) {
  if (bytes == 0) return;
  const size_t page = page_size();
  const auto r = widen_to_pages(addr, bytes, page);
  // Windows has no "populate" call: read the file pages in large I/Os first, then touch
  // each page (a soft fault per page, no disk wait).
  WIN32_MEMORY_RANGE_ENTRY range{.VirtualAddress = r.ptr(), .NumberOfBytes = r.bytes};
  ::PrefetchVirtualMemory(::GetCurrentProcess(), 1, &range, 0);
  volatile uint8_t sink = 0;
  for (uintptr_t a = r.begin; a < r.begin + r.bytes; a += page) sink = sink + *reinterpret_cast<const uint8_t*>(a);
}

// No write-populate call on Windows: the copy that follows faults the pages in.
void prefault_write(void*, size_t) {}

Status lock_in_ram(const void* addr, size_t bytes) {
  if (bytes == 0) return Status::ok();
  const auto r = widen_to_pages(addr, bytes, page_size());
  // Locked pages count against the process's minimum working set (a few hundred KiB by
  // default), so VirtualLock of anything large fails until the minimum grows by the range.
  HANDLE self = ::GetCurrentProcess();
  SIZE_T min_ws = 0, max_ws = 0;
  DWORD flags = 0;
  if (!::GetProcessWorkingSetSizeEx(self, &min_ws, &max_ws, &flags)) {
    return Status::runtime(fmt::format("cannot lock {} in RAM: cannot read the working-set size: {}",
                                       format_bytes(bytes), last_error_text()));
  }
  const SIZE_T want_min = min_ws + r.bytes;
  const SIZE_T want_max = std::max<SIZE_T>(max_ws, want_min + (SIZE_T{64} << 20));
  WindowsLockFailure failure{.bytes = bytes, .min_working_set = want_min, .max_working_set = want_max};
  // Soft limits (the default): the maximum is a hint to the memory manager, not a cap.
  if (!::SetProcessWorkingSetSizeEx(self, want_min, want_max,
                                    QUOTA_LIMITS_HARDWS_MIN_DISABLE | QUOTA_LIMITS_HARDWS_MAX_DISABLE)) {
    const DWORD e = ::GetLastError();
    failure.working_set_refused = true;
    failure.privilege_missing = e == ERROR_PRIVILEGE_NOT_HELD;
    failure.reason = windows_impl::error_text(e);
    return Status::runtime(windows_lock_error_message(failure));
  }
  if (!::VirtualLock(r.ptr(), r.bytes)) {
    const DWORD e = ::GetLastError();
    ::SetProcessWorkingSetSizeEx(self, min_ws, max_ws, flags);
    failure.privilege_missing = e == ERROR_PRIVILEGE_NOT_HELD;
    failure.reason = windows_impl::error_text(e);
    return Status::runtime(windows_lock_error_message(failure));
  }
  return Status::ok();
}

MemoryInfo memory_info() {
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof(status);
  if (!::GlobalMemoryStatusEx(&status)) return {};
  // ullAvailPhys counts free, zeroed and standby (reclaimable file cache) pages.
  return {.total = static_cast<uint64_t>(status.ullTotalPhys), .available = static_cast<uint64_t>(status.ullAvailPhys)};
}

// Windows has no transparent huge pages: regions that ask get large pages when the user may
// lock pages (which is what large pages are), and none otherwise.
HugePageMode huge_page_mode() { return large_pages_usable() ? HugePageMode::kMadvise : HugePageMode::kUnavailable; }

std::string_view huge_page_setting_location() { return huge_page_help(OsFamily::kWindows).setting; }

std::string_view available_memory_source() { return huge_page_help(OsFamily::kWindows).available; }

RegionPages region_pages(const void* addr) {
  MEMORY_BASIC_INFORMATION mbi{};
  if (::VirtualQuery(addr, &mbi, sizeof(mbi)) == 0 || mbi.State == MEM_FREE) return {};
  // The allocation (one VirtualAlloc or one mapped view) is the run of regions sharing its base.
  const auto* base = static_cast<const uint8_t*>(mbi.AllocationBase);
  uint64_t committed = 0;
  for (const uint8_t* p = base;;) {
    MEMORY_BASIC_INFORMATION r{};
    if (::VirtualQuery(p, &r, sizeof(r)) == 0 || r.AllocationBase != mbi.AllocationBase) break;
    if (r.State == MEM_COMMIT) committed += r.RegionSize;
    p = static_cast<const uint8_t*>(r.BaseAddress) + r.RegionSize;
  }
  RegionPages out;
  if (mbi.Type == MEM_PRIVATE) {
    // A large-page allocation is large pages throughout: one page's attributes tell.
    PSAPI_WORKING_SET_EX_INFORMATION ws{};
    ws.VirtualAddress = const_cast<void*>(addr);
    if (::QueryWorkingSetEx(::GetCurrentProcess(), &ws, sizeof(ws))) {
      out.anon_huge_pages = ws.VirtualAttributes.Valid && ws.VirtualAttributes.LargePage ? committed : 0;
    }
  } else if (mbi.Type == MEM_MAPPED) {
    out.file_huge_pages = 0;  // Windows maps the file cache with small pages only
  }
  return out;
}

ProcessMemory process_memory() {
  PROCESS_MEMORY_COUNTERS pmc{};
  pmc.cb = sizeof(pmc);
  if (!::GetProcessMemoryInfo(::GetCurrentProcess(), &pmc, sizeof(pmc))) return {};
  return {.resident = static_cast<uint64_t>(pmc.WorkingSetSize),
          .peak_resident = static_cast<uint64_t>(pmc.PeakWorkingSetSize)};
}

// Windows keeps the peak working set for the process's whole life.
bool reset_peak_resident() { return false; }

void release_free_heap() {
  ::_heapmin();
  ::HeapCompact(::GetProcessHeap(), 0);
}

}  // namespace moetier::platform
