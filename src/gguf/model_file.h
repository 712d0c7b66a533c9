// A GGUF file opened for its tensor data: mmap (default), or read into RAM (--no-mmap)
// with large sequential reads, a progress bar and the achieved GB/s; optional mlock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "gguf/gguf.h"

namespace moetier::gguf {

enum class LoadMode {
  kMmap,  // map the file read-only; pages come from the page cache on first touch
  kRead,  // --no-mmap: read the data section into an anonymous buffer
};

struct LoadOptions {
  LoadMode mode = LoadMode::kMmap;
  bool mlock = false;     // --mlock: lock the tensor data in RAM (failure is an error)
  bool progress = true;   // progress bar on stderr for kRead and prefaulting
  bool prefault = true;   // kMmap: map every page at load (when it fits in free memory)
  bool huge_pages = true; // kRead: madvise(MADV_HUGEPAGE) the buffer
  bool verbose = true;    // one summary line (mode, bytes, GB/s) on stderr
};

struct LoadStats {
  uint64_t bytes = 0;     // data section bytes made available
  double seconds = 0;
  double gb_per_second = 0;
};

class ModelFile {
 public:
  static Result<std::unique_ptr<ModelFile>> open(const std::string& path, const LoadOptions& options);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const GgufFile& header() const { return header_; }
  // Pointer to a tensor's bytes (header().tensors[i].n_bytes long). Valid for the
  // lifetime of this object.
  const uint8_t* tensor_data(const TensorInfo& t) const;
  const LoadStats& stats() const { return stats_; }
  LoadMode mode() const { return mode_; }

 private:
  ModelFile() = default;
  GgufFile header_;
  LoadMode mode_ = LoadMode::kMmap;
  LoadStats stats_;
  // kMmap: the whole file mapped at `map_`; kRead: data section in `buffer_`.
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint8_t* buffer_ = nullptr;
  size_t buffer_bytes_ = 0;
  bool locked_ = false;
  bool prefaulted_ = false;
};

}  // namespace moetier::gguf
