// Streaming GGUF v3 writer: declare metadata and every tensor (name, type, shape) first,
// then write the header, then each tensor's data in declaration order. Tensor data never
// has to be held all at once, so a 20 GB model can be written from a 24 GB machine.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace moetier::gguf {

class Writer {
 public:
  // Creates/truncates `path`. alignment: power of two; written as general.alignment
  // only when it is not the default 32.
  static Result<std::unique_ptr<Writer>> create(const std::string& path, uint64_t alignment = kDefaultAlignment);
  ~Writer();

  // Metadata, in the order added. Adding an existing key replaces its value.
  void set(const std::string& key, Value value);
  // Declare a tensor. ne in ggml order (ne[0] = row length); ne[0] must be a multiple
  // of the type's block size. Returns an error for duplicates or bad shapes.
  Status add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne);

  // Write magic, kv, tensor table and padding. Call once, after all set/add_tensor.
  Status write_header();
  // Append the next declared tensor's data (exactly its n_bytes, may be given in several
  // chunks); pads to the alignment when the tensor is complete.
  Status write_tensor_data(const void* data, size_t n_bytes);
  // Verify every tensor was written, flush and close. The file is complete only after this.
  Status finish();

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  uint64_t total_data_bytes() const;

 private:
  Writer() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t alignment_ = kDefaultAlignment;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<TensorInfo> tensors_;
  bool header_written_ = false;
  size_t current_tensor_ = 0;
  uint64_t current_written_ = 0;
  uint64_t position_ = 0;
};

}  // namespace moetier::gguf
