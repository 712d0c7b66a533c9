// Value helpers (typed access, display, factories) and GgufFile's typed getters.
#include <fmt/format.h>

#include <cstdio>
#include <limits>

#include "gguf/gguf.h"

namespace moetier::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8:
      return "u8";
    case ValueType::I8:
      return "i8";
    case ValueType::U16:
      return "u16";
    case ValueType::I16:
      return "i16";
    case ValueType::U32:
      return "u32";
    case ValueType::I32:
      return "i32";
    case ValueType::F32:
      return "f32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::U64:
      return "u64";
    case ValueType::I64:
      return "i64";
    case ValueType::F64:
      return "f64";
  }
  return "unknown";
}

namespace {

bool is_unsigned_type(ValueType t) {
  return t == ValueType::U8 || t == ValueType::U16 || t == ValueType::U32 || t == ValueType::U64 ||
         t == ValueType::BOOL;
}
bool is_signed_type(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}
bool is_float_type(ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }

// Quoted, with control characters, quotes and backslashes escaped so the result stays on one line.
std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

// F32 values are stored widened to double; print them at float precision (1e-06, not 9.99e-07).
std::string format_float(double v, ValueType t) {
  if (t == ValueType::F32) return fmt::format("{}", static_cast<float>(v));
  return fmt::format("{}", v);
}

}  // namespace

uint64_t Value::array_size() const {
  if (type != ValueType::ARRAY) return 0;
  if (elem_type == ValueType::STRING) return arr_s.size();
  if (elem_type == ValueType::ARRAY) return arr.size();
  if (is_signed_type(elem_type)) return arr_i.size();
  if (is_float_type(elem_type)) return arr_f.size();
  return arr_u.size();
}

std::optional<int64_t> Value::as_int() const {
  if (is_signed_type(type)) return i;
  if (is_unsigned_type(type)) {
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (is_float_type(type)) return f;
  if (is_signed_type(type)) return static_cast<double>(i);
  if (is_unsigned_type(type)) return static_cast<double>(u);
  return std::nullopt;
}

std::optional<std::string_view> Value::as_string() const {
  if (type != ValueType::STRING) return std::nullopt;
  return std::string_view(s);
}

std::optional<std::vector<int64_t>> Value::as_int_array() const {
  if (type != ValueType::ARRAY) return std::nullopt;
  if (is_signed_type(elem_type)) return arr_i;
  if (is_unsigned_type(elem_type)) {
    std::vector<int64_t> out;
    out.reserve(arr_u.size());
    for (const uint64_t v : arr_u) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      out.push_back(static_cast<int64_t>(v));
    }
    return out;
  }
  return std::nullopt;
}

std::string Value::to_display_string(size_t max_items) const {
  if (is_unsigned_type(type)) {
    if (type == ValueType::BOOL) return u ? "true" : "false";
    return fmt::format("{}", u);
  }
  if (is_signed_type(type)) return fmt::format("{}", i);
  if (is_float_type(type)) return format_float(f, type);
  if (type == ValueType::STRING) return quote(s);
  if (type != ValueType::ARRAY) return "?";

  const uint64_t n = array_size();
  const uint64_t shown = std::min<uint64_t>(n, max_items);
  std::string out = "[";
  for (uint64_t k = 0; k < shown; ++k) {
    if (k > 0) out += ", ";
    if (elem_type == ValueType::STRING) {
      out += quote(arr_s[k]);
    } else if (elem_type == ValueType::ARRAY) {
      out += arr[k].to_display_string(max_items);
    } else if (elem_type == ValueType::BOOL) {
      out += arr_u[k] ? "true" : "false";
    } else if (is_unsigned_type(elem_type)) {
      out += fmt::format("{}", arr_u[k]);
    } else if (is_signed_type(elem_type)) {
      out += fmt::format("{}", arr_i[k]);
    } else {
      out += format_float(arr_f[k], elem_type);
    }
  }
  if (shown < n) out += fmt::format("{}... ({} items)", shown > 0 ? ", " : "", n);
  out += "]";
  return out;
}

Value Value::make_u32(uint32_t v) {
  Value r;
  r.type = ValueType::U32;
  r.u = v;
  return r;
}
Value Value::make_i32(int32_t v) {
  Value r;
  r.type = ValueType::I32;
  r.i = v;
  return r;
}
Value Value::make_u64(uint64_t v) {
  Value r;
  r.type = ValueType::U64;
  r.u = v;
  return r;
}
Value Value::make_f32(float v) {
  Value r;
  r.type = ValueType::F32;
  r.f = v;
  return r;
}
Value Value::make_bool(bool v) {
  Value r;
  r.type = ValueType::BOOL;
  r.u = v ? 1 : 0;
  return r;
}
Value Value::make_string(std::string v) {
  Value r;
  r.type = ValueType::STRING;
  r.s = std::move(v);
  return r;
}
Value Value::make_string_array(std::vector<std::string> v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::STRING;
  r.arr_s = std::move(v);
  return r;
}
Value Value::make_i32_array(const std::vector<int32_t>& v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::I32;
  r.arr_i.assign(v.begin(), v.end());
  return r;
}
Value Value::make_f32_array(const std::vector<float>& v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::F32;
  r.arr_f.assign(v.begin(), v.end());
  return r;
}

// ---------------------------------------------------------------------------------------
// GgufFile

void GgufFile::index() {
  kv_index.clear();
  tensor_index.clear();
  kv_index.reserve(metadata.size());
  tensor_index.reserve(tensors.size());
  for (size_t k = 0; k < metadata.size(); ++k) kv_index.emplace(metadata[k].first, k);
  for (size_t k = 0; k < tensors.size(); ++k) tensor_index.emplace(tensors[k].name, k);
}

const Value* GgufFile::find(std::string_view key) const {
  if (kv_index.size() == metadata.size()) {
    const auto it = kv_index.find(std::string(key));
    return it == kv_index.end() ? nullptr : &metadata[it->second].second;
  }
  // Not indexed (built by hand): linear scan.
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  if (tensor_index.size() == tensors.size()) {
    const auto it = tensor_index.find(std::string(name));
    return it == tensor_index.end() ? nullptr : &tensors[it->second];
  }
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

std::string describe_type(const Value& v) {
  if (v.type == ValueType::ARRAY) return fmt::format("an array of {}", value_type_name(v.elem_type));
  return fmt::format("a {}", value_type_name(v.type));
}

}  // namespace

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return Status::bad_input(fmt::format("missing metadata key '{}'", key));
  if (const auto r = v->as_int()) return *r;
  if (v->type == ValueType::U64) {
    return Status::bad_input(fmt::format("metadata key '{}' = {} does not fit a signed 64-bit integer", key, v->u));
  }
  return Status::bad_input(fmt::format("metadata key '{}' is {}, expected an integer", key, describe_type(*v)));
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return Status::bad_input(fmt::format("missing metadata key '{}'", key));
  if (v->type != ValueType::BOOL) {
    if (const auto r = v->as_float()) return *r;
  }
  return Status::bad_input(fmt::format("metadata key '{}' is {}, expected a number", key, describe_type(*v)));
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return Status::bad_input(fmt::format("missing metadata key '{}'", key));
  if (const auto r = v->as_string()) return std::string(*r);
  return Status::bad_input(fmt::format("metadata key '{}' is {}, expected a string", key, describe_type(*v)));
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  const Value* v = find(key);
  if (v == nullptr) return fallback;
  return v->as_int().value_or(fallback);
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  const Value* v = find(key);
  if (v == nullptr || v->type == ValueType::BOOL) return fallback;
  return v->as_float().value_or(fallback);
}

std::string GgufFile::get_string_or(std::string_view key, std::string_view fallback) const {
  const Value* v = find(key);
  if (v == nullptr) return std::string(fallback);
  return std::string(v->as_string().value_or(fallback));
}

}  // namespace moetier::gguf
