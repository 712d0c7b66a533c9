// A GGUF file opened for its tensor data: mapped (default), or read into RAM (--no-mmap)
// with large sequential reads, a progress bar and the achieved GB/s; optional mlock.
// With mmap, the routed experts can be moved out of the mapping into anonymous huge-page
// memory at open (--expert-pages, gguf/expert_pages.h); tensor_data() then returns the
// moved copy, so nothing that binds weights needs to know.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/expert_pages.h"
#include "gguf/gguf.h"
#include "platform/file.h"
#include "platform/memory.h"

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
  bool huge_pages = true; // kRead: ask for huge pages for the buffer
  bool verbose = true;    // one summary line (mode, bytes, GB/s) on stderr
  // kMmap: the tensors to move into anonymous huge-page memory (by name: the routed
  // experts the CPU computes with; the caller knows which stay on the CPU), whether to
  // (decide_expert_pages), the RAM the caller will allocate next for the RAM rule (KV
  // cache, state, scratch; bytes) and the copy threads (0: min(4, hardware threads)).
  // Ignored by kRead, whose buffer has huge pages already.
  std::vector<std::string> expert_tensors;
  ExpertPages expert_pages = ExpertPages::kAuto;
  uint64_t working_bytes = 0;
  int copy_threads = 0;
  // Tensors the load leaves in the file, never read, prefaulted or moved: the routed experts
  // an expert store (engine/expert_store.h) reads on demand when they do not fit in RAM.
  // With any, kRead maps the file and copies every other tensor into memory instead of
  // reading the whole data section.
  std::vector<std::string> streamed_tensors;
};

struct LoadStats {
  uint64_t bytes = 0;     // data section bytes made available
  double seconds = 0;     // the whole open (read, or move + prefault)
  double gb_per_second = 0;
  uint64_t moved_bytes = 0;   // expert bytes moved into anonymous memory (0: none)
  double move_seconds = 0;
  // One line, without a prefix, on what happened to expert_tensors: "moved 17.3 GiB of
  // routed experts into huge-page memory in 4.1 s (...)", or why they stay mapped and what
  // that costs; for kRead, what 4 KiB pages cost where the OS gives no huge pages. Empty
  // when there was nothing to say (kRead with huge pages, no expert tensors). The caller
  // prints it (the session as "moetier: ...").
  std::string expert_pages_note;
};

class ModelFile {
 public:
  static Result<std::unique_ptr<ModelFile>> open(const std::string& path, const LoadOptions& options);
  // The same with the header already read (read_header(path)): callers that plan the
  // placement from the header first, to know which experts stay on the CPU.
  static Result<std::unique_ptr<ModelFile>> open(const std::string& path, GgufFile header,
                                                 const LoadOptions& options);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const GgufFile& header() const { return header_; }
  // Pointer to a tensor's bytes (header().tensors[i].n_bytes long). Valid for the
  // lifetime of this object.
  // Moved tensors (see LoadOptions::expert_tensors) return their copy.
  const uint8_t* tensor_data(const TensorInfo& t) const;
  // Was this tensor moved into anonymous memory?
  bool moved(const TensorInfo& t) const { return find_moved(t) != nullptr; }
  // A tensor's bytes when they are in memory this object owns (--no-mmap's buffer, or a
  // moved copy), so they may be rewritten in place; nullptr for the file mapping.
  uint8_t* owned_tensor_data(const TensorInfo& t);
  // Rows repacked in place into cpu/interleave.h's layout (by whoever did it; the binder
  // reads this to give the matrix that layout). Only for owned tensors, and for streamed
  // ones (LoadOptions::streamed_tensors), whose reader repacks each piece it reads.
  void set_interleaved(const TensorInfo& t);
  bool interleaved(const TensorInfo& t) const;
  const LoadStats& stats() const { return stats_; }
  LoadMode mode() const { return mode_; }

 private:
  ModelFile() = default;
  // A moved tensor: its data-section range and where its copy lives.
  struct Moved {
    uint64_t offset = 0;  // TensorInfo::offset
    uint64_t bytes = 0;
    uint8_t* data = nullptr;
  };
  const Moved* find_moved(const TensorInfo& t) const;
  // Moves options.expert_tensors when decide_expert_pages says so; returns the decision
  // (its reason is set when they stay mapped).
  // `forced`: move `names` without asking decide_expert_pages (kRead of a streamed model).
  Result<ExpertPagesDecision> move_experts(const platform::File& file, const GgufFile& header,
                                           const std::vector<std::string>& names, const LoadOptions& options,
                                           uint64_t data_bytes, bool forced);
  GgufFile header_;
  LoadMode mode_ = LoadMode::kMmap;
  LoadStats stats_;
  // kMmap: the whole file mapped in `map_`; kRead: data section in `buffer_`.
  std::optional<platform::FileMapping> map_;
  platform::AnonymousMemory buffer_;
  bool locked_ = false;
  bool prefaulted_ = false;
  // kMmap with moved experts: one anonymous region (huge-page aligned, asking for huge
  // pages) holding the copies; moved_ sorted by offset.
  platform::AnonymousMemory moved_region_;
  std::vector<Moved> moved_;
  std::set<uint64_t> interleaved_;
  std::set<uint64_t> streamed_;  // offsets of LoadOptions::streamed_tensors  // TensorInfo::offset of the interleaved tensors
};

}  // namespace moetier::gguf
