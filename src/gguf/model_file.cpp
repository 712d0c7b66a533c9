// Making a GGUF file's tensor data addressable: a file mapping (pages fault in on first use, shared
// with the page cache) or read into private anonymous memory (--no-mmap: pays the read up
// front at disk speed, immune to page-cache eviction). Either way, optionally mlock'ed.
#include "gguf/model_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "console/progress.h"
#include "core/format.h"
#include "platform/memory.h"

namespace moetier::gguf {
namespace {

// 64 MiB reads: large enough that per-call overhead is noise even at 10+ GB/s, small enough
// for a smooth progress bar.
constexpr uint64_t kReadChunkBytes = 64ull << 20;

// Bytes from the data section start to the end of the last tensor (padding after it is
// not needed). The header guarantees every tensor lies inside the file.
uint64_t used_data_bytes(const GgufFile& h) {
  uint64_t end = 0;
  for (const TensorInfo& t : h.tensors) end = std::max(end, t.offset + t.n_bytes);
  return end;
}

// A byte range of the data section: [begin, end).
struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};

uint64_t total_bytes(const std::vector<Range>& ranges) {
  uint64_t n = 0;
  for (const Range& r : ranges) n += r.size();
  return n;
}

// Maps every page of the ranges (data-section offsets from `data`) in 64 MiB steps with a
// progress bar: the OS fills the page tables in bulk where it can (Linux 5.14+), else one
// page fault at a time.
void prefault(const uint8_t* data, const std::vector<Range>& ranges, bool progress) {
  const uint64_t bytes = total_bytes(ranges);
  ProgressBar bar({.label = "prefault", .total = bytes, .bytes = true, .enabled = progress && bytes >= (1ull << 30)});
  constexpr uint64_t kStep = 64ull << 20;
  uint64_t done = 0;
  for (const Range& r : ranges) {
    platform::advise_will_need(data + r.begin, r.size());
    for (uint64_t at = r.begin; at < r.end;) {
      const uint64_t next = std::min(r.end, at + kStep);
      platform::prefault_read(data + at, next - at);
      at = next;
      bar.update(done + (at - r.begin));
    }
    done += r.size();
  }
  bar.finish();
}

// --mlock of tensor data: the OS's refusal says what is missing and how to grant it; the
// user also reads which file and the way out.
Status lock_range(const std::string& path, const void* addr, size_t bytes) {
  const Status st = platform::lock_in_ram(addr, bytes);
  if (st) return st;
  return Status::runtime(fmt::format("{}: --mlock: {}, or run without --mlock", path, st.message()));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Data-section bytes not covered by `moved` (sorted by offset, non-overlapping) within
// [0, data_bytes): what stays in the file mapping.
std::vector<Range> mapped_ranges(const std::vector<Range>& moved, uint64_t data_bytes) {
  std::vector<Range> out;
  uint64_t at = 0;
  for (const Range& m : moved) {
    if (m.begin > at) out.push_back({at, m.begin});
    at = std::max(at, m.end);
  }
  if (data_bytes > at) out.push_back({at, data_bytes});
  return out;
}

}  // namespace

Result<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path, const LoadOptions& options) {
  ASSIGN_OR_RETURN(GgufFile header, read_header(path));
  return open(path, std::move(header), options);
}

Result<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path, GgufFile header, const LoadOptions& options) {
  const auto start = std::chrono::steady_clock::now();

  ASSIGN_OR_RETURN(const platform::File file, platform::File::open(path));
  // The header was validated against this size; a file changed since then is refused.
  if (file.size() != header.file_size) {
    return Status::runtime(fmt::format("{}: the file changed size while being opened", path));
  }

  std::unique_ptr<ModelFile> mf(new ModelFile());
  mf->mode_ = options.mode;
  const uint64_t data_bytes = used_data_bytes(header);
  mf->stats_.bytes = data_bytes;

  const bool streaming = !options.streamed_tensors.empty();
  std::vector<Range> streamed;
  for (const std::string& name : options.streamed_tensors) {
    const TensorInfo* t = header.find_tensor(name);
    if (t == nullptr) return Status::bad_input(fmt::format("{}: no tensor '{}' to stream", path, name));
    streamed.push_back({t->offset, t->offset + t->n_bytes});
    mf->streamed_.insert(t->offset);
  }
  if (options.mode == LoadMode::kMmap || streaming) {
    ASSIGN_OR_RETURN(platform::FileMapping map, platform::FileMapping::map(file));
    mf->map_.emplace(std::move(map));
    const uint8_t* data = mf->map_->data() + header.data_offset;
    // The routed experts first: copied with positioned reads straight from the file, so their
    // pages are never mapped here and prefaulting the rest does not read them a second time.
    // --no-mmap with streamed experts: every other tensor is copied the same way.
    ExpertPagesDecision experts;
    if (streaming && options.mode == LoadMode::kRead) {
      std::vector<std::string> kept;
      for (const TensorInfo& t : header.tensors) {
        if (std::find(options.streamed_tensors.begin(), options.streamed_tensors.end(), t.name) ==
            options.streamed_tensors.end()) {
          kept.push_back(t.name);
        }
      }
      ASSIGN_OR_RETURN(experts, mf->move_experts(file, header, kept, options, data_bytes, /*forced=*/true));
      mf->stats_.expert_pages_note.clear();
    } else if (!options.expert_tensors.empty()) {
      ASSIGN_OR_RETURN(experts, mf->move_experts(file, header, options.expert_tensors, options, data_bytes, false));
    }
    std::vector<Range> moved = streamed;
    for (const Moved& m : mf->moved_) moved.push_back({m.offset, m.offset + m.bytes});
    std::sort(moved.begin(), moved.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    const std::vector<Range> mapped = mapped_ranges(moved, data_bytes);
    const uint64_t mapped_bytes = total_bytes(mapped);
    if (options.mlock) {
      // Locking faults every page in: this is the actual read of the file.
      for (const Range& r : mapped) RETURN_IF_ERROR(lock_range(path, data + r.begin, r.size()));
      mf->locked_ = true;
    } else if (options.prefault && mapped_bytes > 0 && mapped_bytes < platform::memory_info().available.value_or(0)) {
      // Map every page now (reading the file through the page cache) so that decoding does
      // not take a page fault each time a token first routes to an expert. Skipped when
      // the data cannot fit in free memory: then paging on demand is the only option.
      prefault(data, mapped, options.progress);
      mf->prefaulted_ = true;
    }
    if (!experts.reason.empty()) {
      // The experts stayed mapped: what that costs depends on the pages the kernel gave the
      // mapping (known once populated).
      std::optional<double> pmd_fraction;
      if (mf->prefaulted_ || mf->locked_) {
        const platform::RegionPages e = platform::region_pages(mf->map_->data());
        if (e.resident && e.file_huge_pages && *e.resident > 0) {
          pmd_fraction = static_cast<double>(*e.file_huge_pages) / static_cast<double>(*e.resident);
        }
      }
      mf->stats_.expert_pages_note = kept_message(experts, pmd_fraction);
    }
  } else if (data_bytes > 0) {
    // Huge pages cut page faults while reading and TLB misses when experts are read at
    // random (ignored where the OS gives none).
    auto buffer = platform::AnonymousMemory::allocate({.bytes = data_bytes, .huge_pages = options.huge_pages});
    if (!buffer) return buffer.status().with_context(path + ": --no-mmap");
    mf->buffer_ = std::move(*buffer);
    // Without huge pages (Windows: an account without 'Lock pages in memory') the weights
    // get 4 KiB pages: say once what that costs and how to get them.
    if (options.huge_pages) {
      mf->stats_.expert_pages_note = read_without_huge_pages_message(platform::huge_page_mode());
    }
    uint8_t* buf = mf->buffer_.data();
    if (options.mlock) {
      RETURN_IF_ERROR(lock_range(path, buf, data_bytes));
      mf->locked_ = true;
    }
    file.advise_sequential(header.data_offset, data_bytes);
    ProgressBar bar({.label = "loading", .total = data_bytes, .bytes = true, .enabled = options.progress});
    uint64_t done = 0;
    while (done < data_bytes) {
      const size_t want = static_cast<size_t>(std::min(kReadChunkBytes, data_bytes - done));
      // Fault the chunk's pages in with one call: far cheaper than the read taking one page
      // fault per 4 KiB page of fresh anonymous memory.
      platform::prefault_write(buf + done, want);
      RETURN_IF_ERROR(file.read_exact(header.data_offset + done, buf + done, want));
      done += want;
      bar.update(done);
    }
    bar.finish();
  }

  mf->stats_.seconds = seconds_since(start);
  mf->stats_.gb_per_second = mf->stats_.seconds > 0 ? static_cast<double>(data_bytes) / mf->stats_.seconds / 1e9 : 0;
  if (options.verbose) {
    if (streaming) {
      const uint64_t streamed_bytes = total_bytes(streamed);
      std::fprintf(stderr, "%s: %s %s of tensor data in %.2f s%s; %s of routed experts stay in the file\n", path.c_str(),
                   options.mode == LoadMode::kRead ? "read" : "mapped",
                   format_bytes(data_bytes - streamed_bytes).c_str(), mf->stats_.seconds,
                   options.mode == LoadMode::kRead ? " (--no-mmap)" : "", format_bytes(streamed_bytes).c_str());
    } else if (options.mode == LoadMode::kRead) {
      std::fprintf(stderr, "%s: read %s of tensor data in %.2f s (%.2f GB/s, --no-mmap%s)\n", path.c_str(),
                   format_bytes(data_bytes).c_str(), mf->stats_.seconds, mf->stats_.gb_per_second,
                   mf->locked_ ? ", mlock" : "");
    } else {
      const uint64_t mapped_bytes = data_bytes - mf->stats_.moved_bytes;
      const std::string how = mf->locked_       ? ", mlock: all pages resident"
                              : mf->prefaulted_ ? fmt::format(", prefaulted in {:.2f} s",
                                                              mf->stats_.seconds - mf->stats_.move_seconds)
                                                : "; pages load on first use";
      std::fprintf(stderr, "%s: mapped %s of tensor data (mmap%s)\n", path.c_str(), format_bytes(mapped_bytes).c_str(),
                   how.c_str());
    }
  }
  mf->header_ = std::move(header);
  return mf;
}

Result<ExpertPagesDecision> ModelFile::move_experts(const platform::File& file, const GgufFile& header,
                                                    const std::vector<std::string>& names, const LoadOptions& options,
                                                    uint64_t data_bytes, bool forced) {
  const std::string& path = file.path();
  // The tensors in file order, then runs of them that are adjacent in the file (a layer's
  // gate/up/down stacks usually are): one copy per run, tensors keep their place in it.
  std::vector<const TensorInfo*> tensors;
  for (const std::string& name : names) {
    const TensorInfo* t = header.find_tensor(name);
    if (t == nullptr) return Status::bad_input(fmt::format("{}: no tensor '{}' to move", path, name));
    if (t->n_bytes > 0) tensors.push_back(t);
  }
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  tensors.erase(std::unique(tensors.begin(), tensors.end()), tensors.end());
  struct Run {
    uint64_t begin = 0, end = 0;  // data-section offsets
    uint64_t dest = 0;            // offset in the region
  };
  // Gaps up to a page (alignment padding) are copied along rather than splitting a run.
  constexpr uint64_t kMergeGap = 4096;
  std::vector<Run> runs;
  uint64_t tensor_bytes = 0;
  for (const TensorInfo* t : tensors) {
    tensor_bytes += t->n_bytes;
    if (!runs.empty() && t->offset <= runs.back().end + kMergeGap) {
      runs.back().end = std::max(runs.back().end, t->offset + t->n_bytes);
    } else {
      runs.push_back({.begin = t->offset, .end = t->offset + t->n_bytes});
    }
  }
  // Runs start on 4 KiB boundaries in the region (page-aligned read destinations; tensors
  // keep their offset within the run, so their GGUF alignment too).
  uint64_t region_used = 0;
  for (Run& r : runs) {
    r.dest = region_used;
    region_used = align_up(region_used + (r.end - r.begin), 4096);
  }
  const uint64_t copy_bytes = [&] {
    uint64_t n = 0;
    for (const Run& r : runs) n += r.end - r.begin;
    return n;
  }();

  const platform::HugePageMode thp = platform::huge_page_mode();
  ExpertPagesDecision decision = decide_expert_pages({.policy = forced ? ExpertPages::kHuge : options.expert_pages,
                                                            .expert_bytes = copy_bytes,
                                                            .mapped_bytes = data_bytes - std::min(data_bytes, tensor_bytes),
                                                            .working_bytes = options.working_bytes,
                                                            .mem = platform::memory_info(),
                                                            .thp = thp});
  if (forced) decision = ExpertPagesDecision{.move = true};
  if (!decision.error) return decision.error.with_context(path);
  if (!decision.move) return decision;

  const auto start = std::chrono::steady_clock::now();
  // Aligned to the huge-page size, so every 2 MiB of it can be one huge page: the point of
  // the move (ignored where THP is off).
  const uint64_t huge_page = platform::huge_page_size();
  const uint64_t region_bytes = align_up(std::max<uint64_t>(region_used, 1), huge_page);
  auto allocated = platform::AnonymousMemory::allocate(
      {.bytes = region_bytes, .alignment = huge_page, .huge_pages = true});
  if (!allocated) return allocated.status().with_context(path + ": the routed experts");
  moved_region_ = std::move(*allocated);
  uint8_t* region = moved_region_.data();

  // 64 MiB chunks of the runs, copied by a few threads: read from the page cache (or the
  // disk) into the region. The kernel zeroes every fresh page before we overwrite it, and
  // that zeroing dominated (75% of the move's CPU time in a 2-core VM, ~1.2 GB/s a core,
  // so --no-mmap's single-threaded read is no faster); threads spread it over cores and
  // keep a fast disk's queue full. 4 is plenty: memory bandwidth is the limit beyond.
  struct Chunk {
    uint64_t src = 0;  // data-section offset
    uint64_t dest = 0;
    uint64_t bytes = 0;
  };
  std::vector<Chunk> chunks;
  for (const Run& r : runs) {
    for (uint64_t at = r.begin; at < r.end; at += kReadChunkBytes) {
      chunks.push_back({.src = at, .dest = r.dest + (at - r.begin), .bytes = std::min(kReadChunkBytes, r.end - at)});
    }
  }
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int n_threads = std::clamp(options.copy_threads > 0 ? options.copy_threads : std::min(4, hw), 1,
                                   static_cast<int>(std::max<size_t>(chunks.size(), 1)));
  std::atomic<size_t> next_chunk{0};
  std::atomic<uint64_t> copied{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  Status error;
  // `bar` is drawn only by the calling thread (ProgressBar is single-owner).
  auto worker = [&](ProgressBar* bar) {
    for (size_t i = next_chunk++; i < chunks.size() && !failed; i = next_chunk++) {
      const Chunk& c = chunks[i];
      uint8_t* dst = region + c.dest;
      // Fault the destination in bulk (huge pages where THP gives them) rather than one
      // page fault per 4 KiB inside the read.
      platform::prefault_write(dst, c.bytes);
      const uint64_t file_offset = header.data_offset + c.src;
      if (Status st = file.read_exact(file_offset, dst, c.bytes); !st) {
        std::lock_guard lock(error_mutex);
        if (!failed.exchange(true)) error = std::move(st);
        return;
      }
      // Drop the chunk's page-cache pages now that the copy holds the bytes, so the experts
      // are not in RAM twice (only pages no one maps are dropped; the pages at either end
      // that the neighbouring dense tensors share stay).
      file.drop_cached(file_offset, c.bytes);
      copied += c.bytes;
      if (bar != nullptr) bar->update(copied.load());
    }
  };
  file.advise_sequential(header.data_offset, data_bytes);
  {
    ProgressBar bar({.label = "moving weights", .total = copy_bytes, .bytes = true,
                     .enabled = options.progress && copy_bytes >= (1ull << 30)});
    std::vector<std::thread> threads;
    for (int i = 1; i < n_threads; ++i) threads.emplace_back(worker, nullptr);
    worker(&bar);  // this thread copies too, and draws the bar
    for (std::thread& t : threads) t.join();
    bar.update(copied.load());
    bar.finish();
  }
  if (failed) return error;
  // Our mapping never touched these pages (the reads went around it); dropping the ranges'
  // pages makes sure none stay mapped here, should anything have touched them.
  for (const Run& r : runs) map_->drop_pages(header.data_offset + r.begin, r.end - r.begin);
  bool locked = false;
  if (options.mlock) {
    RETURN_IF_ERROR(lock_range(path, region, region_used));
    locked = true;
  }
  size_t run = 0;
  for (const TensorInfo* t : tensors) {
    while (t->offset >= runs[run].end) ++run;
    moved_.push_back({.offset = t->offset, .bytes = t->n_bytes, .data = region + runs[run].dest + (t->offset - runs[run].begin)});
  }
  stats_.moved_bytes = tensor_bytes;
  stats_.move_seconds = seconds_since(start);
  // AnonHugePages counts whole 2 MiB pages of the region; the tail of the last one is not
  // copied data, so coverage is measured against the region's size.
  const std::optional<uint64_t> huge = platform::region_pages(region).anon_huge_pages;
  std::optional<uint64_t> huge_of_data;
  if (huge) {
    huge_of_data = static_cast<uint64_t>(static_cast<double>(*huge) / static_cast<double>(region_bytes) *
                                         static_cast<double>(tensor_bytes));
  }
  stats_.expert_pages_note = moved_message(tensor_bytes, stats_.move_seconds, thp, huge_of_data, locked);
  return decision;
}

// The mapping and the allocations return to the OS with their members (which also ends
// any lock in RAM on them).
ModelFile::~ModelFile() = default;

const ModelFile::Moved* ModelFile::find_moved(const TensorInfo& t) const {
  // The last moved tensor starting at or before t.offset, if t lies inside it.
  auto it = std::upper_bound(moved_.begin(), moved_.end(), t.offset,
                             [](uint64_t off, const Moved& m) { return off < m.offset; });
  if (it == moved_.begin()) return nullptr;
  --it;
  return t.offset + t.n_bytes <= it->offset + it->bytes ? &*it : nullptr;
}

const uint8_t* ModelFile::tensor_data(const TensorInfo& t) const {
  if (!moved_.empty()) {
    if (const Moved* m = find_moved(t)) return m->data + (t.offset - m->offset);
  }
  if (map_) return map_->data() + t.file_offset;
  CHECK_MSG(t.offset + t.n_bytes <= buffer_.size(), "tensor '{}' is not in this file's data", t.name);
  return buffer_.data() + t.offset;
}

uint8_t* ModelFile::owned_tensor_data(const TensorInfo& t) {
  if (const Moved* m = find_moved(t)) return m->data + (t.offset - m->offset);
  if (map_) return nullptr;  // the file's own pages: read-only and shared
  CHECK_MSG(t.offset + t.n_bytes <= buffer_.size(), "tensor '{}' is not in this file's data", t.name);
  return buffer_.data() + t.offset;
}

void ModelFile::set_interleaved(const TensorInfo& t) {
  CHECK_MSG(owned_tensor_data(t) != nullptr || streamed_.count(t.offset) != 0, "tensor '{}' is in the file mapping",
            t.name);
  interleaved_.insert(t.offset);
}

bool ModelFile::interleaved(const TensorInfo& t) const { return interleaved_.count(t.offset) != 0; }

}  // namespace moetier::gguf
