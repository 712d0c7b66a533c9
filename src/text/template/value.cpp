#include "text/template/value.h"

#include "text/template/operators.h"
#include "text/template/string_ops.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace moetier::text::jinja {

Status template_error(SourcePos pos, const std::string& message) {
  return Status::bad_input(fmt::format("chat template {}:{}: {}", pos.line, pos.col, message));
}

Value Value::make_namespace(ValueDict attrs) {
  auto ns = std::make_shared<Namespace>();
  ns->attrs = std::move(attrs);
  return Value(std::move(ns));
}

Value::Value(const ValueDict& d) : data_(std::make_shared<ValueMap>()) {
  ValueMap& map = dict();
  map.reserve(d.size());
  for (const auto& [key, value] : d) map.emplace_back(Value(key), value);
}

Value Value::make_callable(std::string name, decltype(Callable::call) fn) {
  return Value(std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

double Value::as_number() const {
  switch (kind()) {
    case Kind::kInt: return static_cast<double>(as_int());
    case Kind::kFloat: return std::get<double>(data_);
    case Kind::kBool: return as_bool() ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_number() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kList: return !list().empty();
    case Kind::kDict: return !dict().empty();
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form "-D.DDDe+XX", then laid out like Python's
  // repr: positional notation for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exponent + 1));
      int_part.append(exponent + 1 - int_part.size(), '0');
      std::string frac = digits.size() > static_cast<size_t>(exponent + 1) ? digits.substr(exponent + 1) : "0";
      out = int_part + "." + frac;
    } else {
      out = "0." + std::string(-exponent - 1, '0') + digits;
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  return fmt::format("{}{}e{}{:02d}", sign, mantissa, exponent < 0 ? "-" : "+", std::abs(exponent));
}

namespace {

std::string python_str_repr(const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == quote) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += quote;
  return out;
}

std::string dict_repr(const ValueDict& dict) {
  std::string out = "{";
  for (size_t i = 0; i < dict.size(); ++i) {
    if (i) out += ", ";
    out += python_str_repr(dict[i].first) + ": " + dict[i].second.repr();
  }
  return out + "}";
}

std::string map_repr(const ValueMap& map) {
  std::string out = "{";
  for (size_t i = 0; i < map.size(); ++i) {
    if (i) out += ", ";
    out += map[i].first.repr() + ": " + map[i].second.repr();
  }
  return out + "}";
}

}  // namespace

std::string Value::to_output() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(as_int());
    case Kind::kFloat: return python_float_repr(as_number());
    case Kind::kString: return python_str_repr(as_string());
    case Kind::kList: {
      std::string out = is_tuple_ ? "(" : "[";
      const ValueList& items = list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += items[i].repr();
      }
      if (is_tuple_) return out + (items.size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: return map_repr(dict());
    case Kind::kNamespace: return "<Namespace " + dict_repr(ns().attrs) + ">";
    case Kind::kCallable: return "<function " + callable().name + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "boolean";
    case Kind::kInt: return "integer";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "mapping";
    case Kind::kNamespace: return "namespace";
    case Kind::kCallable: return "function";
  }
  return "?";
}

const Value* dict_find(const ValueDict& dict, std::string_view key) {
  for (const auto& [k, v] : dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

void dict_set(ValueDict& dict, const std::string& key, Value value) {
  for (auto& [k, v] : dict) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  dict.emplace_back(key, std::move(value));
}

bool is_hashable(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString: return true;
    case Value::Kind::kList:
      return v.is_tuple() && std::all_of(v.list().begin(), v.list().end(), [](const Value& item) { return is_hashable(item); });
    default: return false;
  }
}

const Value* map_find(const ValueMap& map, const Value& key) {
  if (key.is_string()) return map_find(map, std::string_view(key.as_string()));
  for (const auto& [k, v] : map) {
    if (values_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* map_find(const ValueMap& map, std::string_view key) {
  for (const auto& [k, v] : map) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void map_set(ValueMap& map, Value key, Value value) {
  for (auto& [k, v] : map) {
    if (values_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  map.emplace_back(std::move(key), std::move(value));
}

Value value_from_json(const nlohmann::ordered_json& json) {
  using J = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case J::null: return Value::none();
    case J::boolean: return Value(json.get<bool>());
    case J::number_integer: return Value(json.get<int64_t>());
    case J::number_unsigned: {
      // Above INT64_MAX only as a float (Python would keep the big int; no template needs it).
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case J::number_float: return Value(json.get<double>());
    case J::string: return Value(json.get<std::string>());
    case J::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item));
      return Value(std::move(items));
    }
    case J::object: {
      ValueMap dict;
      dict.reserve(json.size());
      for (const auto& [key, item] : json.items()) dict.emplace_back(Value(key), value_from_json(item));
      return Value(std::move(dict));
    }
    default: return Value::undefined();  // binary / discarded: not produced by the JSON parser
  }
}

namespace {

// Python json's string escaping: '"', '\\' and control characters below 0x20 always; with
// ensure_ascii also everything outside ' '..'~', as \uXXXX (UTF-16 surrogate pairs above U+FFFF).
void append_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto escape_unit = [&](uint32_t unit) { out += fmt::format("\\u{:04x}", unit); };
  for (uint32_t cp : ensure_ascii ? decode_utf8(s) : std::vector<uint32_t>{}) {
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp >= 0x20 && cp <= 0x7E) {
      out += static_cast<char>(cp);
    } else if (cp > 0xFFFF) {
      const uint32_t v = cp - 0x10000;
      escape_unit(0xD800 + (v >> 10));
      escape_unit(0xDC00 + (v & 0x3FF));
    } else {
      escape_unit(cp);
    }
  }
  if (ensure_ascii) {
    out += '"';
    return;
  }
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          escape_unit(c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// json.dumps turns the keys that are not strings into strings: 1 -> "1", 1.5 -> "1.5",
// True -> "true", None -> "null"; any other key (a tuple) fails.
Result<std::string> json_key(const Value& key, SourcePos pos) {
  switch (key.kind()) {
    case Value::Kind::kString: return key.as_string();
    case Value::Kind::kInt: return std::to_string(key.as_int());
    case Value::Kind::kBool: return std::string(key.as_bool() ? "true" : "false");
    case Value::Kind::kNone: return std::string("null");
    case Value::Kind::kFloat: {
      const double d = key.as_number();
      if (std::isnan(d)) return std::string("NaN");
      if (std::isinf(d)) return std::string(d > 0 ? "Infinity" : "-Infinity");
      return python_float_repr(d);
    }
    default:
      return template_error(pos, fmt::format("tojson: keys must be str, int, float, bool or None, not {}",
                                             key.is_tuple() ? "tuple" : key.type_name()));
  }
}

Status append_json(std::string& out, const Value& v, const JsonFormat& format, int level, SourcePos pos) {
  using K = Value::Kind;
  auto newline = [&](int lvl) {
    if (format.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(format.indent) * lvl, ' ');
  };
  switch (v.kind()) {
    case K::kNone: out += "null"; return Status::ok();
    case K::kBool: out += v.as_bool() ? "true" : "false"; return Status::ok();
    case K::kInt: out += std::to_string(v.as_int()); return Status::ok();
    case K::kFloat: {
      const double d = v.as_number();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(d);
      return Status::ok();
    }
    case K::kString: append_json_string(out, v.as_string(), format.ensure_ascii); return Status::ok();
    case K::kList: {
      const ValueList& items = v.list();
      if (items.empty()) {
        out += "[]";
        return Status::ok();
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += format.item_separator;
        newline(level + 1);
        RETURN_IF_ERROR(append_json(out, items[i], format, level + 1, pos));
      }
      newline(level);
      out += ']';
      return Status::ok();
    }
    case K::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& entry : v.dict()) entries.push_back(&entry);
      if (format.sort_keys) {
        // Python sorts the items before converting the keys, so mixed key types fail as there.
        Status failure;
        std::stable_sort(entries.begin(), entries.end(), [&](auto* a, auto* b) {
          Result<int> c = compare_values(a->first, b->first, pos);
          if (!c.is_ok()) {
            if (failure.is_ok()) failure = c.status();
            return false;
          }
          return *c < 0;
        });
        RETURN_IF_ERROR(failure);
      }
      if (entries.empty()) {
        out += "{}";
        return Status::ok();
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += format.item_separator;
        newline(level + 1);
        ASSIGN_OR_RETURN(std::string key, json_key(entries[i]->first, pos));
        append_json_string(out, key, format.ensure_ascii);
        out += format.key_separator;
        RETURN_IF_ERROR(append_json(out, entries[i]->second, format, level + 1, pos));
      }
      newline(level);
      out += '}';
      return Status::ok();
    }
    case K::kNamespace: return template_error(pos, "tojson: a namespace is not JSON serializable");
    case K::kUndefined:
      return template_error(pos, fmt::format("tojson: '{}' is undefined", v.undefined_hint()));
    case K::kCallable: return template_error(pos, "tojson: a function is not JSON serializable");
  }
  return Status::ok();
}

}  // namespace

Result<std::string> to_json_text(const Value& value, const JsonFormat& format, SourcePos pos) {
  std::string out;
  RETURN_IF_ERROR(append_json(out, value, format, 0, pos));
  return out;
}

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  const bool a_num = a.is_number() || a.is_bool();
  const bool b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    auto as_i = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
    return as_i(a) == as_i(b);
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.as_string() == b.as_string();
    case K::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;  // Python: (1, 2) != [1, 2]
      const ValueList& x = a.list();
      const ValueList& y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case K::kDict: {
      const ValueMap& x = a.dict();
      const ValueMap& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, val] : x) {
        const Value* other = map_find(y, key);
        if (!other || !values_equal(val, *other)) return false;
      }
      return true;
    }
    case K::kNamespace: return &a.ns() == &b.ns();
    case K::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

}  // namespace moetier::text::jinja
