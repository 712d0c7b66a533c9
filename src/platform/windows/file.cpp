// platform/file.h on Windows: CreateFileW, positioned ReadFile, CreateFileMappingW +
// MapViewOfFile, GetFileAttributesExW, %LOCALAPPDATA%. Paths arrive as UTF-8 and go to the
// wide-character APIs, so any Unicode file name works whatever the ANSI code page.
#include "platform/file.h"

#include <windows.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/format.h"
#include "platform/memory.h"
#include "platform/windows/util.h"

namespace moetier::platform {

using windows_impl::last_error_text;
using windows_impl::widen;

namespace {

// ReadFile takes a DWORD count; stay well below it.
constexpr size_t kMaxReadBytes = size_t{1} << 30;

HANDLE as_handle(std::intptr_t h) { return reinterpret_cast<HANDLE>(h); }

// 100 ns intervals since 1601-01-01 (FILETIME) to ns since 1970-01-01.
int64_t filetime_to_unix_ns(const FILETIME& ft) {
  const int64_t ticks = static_cast<int64_t>((static_cast<uint64_t>(ft.dwHighDateTime) << 32) | ft.dwLowDateTime);
  constexpr int64_t kEpochDifference = 116'444'736'000'000'000;  // 1601 -> 1970 in 100 ns
  return (ticks - kEpochDifference) * 100;
}

}  // namespace

Result<File> File::open(const std::string& path) {
  const std::wstring wide = widen(path);
  // A directory cannot be opened for reading without backup semantics; say what it is.
  const DWORD attributes = ::GetFileAttributesW(wide.c_str());
  if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
    return Status::bad_input(fmt::format("'{}' is not a regular file", path));
  }
  // Others may read, write, rename or delete it meanwhile, as on Linux.
  HANDLE h = ::CreateFileW(wide.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           nullptr, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) {
    // A missing or unreadable path is a usage error (exit 2), not a runtime failure.
    return Status::bad_input(fmt::format("cannot open '{}': {}", path, last_error_text()));
  }
  // Pipes, consoles and devices (NUL, CON) are not files with a size.
  if (::GetFileType(h) != FILE_TYPE_DISK) {
    ::CloseHandle(h);
    return Status::bad_input(fmt::format("'{}' is not a regular file", path));
  }
  LARGE_INTEGER size{};
  if (!::GetFileSizeEx(h, &size)) {
    const std::string reason = last_error_text();
    ::CloseHandle(h);
    return Status::runtime(fmt::format("cannot stat '{}': {}", path, reason));
  }
  return File(path, reinterpret_cast<std::intptr_t>(h), static_cast<uint64_t>(size.QuadPart));
}

Result<File> File::open_unbuffered(const std::string& path) {
  ASSIGN_OR_RETURN(File buffered, open(path));
  HANDLE h = ::CreateFileW(widen(path).c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                           nullptr, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_NO_BUFFERING, nullptr);
  if (h == INVALID_HANDLE_VALUE) return buffered;
  File direct(path, reinterpret_cast<std::intptr_t>(h), buffered.size());
  // Sector-aligned reads: 4 KiB covers 512 B and 4 KiB sectors.
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
  if (handle_ != -1) ::CloseHandle(as_handle(handle_));
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
    const DWORD want = static_cast<DWORD>(std::min(bytes - got, kMaxReadBytes));
    // On a handle opened without FILE_FLAG_OVERLAPPED, an OVERLAPPED's offset makes this a
    // synchronous positioned read (the handle's own position is not used).
    OVERLAPPED at{};
    const uint64_t pos = offset + got;
    at.Offset = static_cast<DWORD>(pos & 0xffffffffu);
    at.OffsetHigh = static_cast<DWORD>(pos >> 32);
    DWORD n = 0;
    if (!::ReadFile(as_handle(handle_), out + got, want, &n, &at)) {
      const DWORD e = ::GetLastError();
      if (e == ERROR_HANDLE_EOF) break;  // at or past the end
      return Status::runtime(
          fmt::format("{}: read failed at byte {}: {}", path_, pos, windows_impl::error_text(e)));
    }
    if (n == 0) break;  // the end of the file
    got += n;
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

// Windows takes a sequential-access hint only when the file is opened
// (FILE_FLAG_SEQUENTIAL_SCAN, which doubles read-ahead for the whole handle); its cache
// manager already detects sequential reads on its own, so there is nothing to add here.
void File::advise_sequential(uint64_t, uint64_t) const {}

// The cache manager has no per-range "drop": unmapped cached pages go to the standby list,
// which Windows reuses first under memory pressure (and counts as available memory).
void File::drop_cached(uint64_t, uint64_t) const {}

Result<FileMapping> FileMapping::map(const File& file) {
  if (file.size() == 0) return FileMapping(nullptr, 0);
  // The section object lives as long as a view of it does: close its handle at once.
  HANDLE section = ::CreateFileMappingW(as_handle(file.handle_), nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (section == nullptr) {
    return Status::runtime(fmt::format("{}: mapping of {} failed: {}", file.path(), format_bytes(file.size()),
                                       last_error_text()));
  }
  void* p = ::MapViewOfFile(section, FILE_MAP_READ, 0, 0, 0);
  const std::string reason = p == nullptr ? last_error_text() : std::string();
  ::CloseHandle(section);
  if (p == nullptr) {
    return Status::runtime(fmt::format("{}: mapping of {} failed: {}", file.path(), format_bytes(file.size()), reason));
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
  if (data_ != nullptr) ::UnmapViewOfFile(data_);
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
  // VirtualUnlock on pages that are not locked removes them from this process's working set
  // (documented behaviour; it then fails with ERROR_NOT_LOCKED, which is expected). The
  // pages stay in the file cache and are mapped again on the next read.
  if (hi > lo) ::VirtualUnlock(reinterpret_cast<void*>(lo), hi - lo);
}

std::FILE* open_stdio_file(const std::string& path, const char* mode) {
  return ::_wfopen(widen(path).c_str(), widen(mode).c_str());
}

Result<FileInfo> file_info(const std::string& path) {
  WIN32_FILE_ATTRIBUTE_DATA data{};
  if (!::GetFileAttributesExW(widen(path).c_str(), GetFileExInfoStandard, &data)) {
    return Status::bad_input(fmt::format("cannot stat '{}': {}", path, last_error_text()));
  }
  return FileInfo{.size = (static_cast<uint64_t>(data.nFileSizeHigh) << 32) | data.nFileSizeLow,
                  .modified_ns = filetime_to_unix_ns(data.ftLastWriteTime)};
}

std::string user_cache_dir() {
  const windows_impl::EnvValue local = windows_impl::get_env(L"LOCALAPPDATA");
  return local.found ? local.value : std::string();
}

}  // namespace moetier::platform
