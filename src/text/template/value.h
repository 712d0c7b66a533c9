// Runtime values of the Jinja-subset template engine. They mirror the Python objects Jinja2
// works with when Hugging Face renders a chat template: undefined, None, bool, int, float,
// str (UTF-8 bytes; length and slicing count code points), list, dict (any hashable key: None,
// bool, int, float, str or a tuple of those, as Python dicts; insertion order kept, as Python
// dicts and the JSON input do), namespace() objects and callables.
// Lists, dicts and namespaces are shared by reference like Python objects, so `set ns.x = ...`
// inside a loop is visible outside it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace moetier::text::jinja {

// Line and column (both 1-based; the column counts bytes) of a construct in the template source.
struct SourcePos {
  int line = 1;
  int col = 1;
};

// "chat template 3:14: <message>": every error the engine reports names the position.
Status template_error(SourcePos pos, const std::string& message);

class Value;
using ValueList = std::vector<Value>;
// Names to values (scopes, namespace attributes, keyword arguments): insertion order, unique keys.
using ValueDict = std::vector<std::pair<std::string, Value>>;
// A Python dict: hashable keys (see is_hashable), insertion order, unique keys under Python's
// key equality (1, 1.0 and True are one key; "1" is another).
using ValueMap = std::vector<std::pair<Value, Value>>;

// Positional and keyword arguments of a call, filter or test (the filter's input and the
// tested value are passed separately).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A function value: a macro or a builtin such as namespace() or raise_exception().
struct Callable {
  std::string name;
  std::function<Result<Value>(const CallArgs& args, SourcePos pos)> call;
};

struct Undefined {
  std::string hint;  // what was looked up ("message.reasoning", "x"), for error messages
};
struct Namespace {
  ValueDict attrs;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() : data_(Undefined{}) {}
  static Value undefined(std::string hint = {}) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(nullptr); }
  Value(bool b) : data_(b) {}                     // NOLINT: implicit by design
  Value(int64_t i) : data_(i) {}                  // NOLINT
  Value(int i) : data_(int64_t{i}) {}             // NOLINT
  Value(double d) : data_(d) {}                   // NOLINT
  Value(std::string s) : data_(std::move(s)) {}   // NOLINT
  Value(const char* s) : data_(std::string(s)) {}  // NOLINT
  Value(ValueList l) : data_(std::make_shared<ValueList>(std::move(l))) {}  // NOLINT
  Value(ValueMap d) : data_(std::make_shared<ValueMap>(std::move(d))) {}  // NOLINT
  Value(const ValueDict& d);  // NOLINT: a dict with string keys
  // A Python tuple: a list that prints as (a, b) (dict.items() pairs, `(a, b)` literals).
  static Value make_tuple(ValueList items) {
    Value v(std::move(items));
    v.is_tuple_ = true;
    return v;
  }
  // Jinja2's Markup (a `|safe` or `|escape` result): a string that `+` keeps unescaped while
  // HTML-escaping the plain string on the other side, as markupsafe's Markup.__add__ does.
  static Value make_markup(std::string s) {
    Value v(std::move(s));
    v.is_markup_ = true;
    return v;
  }
  static Value make_namespace(ValueDict attrs);
  static Value make_callable(std::string name, decltype(Callable::call) fn);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }  // bool excluded, as Jinja's `number` test does not
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }  // lists and tuples
  bool is_tuple() const { return is_tuple_; }
  bool is_markup() const { return is_markup_; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_number() const;  // int, float or bool as double
  const std::string& as_string() const { return std::get<std::string>(data_); }
  ValueList& list() const { return *std::get<std::shared_ptr<ValueList>>(data_); }
  ValueMap& dict() const { return *std::get<std::shared_ptr<ValueMap>>(data_); }
  Namespace& ns() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Callable& callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }

  // Python truthiness: undefined, None, False, 0, 0.0, "", [], {} are false.
  bool truthy() const;
  // Jinja2 `{{ value }}` output: undefined prints nothing, None prints "None", True "True",
  // floats as Python's repr, lists and dicts as Python's repr.
  std::string to_output() const;
  // Python repr(): strings quoted ('a'), used inside printed lists and dicts.
  std::string repr() const;
  // Name of the type for error messages ("string", "list", "undefined", ...).
  std::string type_name() const;

 private:
  explicit Value(Undefined u) : data_(std::move(u)) {}
  explicit Value(std::nullptr_t) : data_(nullptr) {}
  explicit Value(std::shared_ptr<Namespace> n) : data_(std::move(n)) {}
  explicit Value(std::shared_ptr<Callable> c) : data_(std::move(c)) {}

  // Order matches Kind.
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
               std::shared_ptr<ValueMap>, std::shared_ptr<Namespace>, std::shared_ptr<Callable>>
      data_;
  bool is_tuple_ = false;
  bool is_markup_ = false;
};

// Name lookup in scopes and namespaces; nullptr when the name is absent.
const Value* dict_find(const ValueDict& dict, std::string_view key);
void dict_set(ValueDict& dict, const std::string& key, Value value);

// Python's hashable values, the ones a dict key may be: None, bool, int, float, str, and tuples
// of hashable values (undefined, lists, dicts, namespaces and functions are not).
bool is_hashable(const Value& v);
// Dict lookup by key under Python's key equality; nullptr when absent. The string form is
// `d.name` and `d['name']`.
const Value* map_find(const ValueMap& map, const Value& key);
const Value* map_find(const ValueMap& map, std::string_view key);
// d[key] = value: an equal key keeps its place and its first spelling (d[1] = x after {True: y}
// leaves the key True), as in Python. `key` must be hashable (checked by the callers).
void map_set(ValueMap& map, Value key, Value value);

// Conversions to and from JSON. ordered_json keeps object key order, which tojson must reproduce.
Value value_from_json(const nlohmann::ordered_json& json);

// Python json.dumps options. The defaults are Hugging Face's tojson: ensure_ascii=False, the
// default separators (", " and ": "), key order kept. With indent >= 0 and no explicit
// separators, items are separated by "," plus the newline and indentation, as in Python.
struct JsonFormat {
  int indent = -1;  // < 0: single line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool ensure_ascii = false;  // true: every code point outside ' '..'~' as \uXXXX (surrogate pairs)
  bool sort_keys = false;
};

// json.dumps(value, ...). Fails for undefined values, namespaces and callables.
Result<std::string> to_json_text(const Value& value, const JsonFormat& format, SourcePos pos);

// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(std::string_view s);

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string python_float_repr(double d);

// Python `==` between two values (1 == 1.0 == True; lists and dicts compare element-wise).
bool values_equal(const Value& a, const Value& b);

}  // namespace moetier::text::jinja
