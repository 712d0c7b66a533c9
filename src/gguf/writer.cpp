// Streaming GGUF v3 writer. The layout is fixed at declaration time: each tensor's offset
// is the previous tensor's end rounded up to the alignment, so the header can be written
// before any data and tensors streamed one by one.
#include "gguf/writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "platform/file.h"

namespace moetier::gguf {
namespace {

// llama.cpp keeps tensor names in a fixed 64-byte buffer (63 characters + NUL); longer
// names would not load there.
constexpr size_t kMaxTensorNameBytes = 63;
constexpr size_t kFileBufferBytes = 4 << 20;  // stdio buffer: few large write() calls

uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

// Serialises into a byte vector; the header is built in memory and written at once.
class ByteSink {
 public:
  template <typename T>
  void pod(T v) {
    append(&v, sizeof(T));
  }
  void string(std::string_view s) {
    pod<uint64_t>(s.size());
    append(s.data(), s.size());
  }
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, p, n);
  }
  // Elements of a scalar type stored widened in `src` (u64/i64/double), written narrowed.
  template <typename T, typename Src>
  void elements(const std::vector<Src>& src) {
    for (const Src v : src) pod<T>(static_cast<T>(v));
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

void write_array_body(ByteSink& sink, const Value& v);

// The value's bytes, without its type id (written by the caller).
void write_value_body(ByteSink& sink, const Value& v) {
  switch (v.type) {
    case ValueType::U8:
      sink.pod<uint8_t>(static_cast<uint8_t>(v.u));
      break;
    case ValueType::U16:
      sink.pod<uint16_t>(static_cast<uint16_t>(v.u));
      break;
    case ValueType::U32:
      sink.pod<uint32_t>(static_cast<uint32_t>(v.u));
      break;
    case ValueType::U64:
      sink.pod<uint64_t>(v.u);
      break;
    case ValueType::I8:
      sink.pod<int8_t>(static_cast<int8_t>(v.i));
      break;
    case ValueType::I16:
      sink.pod<int16_t>(static_cast<int16_t>(v.i));
      break;
    case ValueType::I32:
      sink.pod<int32_t>(static_cast<int32_t>(v.i));
      break;
    case ValueType::I64:
      sink.pod<int64_t>(v.i);
      break;
    case ValueType::F32:
      sink.pod<float>(static_cast<float>(v.f));
      break;
    case ValueType::F64:
      sink.pod<double>(v.f);
      break;
    case ValueType::BOOL:
      sink.pod<uint8_t>(v.u != 0 ? 1 : 0);
      break;
    case ValueType::STRING:
      sink.string(v.s);
      break;
    case ValueType::ARRAY:
      write_array_body(sink, v);
      break;
  }
}

void write_array_body(ByteSink& sink, const Value& v) {
  sink.pod<uint32_t>(static_cast<uint32_t>(v.elem_type));
  sink.pod<uint64_t>(v.array_size());
  switch (v.elem_type) {
    case ValueType::U8:
      sink.elements<uint8_t>(v.arr_u);
      break;
    case ValueType::U16:
      sink.elements<uint16_t>(v.arr_u);
      break;
    case ValueType::U32:
      sink.elements<uint32_t>(v.arr_u);
      break;
    case ValueType::U64:
      sink.elements<uint64_t>(v.arr_u);
      break;
    case ValueType::I8:
      sink.elements<int8_t>(v.arr_i);
      break;
    case ValueType::I16:
      sink.elements<int16_t>(v.arr_i);
      break;
    case ValueType::I32:
      sink.elements<int32_t>(v.arr_i);
      break;
    case ValueType::I64:
      sink.elements<int64_t>(v.arr_i);
      break;
    case ValueType::F32:
      sink.elements<float>(v.arr_f);
      break;
    case ValueType::F64:
      sink.elements<double>(v.arr_f);
      break;
    case ValueType::BOOL:
      for (const uint64_t b : v.arr_u) sink.pod<uint8_t>(b != 0 ? 1 : 0);
      break;
    case ValueType::STRING:
      for (const std::string& s : v.arr_s) sink.string(s);
      break;
    case ValueType::ARRAY:
      for (const Value& inner : v.arr) write_array_body(sink, inner);
      break;
  }
}

}  // namespace

Result<std::unique_ptr<Writer>> Writer::create(const std::string& path, uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (1u << 31)) {
    return Status::bad_input(fmt::format("GGUF alignment {} is not a power of two up to 2^31", alignment));
  }
  std::FILE* f = platform::open_stdio_file(path, "wb");
  if (f == nullptr) {
    return Status::runtime(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  }
  std::setvbuf(f, nullptr, _IOFBF, kFileBufferBytes);
  std::unique_ptr<Writer> w(new Writer());
  w->path_ = path;
  w->file_ = f;
  w->alignment_ = alignment;
  return w;
}

Writer::~Writer() {
  // Not finished: close what we have (the file is incomplete; finish() reports errors).
  if (file_ != nullptr) std::fclose(file_);
}

void Writer::set(const std::string& key, Value value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

Status Writer::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne) {
  const auto fail = [&](const std::string& why) {
    return Status::bad_input(fmt::format("{}: cannot add tensor '{}': {}", path_, name, why));
  };
  if (header_written_) return fail("the header was already written");
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    return fail(fmt::format("name length {} is not 1 to {} bytes", name.size(), kMaxTensorNameBytes));
  }
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return fail("duplicate tensor name");
  }
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(type));
  if (traits == nullptr) return fail(fmt::format("unknown type id {}", static_cast<uint32_t>(type)));
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    return fail(fmt::format("{} dimensions (must be 1 to {})", ne.size(), kMaxDims));
  }
  TensorInfo t;
  t.name = name;
  t.type = type;
  t.n_dims = static_cast<uint32_t>(ne.size());
  uint64_t n_elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) return fail(fmt::format("dimension {} is {} (must be positive)", d, ne[d]));
    if (n_elements > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(ne[d])) {
      return fail("element count overflows 64 bits");
    }
    n_elements *= static_cast<uint64_t>(ne[d]);
    t.ne[d] = ne[d];
  }
  if (t.ne[0] % traits->block_elems != 0) {
    return fail(fmt::format("row length {} is not a multiple of the {} block size {}", t.ne[0], traits->name,
                            traits->block_elems));
  }
  t.n_elements = n_elements;
  const uint64_t n_blocks = n_elements / static_cast<uint64_t>(traits->block_elems);
  const auto block_bytes = static_cast<uint64_t>(traits->block_bytes);
  if (n_blocks > UINT64_MAX / 2 / block_bytes) return fail("size in bytes overflows 64 bits");
  t.n_bytes = n_blocks * block_bytes;
  const uint64_t offset = tensors_.empty() ? 0 : align_up(tensors_.back().offset + tensors_.back().n_bytes, alignment_);
  if (offset > UINT64_MAX / 2 - t.n_bytes) return fail("data section size overflows 64 bits");
  t.offset = offset;
  tensors_.push_back(std::move(t));
  return Status::ok();
}

uint64_t Writer::total_data_bytes() const {
  if (tensors_.empty()) return 0;
  return align_up(tensors_.back().offset + tensors_.back().n_bytes, alignment_);
}

Status Writer::write_header() {
  if (file_ == nullptr) return Status::runtime(fmt::format("{}: writer is closed", path_));
  if (header_written_) return Status::runtime(fmt::format("{}: header written twice", path_));

  // general.alignment is written (as u32, which readers require) only when not the default;
  // a caller-provided one is replaced by ours so the two cannot disagree.
  const std::pair<std::string, Value> alignment_entry{"general.alignment",
                                                      Value::make_u32(static_cast<uint32_t>(alignment_))};
  std::vector<const std::pair<std::string, Value>*> kv;  // pointers: no copy of big vocab arrays
  kv.reserve(metadata_.size() + 1);
  for (const auto& entry : metadata_) {
    if (entry.first.empty()) return Status::bad_input(fmt::format("{}: empty metadata key", path_));
    if (entry.first != "general.alignment") kv.push_back(&entry);
  }
  if (alignment_ != kDefaultAlignment) kv.push_back(&alignment_entry);

  ByteSink sink;
  sink.pod<uint32_t>(kMagic);
  sink.pod<uint32_t>(3);  // version
  sink.pod<uint64_t>(tensors_.size());
  sink.pod<uint64_t>(kv.size());
  for (const auto* entry : kv) {
    sink.string(entry->first);
    sink.pod<uint32_t>(static_cast<uint32_t>(entry->second.type));
    write_value_body(sink, entry->second);
  }
  for (const TensorInfo& t : tensors_) {
    sink.string(t.name);
    sink.pod<uint32_t>(t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) sink.pod<int64_t>(t.ne[d]);
    sink.pod<uint32_t>(static_cast<uint32_t>(t.type));
    sink.pod<uint64_t>(t.offset);
  }
  std::vector<uint8_t>& bytes = sink.bytes();
  const uint64_t data_offset = align_up(bytes.size(), alignment_);
  bytes.resize(data_offset, 0);
  for (TensorInfo& t : tensors_) t.file_offset = data_offset + t.offset;

  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
    return Status::runtime(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  }
  position_ = bytes.size();
  header_written_ = true;
  return Status::ok();
}

Status Writer::write_tensor_data(const void* data, size_t n_bytes) {
  if (!header_written_ || file_ == nullptr) {
    return Status::runtime(fmt::format("{}: write_tensor_data before write_header", path_));
  }
  if (current_tensor_ >= tensors_.size()) {
    return Status::runtime(fmt::format("{}: {} bytes of tensor data after the last tensor", path_, n_bytes));
  }
  const TensorInfo& t = tensors_[current_tensor_];
  if (n_bytes > t.n_bytes - current_written_) {
    return Status::runtime(fmt::format("{}: tensor '{}' is {} bytes, got {} more after {}", path_, t.name, t.n_bytes,
                                       n_bytes, current_written_));
  }
  if (n_bytes > 0 && std::fwrite(data, 1, n_bytes, file_) != n_bytes) {
    return Status::runtime(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  }
  current_written_ += n_bytes;
  position_ += n_bytes;
  if (current_written_ == t.n_bytes) {
    // Pad so the next tensor (or the end of the data section) starts aligned.
    static constexpr uint8_t kZeros[256] = {};
    uint64_t pad = align_up(position_, alignment_) - position_;
    while (pad > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, sizeof(kZeros)));
      if (std::fwrite(kZeros, 1, n, file_) != n) {
        return Status::runtime(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
      }
      pad -= n;
      position_ += n;
    }
    ++current_tensor_;
    current_written_ = 0;
  }
  return Status::ok();
}

Status Writer::finish() {
  if (file_ == nullptr) return Status::runtime(fmt::format("{}: finish called twice", path_));
  if (!header_written_) RETURN_IF_ERROR(write_header());
  if (current_tensor_ < tensors_.size()) {
    return Status::runtime(fmt::format("{}: tensor '{}' ({} of {}) has {} of {} bytes written", path_,
                                       tensors_[current_tensor_].name, current_tensor_ + 1, tensors_.size(),
                                       current_written_, tensors_[current_tensor_].n_bytes));
  }
  std::FILE* f = file_;
  file_ = nullptr;
  const bool flushed = std::fflush(f) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!flushed || !closed) {
    return Status::runtime(fmt::format("{}: write failed: {}", path_, std::strerror(flushed ? errno : flush_errno)));
  }
  return Status::ok();
}

}  // namespace moetier::gguf
