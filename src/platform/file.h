// Files, read-only: a regular file opened for positioned reads, a whole-file read-only
// mapping, a path's size and modification time; and the user's cache folder. The OS side
// (Linux: open, pread, posix_fadvise, mmap, $XDG_CACHE_HOME; Windows: CreateFileW, ReadFile,
// CreateFileMappingW, _wfopen, %LOCALAPPDATA%) lives in platform/<os>/. Paths are UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "core/status.h"

namespace moetier::platform {

// A regular file open for reading. Move-only; closed on destruction. read_at is const and
// may be called from several threads at once (each call is one positioned read loop; no
// shared file position).
class File {
 public:
  // kBadInput "cannot open '<path>': <reason>" when it cannot be opened, and "'<path>' is not
  // a regular file" for a directory, pipe or device; kRuntime when it cannot be examined.
  static Result<File> open(const std::string& path);
  // The same, for reads that bypass the OS's file cache (Linux O_DIRECT, Windows
  // FILE_FLAG_NO_BUFFERING): bytes streamed into the program's own memory are then not
  // also kept in RAM by the cache. Every read's offset, size and destination address must be
  // multiples of alignment(). Where the file system refuses unbuffered reads (tmpfs) the
  // file opens buffered and alignment() is 1.
  static Result<File> open_unbuffered(const std::string& path);
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }  // bytes, when it was opened
  // 1 for a buffered file; the required offset/size/address multiple of an unbuffered one.
  uint32_t alignment() const { return alignment_; }

  // Reads up to `bytes` at `offset` into dst: retries interrupted and partial reads, so the
  // count is short only where the file ends (0 at or past the end). kRuntime when offset is
  // past size() ("...past the end...") or the OS fails: "<path>: read failed at byte N: <reason>".
  Result<size_t> read_at(uint64_t offset, void* dst, size_t bytes) const;
  // read_at that must fill all `bytes`: a short read is kRuntime
  // "<path>: read failed at byte N: unexpected end of file".
  Status read_exact(uint64_t offset, void* dst, size_t bytes) const;

  // Hints, no effect on results (ignored where the OS has none). bytes == 0: to the end.
  // The range will be read front to back: read ahead more.
  void advise_sequential(uint64_t offset, uint64_t bytes) const;
  // The range's cached pages will not be read again (they were copied elsewhere): the OS
  // may drop those no one maps, so the bytes are not in RAM twice.
  void drop_cached(uint64_t offset, uint64_t bytes) const;

 private:
  friend class FileMapping;
  File(std::string path, std::intptr_t handle, uint64_t size) : path_(std::move(path)), handle_(handle), size_(size) {}
  void close();
  std::string path_;
  std::intptr_t handle_ = -1;  // Linux: the file descriptor
  uint64_t size_ = 0;
  uint32_t alignment_ = 1;
};

// The whole file mapped read-only and shared with the OS's file cache: pages are read on
// first touch and may be evicted and read again under memory pressure. Move-only; unmapped
// on destruction (which also ends any lock_in_ram on it). Valid after its File is closed.
class FileMapping {
 public:
  // kRuntime "<path>: mmap of <size> failed: <reason>" (Linux's words). An empty file maps to
  // data() == nullptr.
  static Result<FileMapping> map(const File& file);
  FileMapping(FileMapping&& other) noexcept;
  FileMapping& operator=(FileMapping&& other) noexcept;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping();

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

  // Hint: this process no longer needs [offset, offset + bytes) of the mapping (those bytes
  // were copied elsewhere). The whole pages inside the range leave this process's page
  // tables; a later read still sees the file's bytes (read again). Pages the range only
  // partly covers stay, so neighbouring data is untouched.
  void drop_pages(uint64_t offset, uint64_t bytes);

 private:
  FileMapping(uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  void unmap();
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// std::fopen of a UTF-8 path, for files written through stdio: Windows' std::fopen reads the
// path in the ANSI code page, so this opens it with _wfopen there. nullptr with errno set
// on failure, as std::fopen.
std::FILE* open_stdio_file(const std::string& path, const char* mode);

// A path's size and last modification time (without opening it).
struct FileInfo {
  uint64_t size = 0;         // bytes
  int64_t modified_ns = 0;   // nanoseconds since 1970-01-01 UTC
};
// kBadInput "cannot stat '<path>': <reason>".
Result<FileInfo> file_info(const std::string& path);

// The folder where this user's programs keep caches (moetier adds its own folder inside):
// Linux: $XDG_CACHE_HOME when it is an absolute path, else $HOME/.cache; Windows:
// %LOCALAPPDATA%. "" when the environment names none. The folder may not exist yet.
std::string user_cache_dir();

}  // namespace moetier::platform
