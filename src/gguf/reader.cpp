// GGUF header parser. Everything a file claims is checked against the bytes that are
// really there BEFORE it is used or allocated: a count or length is compared with the
// bytes left in the file (times the smallest encoding of one item), so a hostile header
// cannot make us allocate more than a small multiple of the file size, and parsing time
// is linear in the header bytes actually present.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>

#include "gguf/gguf.h"
#include "platform/file.h"

namespace moetier::gguf {
namespace {

// Smallest possible encodings, used to reject impossible counts before allocating.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name len, name, n_dims, ne[0], type, offset
// Header reads start at 64 KiB (a typical model header is 10-50 KiB, so little of the data
// section is touched) and double up to 1 MiB for big vocabularies.
constexpr size_t kFirstReadBytes = 64 << 10;
constexpr size_t kFileBufferBytes = 1 << 20;
constexpr uint32_t kMaxValueTypeId = static_cast<uint32_t>(ValueType::F64);

// Bytes one element of `t` takes at least in the file.
uint64_t min_encoded_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    case ValueType::STRING:
      return 8;  // u64 length
    case ValueType::ARRAY:
      return 4 + 8;  // element type + count
  }
  return 1;
}

// A key or tensor name as shown in an error: hostile names may hold newlines, control
// bytes or megabytes of text, and an error must stay one short line.
std::string shown(std::string_view name) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t k = 0; k < name.size() && k < kMaxShown; ++k) {
    const auto c = static_cast<unsigned char>(name[k]);
    if (c < 0x20 || c == 0x7f || c == '\\' || c == '\'') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (name.size() > kMaxShown) out += fmt::format("...({} bytes)", name.size());
  return out;
}

// The header bytes, read front to back: from memory, or from a file through a buffer so
// a header of 250k strings costs a few large reads, and the data section is never read.
class HeaderSource {
 public:
  HeaderSource(const uint8_t* data, size_t size, uint64_t file_size)
      : mem_(data), available_(std::min<uint64_t>(size, file_size)), file_size_(file_size) {}
  explicit HeaderSource(const platform::File& file)
      : file_(&file),
        available_(file.size()),
        file_size_(file.size()),
        buffer_bytes_(std::min<uint64_t>(kFileBufferBytes, file.size())),
        // Not zero-initialised: pages never read into are never touched.
        buffer_(new uint8_t[buffer_bytes_]) {}

  uint64_t pos() const { return pos_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t left_in_file() const { return file_size_ - pos_; }
  bool from_memory() const { return file_ == nullptr; }
  uint64_t available() const { return available_; }

  // Copies the next n bytes. The caller has checked n <= left_in_file(). Returns false
  // when the bytes given in memory run out, or the file cannot be read (read_error() set,
  // or still ok when the file ended early).
  bool read(void* dst, uint64_t n) {
    if (n > available_ - pos_) return false;
    if (from_memory()) {
      if (n > 0) std::memcpy(dst, mem_ + pos_, n);
      pos_ += n;
      return true;
    }
    auto* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      if (pos_ >= buf_start_ + buf_len_ || pos_ < buf_start_) {
        if (n >= buffer_bytes_) return read_direct(out, n);  // a big string: skip the buffer
        if (!refill()) return false;
      }
      const uint64_t in_buf = buf_start_ + buf_len_ - pos_;
      const uint64_t take = std::min<uint64_t>(in_buf, n);
      std::memcpy(out, buffer_.get() + (pos_ - buf_start_), take);
      out += take;
      pos_ += take;
      n -= take;
    }
    return true;
  }
  const Status& read_error() const { return read_error_; }

 private:
  bool refill() {
    buf_start_ = pos_;
    buf_len_ = 0;
    const uint64_t want = std::min<uint64_t>(next_read_, file_size_ - pos_);
    next_read_ = std::min<uint64_t>(next_read_ * 2, buffer_bytes_);
    return read_at(buffer_.get(), want, pos_, &buf_len_) && buf_len_ == want;
  }
  bool read_direct(uint8_t* out, uint64_t n) {
    uint64_t got = 0;
    if (!read_at(out, n, pos_, &got) || got != n) return false;
    pos_ += n;
    return true;
  }
  bool read_at(uint8_t* out, uint64_t n, uint64_t at, uint64_t* got) {
    *got = 0;
    Result<size_t> r = file_->read_at(at, out, n);
    if (!r) {
      read_error_ = r.status();
      return false;
    }
    *got = *r;
    return *got == n;  // short: the file shrank while we read it
  }

  const uint8_t* mem_ = nullptr;
  const platform::File* file_ = nullptr;
  uint64_t available_ = 0;  // bytes we can read (== file_size_ for files)
  uint64_t file_size_ = 0;
  uint64_t pos_ = 0;
  uint64_t buffer_bytes_ = 0;
  std::unique_ptr<uint8_t[]> buffer_;
  uint64_t buf_start_ = 0;
  uint64_t buf_len_ = 0;
  uint64_t next_read_ = kFirstReadBytes;
  Status read_error_;
};

class HeaderParser {
 public:
  HeaderParser(HeaderSource& src, const std::string& name, const ParseLimits& limits)
      : src_(src), name_(name), limits_(limits) {}

  Result<GgufFile> parse() {
    GgufFile file;
    file.path = name_;
    file.file_size = src_.file_size();
    RETURN_IF_ERROR(parse_preamble(&file));
    RETURN_IF_ERROR(parse_metadata(&file));
    RETURN_IF_ERROR(parse_tensor_infos(&file));
    file.header_bytes = src_.pos();
    file.data_offset = align_up(src_.pos(), file.alignment);
    RETURN_IF_ERROR(check_tensor_placement(&file));
    return file;
  }

 private:
  // ---- errors ---------------------------------------------------------------------------
  Status fail_at(uint64_t at, const std::string& what) const {
    return Status::bad_input(fmt::format("{}: at byte {}: {}", name_, at, what));
  }
  // Names in messages go through shown(); keys reaching the value readers already are.

  // Reads n raw bytes for `what`, with a clear error when the file ends first.
  // `what` is a callable returning a description; it is only called on failure, so the
  // hot path (250k vocabulary strings) formats nothing.
  template <typename What>
  Status read_bytes(void* dst, uint64_t n, const What& what) {
    const uint64_t at = src_.pos();
    if (n > src_.left_in_file()) {
      return fail_at(at, fmt::format("file ends inside {} (needs {} bytes, {} left; the file is {} bytes)", what(), n,
                                     src_.left_in_file(), src_.file_size()));
    }
    if (!src_.read(dst, n)) {
      if (src_.from_memory()) {
        return fail_at(
            at, fmt::format("header continues past the first {} bytes given (reading {})", src_.available(), what()));
      }
      // The OS's error names the file and the byte; a short read means the file shrank.
      if (!src_.read_error()) return Status::runtime(fmt::format("{} (reading {})", src_.read_error().message(), what()));
      return Status::runtime(
          fmt::format("{}: at byte {}: read failed while reading {}: file shrank while reading", name_, at, what()));
    }
    return Status::ok();
  }

  template <typename T, typename What>
  Status read_pod(T* out, const What& what) {
    // GGUF is little-endian and so is every host moetier supports (x86-64, arm64).
    return read_bytes(out, sizeof(T), what);
  }

  // A u64 length + bytes. `what` names the string for errors ("key of metadata entry 3").
  template <typename What>
  Status read_string(std::string* out, const What& what) {
    const uint64_t at = src_.pos();
    uint64_t len = 0;
    RETURN_IF_ERROR(read_pod(&len, [&] { return "the length of " + what(); }));
    if (len > src_.left_in_file()) {
      return fail_at(at, fmt::format("{}: string length {} exceeds the {} bytes left in the file", what(), len,
                                     src_.left_in_file()));
    }
    if (len > limits_.max_string_bytes) {
      return fail_at(
          at, fmt::format("{}: string length {} exceeds the limit of {} bytes", what(), len, limits_.max_string_bytes));
    }
    out->resize(len);
    return read_bytes(out->data(), len, what);
  }

  // ---- magic, version, counts -----------------------------------------------------------
  Status parse_preamble(GgufFile* file) {
    if (src_.file_size() < 4) {
      return fail_at(0, fmt::format("not a GGUF file: only {} bytes, too small for the magic", src_.file_size()));
    }
    uint8_t magic[4];
    RETURN_IF_ERROR(read_bytes(magic, 4, [] { return std::string("the magic"); }));
    uint32_t magic_u32 = 0;
    std::memcpy(&magic_u32, magic, 4);
    if (magic_u32 != kMagic) {
      std::string shown;
      for (const uint8_t c : magic) shown += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
      return fail_at(0, fmt::format("not a GGUF file: magic '{}' (0x{:08x}), expected 'GGUF'", shown, magic_u32));
    }

    const uint64_t version_at = src_.pos();
    RETURN_IF_ERROR(read_pod(&file->version, [] { return std::string("the version"); }));
    if (file->version == 1) {
      return fail_at(version_at,
                     "GGUF version 1 is not supported (only versions 2 and 3); re-convert the model with a current "
                     "llama.cpp");
    }
    if (file->version != 2 && file->version != 3) {
      const uint32_t swapped = __builtin_bswap32(file->version);
      if (swapped == 2 || swapped == 3) {
        return fail_at(version_at, fmt::format("big-endian GGUF (version {} byte-swapped) is not supported", swapped));
      }
      return fail_at(version_at, fmt::format("unsupported GGUF version {} (only versions 2 and 3)", file->version));
    }

    const uint64_t counts_at = src_.pos();
    RETURN_IF_ERROR(read_pod(&n_tensors_, [] { return std::string("the tensor count"); }));
    RETURN_IF_ERROR(read_pod(&n_kv_, [] { return std::string("the metadata count"); }));
    if (n_tensors_ > limits_.max_tensors) {
      return fail_at(counts_at,
                     fmt::format("tensor count {} exceeds the limit of {}", n_tensors_, limits_.max_tensors));
    }
    if (n_kv_ > limits_.max_kv) {
      return fail_at(counts_at + 8, fmt::format("metadata count {} exceeds the limit of {}", n_kv_, limits_.max_kv));
    }
    // Both counts are bounded by the limits (<= 2^20 each by default), but the limits are
    // caller-provided: compare with divisions so nothing overflows.
    const uint64_t left = src_.left_in_file();
    if (n_tensors_ > left / kMinTensorInfoBytes || n_kv_ > (left - n_tensors_ * kMinTensorInfoBytes) / kMinKvBytes) {
      return fail_at(counts_at, fmt::format("{} tensors and {} metadata entries cannot fit in the {} bytes left in "
                                            "the file",
                                            n_tensors_, n_kv_, left));
    }
    return Status::ok();
  }

  // ---- metadata -------------------------------------------------------------------------
  Status parse_metadata(GgufFile* file) {
    file->metadata.reserve(n_kv_);
    file->kv_index.reserve(n_kv_);
    for (uint64_t k = 0; k < n_kv_; ++k) {
      const uint64_t key_at = src_.pos();
      std::string key;
      RETURN_IF_ERROR(read_string(&key, [&] { return fmt::format("the key of metadata entry {}", k); }));
      if (key.empty()) return fail_at(key_at, fmt::format("metadata entry {} has an empty key", k));
      const std::string key_shown = shown(key);  // the key as errors print it
      const auto [it, inserted] = file->kv_index.emplace(key, file->metadata.size());
      if (!inserted) {
        return fail_at(key_at,
                       fmt::format("duplicate metadata key '{}' (entries {} and {})", key_shown, it->second, k));
      }
      const uint64_t type_at = src_.pos();
      ValueType type{};
      RETURN_IF_ERROR(read_value_type(&type, key_shown, "value type"));
      const uint64_t value_at = src_.pos();
      Value value;
      RETURN_IF_ERROR(read_value(type, &value, 0, key_shown));
      if (key == "general.alignment") RETURN_IF_ERROR(apply_alignment(value, type_at, value_at, file));
      file->metadata.emplace_back(std::move(key), std::move(value));
    }
    return Status::ok();
  }

  Status apply_alignment(const Value& value, uint64_t type_at, uint64_t value_at, GgufFile* file) const {
    if (value.type != ValueType::U32) {
      return fail_at(type_at,
                     fmt::format("general.alignment is {}{}, expected u32", value.is_array() ? "an array of " : "a ",
                                 value_type_name(value.is_array() ? value.elem_type : value.type)));
    }
    if (value.u == 0 || (value.u & (value.u - 1)) != 0) {
      return fail_at(value_at, fmt::format("general.alignment {} is not a non-zero power of two", value.u));
    }
    file->alignment = value.u;
    return Status::ok();
  }

  Status read_value_type(ValueType* out, const std::string& key, std::string_view which) {
    const uint64_t at = src_.pos();
    uint32_t id = 0;
    RETURN_IF_ERROR(read_pod(&id, [&] { return fmt::format("the {} of metadata key '{}'", which, key); }));
    if (id > kMaxValueTypeId) {
      return fail_at(at, fmt::format("metadata key '{}': unknown {} id {}", key, which, id));
    }
    *out = static_cast<ValueType>(id);
    return Status::ok();
  }

  // Reads one T and widens it into the Value field (u, i or f).
  template <typename T, typename Field>
  Status read_scalar(Field* field, const std::string& key) {
    T v{};
    RETURN_IF_ERROR(read_pod(&v, [&] { return fmt::format("the value of metadata key '{}'", key); }));
    *field = static_cast<Field>(v);
    return Status::ok();
  }

  // One value of type `type` (the type id was already read).
  Status read_value(ValueType type, Value* out, uint32_t depth, const std::string& key) {
    out->type = type;
    switch (type) {
      case ValueType::U8:
        return read_scalar<uint8_t>(&out->u, key);
      case ValueType::U16:
        return read_scalar<uint16_t>(&out->u, key);
      case ValueType::U32:
        return read_scalar<uint32_t>(&out->u, key);
      case ValueType::U64:
        return read_scalar<uint64_t>(&out->u, key);
      case ValueType::I8:
        return read_scalar<int8_t>(&out->i, key);
      case ValueType::I16:
        return read_scalar<int16_t>(&out->i, key);
      case ValueType::I32:
        return read_scalar<int32_t>(&out->i, key);
      case ValueType::I64:
        return read_scalar<int64_t>(&out->i, key);
      case ValueType::F32:
        return read_scalar<float>(&out->f, key);
      case ValueType::F64:
        return read_scalar<double>(&out->f, key);
      case ValueType::BOOL: {
        const uint64_t at = src_.pos();
        RETURN_IF_ERROR(read_scalar<uint8_t>(&out->u, key));
        if (out->u > 1) {
          return fail_at(at, fmt::format("metadata key '{}': bool value {} is neither 0 nor 1", key, out->u));
        }
        return Status::ok();
      }
      case ValueType::STRING:
        return read_string(&out->s, [&] { return fmt::format("the value of metadata key '{}'", key); });
      case ValueType::ARRAY:
        return read_array(out, depth, key);
    }
    return Status::ok();
  }

  Status read_array(Value* out, uint32_t depth, const std::string& key) {
    const uint64_t at = src_.pos();
    if (depth >= limits_.max_array_depth) {
      return fail_at(
          at, fmt::format("metadata key '{}': arrays nested deeper than {} levels", key, limits_.max_array_depth));
    }
    RETURN_IF_ERROR(read_value_type(&out->elem_type, key, "array element type"));
    const uint64_t count_at = src_.pos();
    uint64_t count = 0;
    RETURN_IF_ERROR(read_pod(&count, [&] { return fmt::format("the array length of metadata key '{}'", key); }));
    const uint64_t min_bytes = min_encoded_bytes(out->elem_type);
    if (count > src_.left_in_file() / min_bytes) {
      return fail_at(count_at, fmt::format("metadata key '{}': array length {} of {} exceeds what the {} bytes left "
                                           "in the file can hold",
                                           key, count, value_type_name(out->elem_type), src_.left_in_file()));
    }
    if (count > limits_.max_array_elems) {
      return fail_at(count_at, fmt::format("metadata key '{}': array length {} exceeds the limit of {}", key, count,
                                           limits_.max_array_elems));
    }
    switch (out->elem_type) {
      case ValueType::U8:
        return read_elements<uint8_t>(count, &out->arr_u, key);
      case ValueType::U16:
        return read_elements<uint16_t>(count, &out->arr_u, key);
      case ValueType::U32:
        return read_elements<uint32_t>(count, &out->arr_u, key);
      case ValueType::U64:
        return read_elements<uint64_t>(count, &out->arr_u, key);
      case ValueType::I8:
        return read_elements<int8_t>(count, &out->arr_i, key);
      case ValueType::I16:
        return read_elements<int16_t>(count, &out->arr_i, key);
      case ValueType::I32:
        return read_elements<int32_t>(count, &out->arr_i, key);
      case ValueType::I64:
        return read_elements<int64_t>(count, &out->arr_i, key);
      case ValueType::F32:
        return read_elements<float>(count, &out->arr_f, key);
      case ValueType::F64:
        return read_elements<double>(count, &out->arr_f, key);
      case ValueType::BOOL: {
        RETURN_IF_ERROR(read_elements<uint8_t>(count, &out->arr_u, key));
        for (uint64_t k = 0; k < count; ++k) {
          if (out->arr_u[k] > 1) {
            return fail_at(count_at + 8 + k, fmt::format("metadata key '{}': bool element {} has value {}, neither 0 "
                                                         "nor 1",
                                                         key, k, out->arr_u[k]));
          }
        }
        return Status::ok();
      }
      case ValueType::STRING: {
        out->arr_s.resize(count);
        for (uint64_t k = 0; k < count; ++k) {
          RETURN_IF_ERROR(
              read_string(&out->arr_s[k], [&] { return fmt::format("element {} of metadata key '{}'", k, key); }));
        }
        return Status::ok();
      }
      case ValueType::ARRAY: {
        out->arr.resize(count);
        for (uint64_t k = 0; k < count; ++k) {
          out->arr[k].type = ValueType::ARRAY;
          RETURN_IF_ERROR(read_array(&out->arr[k], depth + 1, key));
        }
        return Status::ok();
      }
    }
    return Status::ok();
  }

  // `count` fixed-size elements, read in chunks (the count was checked against the bytes left).
  template <typename T, typename Dst>
  Status read_elements(uint64_t count, std::vector<Dst>* out, const std::string& key) {
    out->resize(count);
    constexpr uint64_t kChunk = 4096;
    T chunk[kChunk];
    for (uint64_t done = 0; done < count;) {
      const uint64_t n = std::min(kChunk, count - done);
      RETURN_IF_ERROR(
          read_bytes(chunk, n * sizeof(T), [&] { return fmt::format("the array of metadata key '{}'", key); }));
      for (uint64_t k = 0; k < n; ++k) (*out)[done + k] = static_cast<Dst>(chunk[k]);
      done += n;
    }
    return Status::ok();
  }

  // ---- tensor table ---------------------------------------------------------------------
  Status parse_tensor_infos(GgufFile* file) {
    file->tensors.reserve(n_tensors_);
    file->tensor_index.reserve(n_tensors_);
    offset_field_at_.reserve(n_tensors_);
    for (uint64_t k = 0; k < n_tensors_; ++k) {
      TensorInfo t;
      RETURN_IF_ERROR(parse_tensor_info(k, &t));
      const auto [it, inserted] = file->tensor_index.emplace(t.name, file->tensors.size());
      if (!inserted) {
        return fail_at(name_at_,
                       fmt::format("duplicate tensor name '{}' (tensors {} and {})", shown(t.name), it->second, k));
      }
      file->tensors.push_back(std::move(t));
    }
    return Status::ok();
  }

  Status parse_tensor_info(uint64_t k, TensorInfo* t) {
    name_at_ = src_.pos();
    RETURN_IF_ERROR(read_string(&t->name, [&] { return fmt::format("the name of tensor {}", k); }));
    if (t->name.empty()) return fail_at(name_at_, fmt::format("tensor {} has an empty name", k));
    const std::string what = fmt::format("tensor '{}'", shown(t->name));

    const uint64_t dims_at = src_.pos();
    RETURN_IF_ERROR(read_pod(&t->n_dims, [&] { return fmt::format("the dimension count of {}", what); }));
    if (t->n_dims < 1 || t->n_dims > kMaxDims) {
      return fail_at(dims_at, fmt::format("{} has {} dimensions (must be 1 to {})", what, t->n_dims, kMaxDims));
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < t->n_dims; ++d) {
      const uint64_t at = src_.pos();
      int64_t ne = 0;
      RETURN_IF_ERROR(read_pod(&ne, [&] { return fmt::format("dimension {} of {}", d, what); }));
      if (ne <= 0) return fail_at(at, fmt::format("{} dimension {} is {} (must be positive)", what, d, ne));
      if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(ne)) {
        return fail_at(at, fmt::format("{}: the element count overflows 64 bits at dimension {} ({})", what, d, ne));
      }
      n_elements *= static_cast<uint64_t>(ne);
      t->ne[d] = ne;
    }
    t->n_elements = n_elements;

    const uint64_t type_at = src_.pos();
    uint32_t type_id = 0;
    RETURN_IF_ERROR(read_pod(&type_id, [&] { return fmt::format("the type of {}", what); }));
    const DTypeTraits* traits = dtype_traits(type_id);
    if (traits == nullptr) return fail_at(type_at, fmt::format("{} has unknown type id {}", what, type_id));
    t->type = static_cast<DType>(type_id);
    if (t->ne[0] % traits->block_elems != 0) {
      return fail_at(type_at, fmt::format("{}: row length {} is not a multiple of the {} block size {}", what, t->ne[0],
                                          traits->name, traits->block_elems));
    }
    // The row length is a multiple of the block size, so the element count is a whole
    // number of blocks; only blocks * bytes per block can overflow.
    const uint64_t n_blocks = n_elements / static_cast<uint64_t>(traits->block_elems);
    const auto block_bytes = static_cast<uint64_t>(traits->block_bytes);
    if (n_blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
      return fail_at(type_at, fmt::format("{}: the size in bytes ({} blocks of {} bytes) overflows 64 bits", what,
                                          n_blocks, block_bytes));
    }
    t->n_bytes = n_blocks * block_bytes;

    offset_field_at_.push_back(src_.pos());
    RETURN_IF_ERROR(read_pod(&t->offset, [&] { return fmt::format("the data offset of {}", what); }));
    return Status::ok();
  }

  // Offsets aligned, data inside the file, no two tensors sharing bytes.
  Status check_tensor_placement(GgufFile* file) const {
    if (file->tensors.empty()) return Status::ok();
    const uint64_t size = file->file_size;
    if (file->data_offset > size) {
      return fail_at(file->header_bytes, fmt::format("the data section would start at byte {}, past the end of the "
                                                     "file ({} bytes)",
                                                     file->data_offset, size));
    }
    const uint64_t data_bytes = size - file->data_offset;
    for (size_t k = 0; k < file->tensors.size(); ++k) {
      TensorInfo& t = file->tensors[k];
      const uint64_t at = offset_field_at_[k];
      if (t.offset % file->alignment != 0) {
        return fail_at(at, fmt::format("tensor '{}' data offset {} is not a multiple of the alignment {}",
                                       shown(t.name), t.offset, file->alignment));
      }
      if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset) {
        // Print absolute bounds when they fit in 64 bits, else the relative offset.
        if (t.offset <= std::numeric_limits<uint64_t>::max() - file->data_offset &&
            t.n_bytes <= std::numeric_limits<uint64_t>::max() - file->data_offset - t.offset) {
          return fail_at(
              at, fmt::format("tensor '{}' data [{}, {}) extends past the end of the file ({} bytes)", shown(t.name),
                              file->data_offset + t.offset, file->data_offset + t.offset + t.n_bytes, size));
        }
        return fail_at(at, fmt::format("tensor '{}' data offset {} (+{} bytes) lies past the end of the file ({} "
                                       "bytes)",
                                       shown(t.name), t.offset, t.n_bytes, size));
      }
      t.file_offset = file->data_offset + t.offset;
    }
    std::vector<size_t> order(file->tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return file->tensors[a].offset < file->tensors[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = file->tensors[order[k - 1]];
      const TensorInfo& cur = file->tensors[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset) {
        return fail_at(offset_field_at_[order[k]],
                       fmt::format("tensor '{}' data [{}, {}) overlaps tensor '{}' data [{}, {})", shown(cur.name),
                                   cur.file_offset, cur.file_offset + cur.n_bytes, shown(prev.name), prev.file_offset,
                                   prev.file_offset + prev.n_bytes));
      }
    }
    return Status::ok();
  }

  static uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

  HeaderSource& src_;
  const std::string& name_;
  const ParseLimits& limits_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t name_at_ = 0;                   // byte offset of the current tensor's name
  std::vector<uint64_t> offset_field_at_;  // byte offset of each tensor's offset field
};

}  // namespace

Result<GgufFile> parse_header(const uint8_t* data, size_t size, uint64_t file_size, const std::string& name_for_errors,
                              const ParseLimits& limits) {
  HeaderSource src(data, size, file_size);
  return HeaderParser(src, name_for_errors, limits).parse();
}

Result<GgufFile> read_header(const std::string& path, const ParseLimits& limits) {
  // A missing or unreadable path, or one that is not a regular file, is a usage error
  // (exit 2), not a runtime failure: File::open says kBadInput.
  ASSIGN_OR_RETURN(const platform::File file, platform::File::open(path));
  // Sequential header read: ask for readahead, but only of the header we touch.
  file.advise_sequential(0, 0);
  HeaderSource src(file);
  return HeaderParser(src, path, limits).parse();
}

}  // namespace moetier::gguf
