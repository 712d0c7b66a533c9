// The storage read rate an expert store can expect from a model file (bench --diskbw): random
// expert-sized unbuffered reads from several threads at once, as the store issues them
// (engine/expert_store.h), timed over the whole batch.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace moetier {

struct DiskReadParams {
  uint64_t chunk_bytes = 1ull << 20;  // about one expert matrix of a 35B-A3B layer
  int chunks = 256;                   // spread over the file at random (a fixed seed)
  int threads = 4;                    // reads in flight: the store's reader threads
};

struct DiskReadResult {
  double gb_per_second = 0;  // bytes read / wall seconds
  uint64_t bytes = 0;
  double seconds = 0;
  bool unbuffered = true;    // false: the file system refused direct reads (the page cache may have served them)
};

// kBadInput when the file cannot be opened, kRuntime when a read fails.
Result<DiskReadResult> measure_disk_read(const std::string& path, const DiskReadParams& params);

}  // namespace moetier
