// Shared helpers (argument access, item lookup, slicing, iteration), tests and globals.
// Filters are in filters.cpp, methods in methods.cpp.
#include "text/template/builtins.h"

#include <algorithm>
#include <ctime>

#include "text/template/builtins_internal.h"
#include "text/template/operators.h"
#include "text/template/string_ops.h"

namespace moetier::text::jinja {

const Value* find_arg(const CallArgs& args, size_t index, std::string_view name) {
  for (const auto& [key, value] : args.keyword) {
    if (key == name) return &value;
  }
  return index < args.positional.size() ? &args.positional[index] : nullptr;
}

Status check_args(const CallArgs& args, std::string_view what, std::initializer_list<std::string_view> names,
                  SourcePos pos) {
  if (args.positional.size() > names.size()) {
    return template_error(pos, fmt::format("{} takes at most {} arguments, got {}", what, names.size(),
                                           args.positional.size()));
  }
  for (const auto& [key, value] : args.keyword) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      return template_error(pos, fmt::format("{} has no argument '{}'", what, key));
    }
  }
  return Status::ok();
}

Result<std::optional<std::string>> optional_string_arg(const CallArgs& args, size_t index, std::string_view name,
                                                       std::string_view what, SourcePos pos) {
  const Value* v = find_arg(args, index, name);
  if (!v || v->is_none() || v->is_undefined()) return std::optional<std::string>();
  if (!v->is_string()) {
    return template_error(pos, fmt::format("{}: argument '{}' must be a string, got {}", what, name, v->type_name()));
  }
  return std::optional<std::string>(v->as_string());
}

Result<int64_t> int_arg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback,
                        std::string_view what, SourcePos pos) {
  const Value* v = find_arg(args, index, name);
  if (!v || v->is_none() || v->is_undefined()) return fallback;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return int64_t{v->as_bool()};
  return template_error(pos, fmt::format("{}: argument '{}' must be an integer, got {}", what, name, v->type_name()));
}

Result<Value> python_getitem(const Value& object, const Value& index, SourcePos pos) {
  if (object.is_list() && (index.is_int() || index.is_bool())) {
    const ValueList& items = object.list();
    int64_t i = index.is_bool() ? int64_t{index.as_bool()} : index.as_int();
    if (i < 0) i += static_cast<int64_t>(items.size());
    if (i < 0 || i >= static_cast<int64_t>(items.size())) return Value::undefined();
    return items[static_cast<size_t>(i)];
  }
  if (object.is_string() && index.is_int()) {
    const std::string& s = object.as_string();
    const std::vector<size_t> offsets = codepoint_offsets(s);
    const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    int64_t i = index.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined();
    return Value(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
  }
  if (object.is_dict() && is_hashable(index)) {
    if (const Value* v = map_find(object.dict(), index)) return *v;
    return Value::undefined();
  }
  if (object.is_namespace() && index.is_string()) {
    if (const Value* v = dict_find(object.ns().attrs, index.as_string())) return *v;
    return Value::undefined();
  }
  return Value::undefined();  // Jinja2: a failed lookup is undefined, not an error
}

Result<Value> python_slice(const Value& object, const std::optional<int64_t>& start_arg,
                           const std::optional<int64_t>& stop_arg, const std::optional<int64_t>& step_arg,
                           SourcePos pos) {
  const int64_t step = step_arg.value_or(1);
  if (step == 0) return template_error(pos, "slice step cannot be zero");
  std::vector<size_t> offsets;
  int64_t n = 0;
  if (object.is_string()) {
    offsets = codepoint_offsets(object.as_string());
    n = static_cast<int64_t>(offsets.size()) - 1;
  } else if (object.is_list()) {
    n = static_cast<int64_t>(object.list().size());
  } else {
    return template_error(pos, fmt::format("cannot slice a {}", object.type_name()));
  }
  // Python's slice.indices(): clamp to [0, n] for positive steps, [-1, n-1] for negative.
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(start_arg, step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(stop_arg, step > 0 ? n : -1);
  std::vector<int64_t> picked;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picked.push_back(i);
  if (object.is_string()) {
    const std::string& s = object.as_string();
    std::string out;
    for (int64_t i : picked) out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    return Value(std::move(out));
  }
  ValueList out;
  out.reserve(picked.size());
  for (int64_t i : picked) out.push_back(object.list()[static_cast<size_t>(i)]);
  return Value(std::move(out));
}

Result<ValueList> iterate(const Value& value, SourcePos pos) {
  switch (value.kind()) {
    case Value::Kind::kList: return value.list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [key, v] : value.dict()) keys.push_back(key);
      return keys;
    }
    case Value::Kind::kString: {
      const std::string& s = value.as_string();
      const std::vector<size_t> offsets = codepoint_offsets(s);
      ValueList chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      return chars;
    }
    case Value::Kind::kUndefined: return ValueList{};
    default: return template_error(pos, fmt::format("cannot iterate over a {}", value.type_name()));
  }
}

// ---------------------------------------------------------------------------------------------
// Tests (`value is name(args)`)

namespace {

using TestFn = Result<bool> (*)(const Value& v, const CallArgs& args, SourcePos pos);

Result<bool> compare_test(std::string_view op, const Value& v, const CallArgs& args, SourcePos pos) {
  const Value* other = find_arg(args, 0, "other");
  if (!other) return template_error(pos, fmt::format("test '{}' needs an argument", op));
  ASSIGN_OR_RETURN(Value result, binary_op(op, v, *other, pos));
  return result.truthy();
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

const TestEntry kTests[] = {
    {"defined", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return !v.is_undefined(); }},
    {"undefined", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_undefined(); }},
    {"none", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_none(); }},
    {"boolean", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_bool(); }},
    {"true", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_bool() && v.as_bool(); }},
    {"false", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_bool() && !v.as_bool(); }},
    {"integer", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_int(); }},
    {"float", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_float(); }},
    {"number", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_number() || v.is_bool(); }},
    {"string", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_string(); }},
    {"mapping", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_dict(); }},
    // Jinja2's default Undefined is iterable (as empty) and has len() and [].
    {"iterable", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> {
       return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
     }},
    {"sequence", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> {
       return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
     }},
    {"callable", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> { return v.is_callable(); }},
    {"odd", [](const Value& v, const CallArgs&, SourcePos pos) -> Result<bool> {
       if (!v.is_int()) return template_error(pos, fmt::format("test 'odd' needs an integer, got {}", v.type_name()));
       return v.as_int() % 2 != 0;
     }},
    {"even", [](const Value& v, const CallArgs&, SourcePos pos) -> Result<bool> {
       if (!v.is_int()) return template_error(pos, fmt::format("test 'even' needs an integer, got {}", v.type_name()));
       return v.as_int() % 2 == 0;
     }},
    {"divisibleby", [](const Value& v, const CallArgs& args, SourcePos pos) -> Result<bool> {
       ASSIGN_OR_RETURN(int64_t n, int_arg(args, 0, "num", 0, "test 'divisibleby'", pos));
       if (!v.is_int() || n == 0) return template_error(pos, "test 'divisibleby' needs integers and a non-zero divisor");
       return v.as_int() % n == 0;
     }},
    {"lower", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> {
       return v.is_string() && python_lower(v.as_string()) == v.as_string();
     }},
    {"upper", [](const Value& v, const CallArgs&, SourcePos) -> Result<bool> {
       return v.is_string() && python_upper(v.as_string()) == v.as_string();
     }},
    {"in", [](const Value& v, const CallArgs& args, SourcePos pos) -> Result<bool> {
       const Value* seq = find_arg(args, 0, "seq");
       if (!seq) return template_error(pos, "test 'in' needs an argument");
       return contains(*seq, v, pos);
     }},
    {"sameas", [](const Value& v, const CallArgs& args, SourcePos pos) -> Result<bool> {
       const Value* other = find_arg(args, 0, "other");
       if (!other) return template_error(pos, "test 'sameas' needs an argument");
       return v.kind() == other->kind() && values_equal(v, *other);
     }},
    {"eq", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("==", v, a, p); }},
    {"equalto", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("==", v, a, p); }},
    {"==", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("==", v, a, p); }},
    {"ne", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("!=", v, a, p); }},
    {"!=", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("!=", v, a, p); }},
    {"lt", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("<", v, a, p); }},
    {"lessthan", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("<", v, a, p); }},
    {"le", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test("<=", v, a, p); }},
    {"gt", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test(">", v, a, p); }},
    {"greaterthan", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test(">", v, a, p); }},
    {"ge", [](const Value& v, const CallArgs& a, SourcePos p) { return compare_test(">=", v, a, p); }},
};

const TestEntry* find_test(std::string_view name) {
  for (const TestEntry& t : kTests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

bool is_known_test(std::string_view name) { return find_test(name) != nullptr; }

Result<bool> apply_test(std::string_view name, const Value& value, const CallArgs& args, SourcePos pos) {
  const TestEntry* test = find_test(name);
  if (!test) return template_error(pos, fmt::format("unknown test '{}'", name));
  return test->fn(value, args, pos);
}

// ---------------------------------------------------------------------------------------------
// Global functions

ValueDict builtin_globals() {
  ValueDict globals;
  globals.emplace_back("namespace", Value::make_callable("namespace", [](const CallArgs& args, SourcePos pos) -> Result<Value> {
    ValueDict attrs;
    for (const Value& v : args.positional) {  // namespace({'a': 1}) copies a dict
      if (!v.is_dict()) return template_error(pos, "namespace() takes keyword arguments or a dict");
      for (const auto& [k, item] : v.dict()) {
        if (k.is_string()) dict_set(attrs, k.as_string(), item);  // other keys cannot be read as attributes
      }
    }
    for (const auto& [k, v] : args.keyword) dict_set(attrs, k, v);
    return Value::make_namespace(std::move(attrs));
  }));
  globals.emplace_back("dict", Value::make_callable("dict", [](const CallArgs& args, SourcePos pos) -> Result<Value> {
    // dict(mapping or iterable of pairs, **kwargs), as Python's.
    if (args.positional.size() > 1) return template_error(pos, "dict() takes at most one positional argument");
    ValueMap dict;
    if (!args.positional.empty()) {
      const Value& source = args.positional[0];
      if (source.is_dict()) {
        dict = source.dict();
      } else {
        ASSIGN_OR_RETURN(ValueList pairs, iterate(source, pos));
        for (const Value& pair : pairs) {
          if (!pair.is_list() || pair.list().size() != 2) {
            return template_error(pos, "dict(): each item of the sequence must be a pair");
          }
          if (!is_hashable(pair.list()[0])) {
            return template_error(pos, fmt::format("dict(): unhashable key: a {}", pair.list()[0].type_name()));
          }
          map_set(dict, pair.list()[0], pair.list()[1]);
        }
      }
    }
    for (const auto& [k, v] : args.keyword) map_set(dict, Value(k), v);
    return Value(std::move(dict));
  }));
  globals.emplace_back("range", Value::make_callable("range", [](const CallArgs& args, SourcePos pos) -> Result<Value> {
    int64_t bounds[3] = {0, 0, 1};
    const size_t n = args.positional.size();
    if (n < 1 || n > 3 || !args.keyword.empty()) return template_error(pos, "range() takes 1 to 3 integer arguments");
    for (size_t i = 0; i < n; ++i) {
      const Value& v = args.positional[i];
      if (!v.is_int()) return template_error(pos, fmt::format("range() arguments must be integers, got {}", v.type_name()));
    }
    if (n == 1) bounds[1] = args.positional[0].as_int();
    else {
      bounds[0] = args.positional[0].as_int();
      bounds[1] = args.positional[1].as_int();
      if (n == 3) bounds[2] = args.positional[2].as_int();
    }
    if (bounds[2] == 0) return template_error(pos, "range() step must not be zero");
    constexpr int64_t kMaxItems = 10'000'000;  // a loop over more is a runaway template
    ValueList items;
    for (int64_t i = bounds[0]; bounds[2] > 0 ? i < bounds[1] : i > bounds[1]; i += bounds[2]) {
      if (static_cast<int64_t>(items.size()) >= kMaxItems) return template_error(pos, "range() is too long");
      items.emplace_back(i);
    }
    return Value(std::move(items));
  }));
  // The template's own error: the message is what the template author wrote, passed on as is.
  globals.emplace_back("raise_exception", Value::make_callable("raise_exception", [](const CallArgs& args, SourcePos) -> Result<Value> {
    std::string message = args.positional.empty() ? "raise_exception() called" : args.positional[0].to_output();
    return Status::bad_input(std::move(message));
  }));
  // Hugging Face's strftime_now(format): the current local time.
  globals.emplace_back("strftime_now", Value::make_callable("strftime_now", [](const CallArgs& args, SourcePos pos) -> Result<Value> {
    if (args.positional.size() != 1 || !args.positional[0].is_string()) {
      return template_error(pos, "strftime_now() takes one format string");
    }
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[256];
    const size_t len = std::strftime(buf, sizeof(buf), args.positional[0].as_string().c_str(), &local);
    return Value(std::string(buf, len));
  }));
  return globals;
}

}  // namespace moetier::text::jinja
