// GGUF v2/v3: the in-memory description of a file's header (metadata + tensor table).
// Format: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv, then n_kv key/value pairs,
// then n_tensors tensor infos, padding to `general.alignment` (default 32), then the data
// section. All integers little-endian. Strings are u64 length + bytes (no NUL).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tensor/dtype.h"

namespace moetier::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);  // "u32", "string", "array", ...

// One metadata value. Scalars use one of u/i/f/s by `type`; arrays keep their element
// type and store elements in the matching typed vector (arrays of arrays in `arr`).
struct Value {
  ValueType type = ValueType::U8;
  ValueType elem_type = ValueType::U8;  // arrays only

  uint64_t u = 0;     // U8, U16, U32, U64, BOOL (0/1)
  int64_t i = 0;      // I8, I16, I32, I64
  double f = 0;       // F32, F64
  std::string s;      // STRING

  std::vector<uint64_t> arr_u;     // arrays of U8..U64, BOOL
  std::vector<int64_t> arr_i;      // arrays of I8..I64
  std::vector<double> arr_f;       // arrays of F32, F64
  std::vector<std::string> arr_s;  // arrays of STRING
  std::vector<Value> arr;          // arrays of ARRAY

  bool is_array() const { return type == ValueType::ARRAY; }
  uint64_t array_size() const;
  // Scalar integer of any integer/bool type; nullopt otherwise (or if it does not fit).
  std::optional<int64_t> as_int() const;
  // Scalar float or integer; nullopt otherwise.
  std::optional<double> as_float() const;
  std::optional<std::string_view> as_string() const;
  // Integer array elements (any integer element type); nullopt if not an integer array.
  std::optional<std::vector<int64_t>> as_int_array() const;
  // Human-readable rendering; long arrays are abbreviated ("[1, 2, 3, ... (248320 items)]").
  std::string to_display_string(size_t max_items = 8) const;

  static Value make_u32(uint32_t v);
  static Value make_i32(int32_t v);
  static Value make_u64(uint64_t v);
  static Value make_f32(float v);
  static Value make_bool(bool v);
  static Value make_string(std::string v);
  static Value make_string_array(std::vector<std::string> v);
  static Value make_i32_array(const std::vector<int32_t>& v);
  static Value make_f32_array(const std::vector<float>& v);
};

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<int64_t, kMaxDims> ne = {1, 1, 1, 1};  // ggml order: ne[0] is the fastest (row length)
  DType type = DType::F32;
  uint64_t offset = 0;        // relative to the start of the data section, as stored
  uint64_t n_elements = 0;    // product of ne
  uint64_t n_bytes = 0;       // size of the tensor's data
  uint64_t file_offset = 0;   // absolute offset in the file (data_offset + offset)
};

// A validated header. Every offset/size in it has been checked against the file size,
// so consumers may index the data section without further checks.
struct GgufFile {
  std::string path;
  uint32_t version = 0;
  uint64_t file_size = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;  // absolute offset of the data section (aligned)
  uint64_t header_bytes = 0; // bytes of kv + tensor table as read

  std::vector<std::pair<std::string, Value>> metadata;  // in file order
  std::vector<TensorInfo> tensors;                      // in file order

  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;

  // Typed getters with clear errors ("missing metadata key 'qwen35moe.block_count'",
  // "metadata key 'x' is a string, expected an integer").
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  std::string get_string_or(std::string_view key, std::string_view fallback) const;

  // Index maps, built by the reader (and by index()).
  std::unordered_map<std::string, size_t> kv_index;
  std::unordered_map<std::string, size_t> tensor_index;
  void index();
};

// Limits that keep a hostile header from exhausting memory or time. A header field
// larger than what the rest of the file could possibly hold is rejected before any
// allocation (e.g. an array count times its minimum element size must fit in the bytes
// remaining).
struct ParseLimits {
  uint64_t max_string_bytes = 64ull << 20;   // one string
  uint64_t max_array_elems = 1ull << 28;     // one array
  uint64_t max_tensors = 1ull << 20;
  uint64_t max_kv = 1ull << 20;
  uint32_t max_array_depth = 4;              // arrays of arrays
};

// Parse and validate the header of the file at `path`, reading only the header bytes.
// On failure the Status is kBadInput with one line naming the problem and the byte
// offset, e.g. "model.gguf: tensor 'blk.3.ffn_up_exps.weight' data [1234, 99999) at byte
// 8123 extends past the end of the file (5000 bytes)".
Result<GgufFile> read_header(const std::string& path, const ParseLimits& limits = {});

// The same, from bytes in memory (the whole file or at least its header; `file_size` is
// the size the offsets are validated against). Used by the fuzzer and tests.
Result<GgufFile> parse_header(const uint8_t* data, size_t size, uint64_t file_size,
                              const std::string& name_for_errors, const ParseLimits& limits = {});

}  // namespace moetier::gguf
