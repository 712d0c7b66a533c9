// Python methods templates call on values: str.startswith/strip/split/..., dict.items/get/...
// Lists are immutable (Hugging Face renders in an ImmutableSandboxedEnvironment), so
// list.append and friends are refused with a clear error rather than silently ignored.
#include <algorithm>

#include "text/template/builtins.h"
#include "text/template/builtins_internal.h"
#include "text/template/string_ops.h"

namespace moetier::text::jinja {

namespace {

// startswith / endswith accept one string or a tuple (list) of strings.
Result<Value> affix_test(const std::string& s, const CallArgs& args, bool prefix, SourcePos pos) {
  const char* what = prefix ? "str.startswith" : "str.endswith";
  RETURN_IF_ERROR(check_args(args, what, {"prefix"}, pos));
  const Value* arg = find_arg(args, 0, "prefix");
  if (!arg) return template_error(pos, fmt::format("{}() needs an argument", what));
  std::vector<std::string> candidates;
  if (arg->is_string()) {
    candidates.push_back(arg->as_string());
  } else if (arg->is_list()) {
    for (const Value& v : arg->list()) {
      if (!v.is_string()) return template_error(pos, fmt::format("{}(): tuple items must be strings", what));
      candidates.push_back(v.as_string());
    }
  } else {
    return template_error(pos, fmt::format("{}() needs a string, got {}", what, arg->type_name()));
  }
  for (const std::string& c : candidates) {
    if (c.size() > s.size()) continue;
    if (prefix ? s.compare(0, c.size(), c) == 0 : s.compare(s.size() - c.size(), c.size(), c) == 0) return Value(true);
  }
  return Value(false);
}

// str.format with plain fields: "{}", "{0}", "{name}", "{x!r}", "{{" and "}}". Format specs
// (":>10") and attribute paths ("{0.name}") are refused with an error.
Result<Value> python_format(const std::string& s, const CallArgs& args, SourcePos pos) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '}') {
      if (i + 1 < s.size() && s[i + 1] == '}') ++i;
      else return template_error(pos, "str.format(): single '}' in the format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos) return template_error(pos, "str.format(): '{' without '}'");
    std::string field = s.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r')) {
        return template_error(pos, fmt::format("str.format(): unsupported field '{{{}}}'", field));
      }
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(":.[") != std::string::npos) {
      return template_error(pos, fmt::format("str.format(): format specs and attribute paths are not supported: '{{{}}}'", field));
    }
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? auto_index++ : static_cast<size_t>(std::stoul(field));
      if (index < args.positional.size()) value = &args.positional[index];
    } else {
      for (const auto& [key, v] : args.keyword) {
        if (key == field) value = &v;
      }
    }
    if (!value) return template_error(pos, fmt::format("str.format(): no argument for '{{{}}}'", field));
    out += conversion == 'r' ? value->repr() : value->to_output();
  }
  return Value(std::move(out));
}

Result<Value> string_method(const std::string& s, std::string_view name, const CallArgs& args, SourcePos pos) {
  if (name == "startswith") return affix_test(s, args, true, pos);
  if (name == "endswith") return affix_test(s, args, false, pos);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    RETURN_IF_ERROR(check_args(args, name, {"chars"}, pos));
    ASSIGN_OR_RETURN(std::optional<std::string> chars, optional_string_arg(args, 0, "chars", name, pos));
    return Value(python_strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    RETURN_IF_ERROR(check_args(args, name, {"sep", "maxsplit"}, pos));
    ASSIGN_OR_RETURN(std::optional<std::string> sep, optional_string_arg(args, 0, "sep", name, pos));
    ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(args, 1, "maxsplit", -1, name, pos));
    if (sep && sep->empty()) return template_error(pos, fmt::format("str.{}(): empty separator", name));
    std::vector<std::string> parts;
    if (name == "rsplit" && maxsplit >= 0) {
      if (!sep) return template_error(pos, "str.rsplit() with maxsplit needs a separator");
      // Split from the right: the leftmost part keeps the unsplit remainder.
      std::string_view rest = s;
      while (static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t hit = rest.rfind(*sep);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(rest.substr(hit + sep->size()));
        rest = rest.substr(0, hit);
      }
      parts.emplace_back(rest);
      std::reverse(parts.begin(), parts.end());
    } else {
      parts = python_split(s, sep, maxsplit);
    }
    ValueList out;
    for (std::string& p : parts) out.emplace_back(std::move(p));
    return Value(std::move(out));
  }
  if (name == "replace") {
    RETURN_IF_ERROR(check_args(args, name, {"old", "new", "count"}, pos));
    const Value* old_v = find_arg(args, 0, "old");
    const Value* new_v = find_arg(args, 1, "new");
    if (!old_v || !new_v || !old_v->is_string() || !new_v->is_string()) {
      return template_error(pos, "str.replace() needs two strings");
    }
    ASSIGN_OR_RETURN(int64_t count, int_arg(args, 2, "count", -1, name, pos));
    return Value(python_replace(s, old_v->as_string(), new_v->as_string(), count));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    RETURN_IF_ERROR(check_args(args, name, {}, pos));
    if (name == "upper") return Value(python_upper(s));
    if (name == "lower") return Value(python_lower(s));
    if (name == "title") return Value(python_title(s));
    return Value(python_capitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    RETURN_IF_ERROR(check_args(args, name, {"sub"}, pos));
    const Value* sub = find_arg(args, 0, "sub");
    if (!sub || !sub->is_string()) return template_error(pos, fmt::format("str.{}() needs a string", name));
    const std::string& needle = sub->as_string();
    if (name == "count") {
      if (needle.empty()) return Value(static_cast<int64_t>(codepoint_count(s) + 1));
      int64_t n = 0;
      for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
      return Value(n);
    }
    const size_t at = name == "find" ? s.find(needle) : s.rfind(needle);
    if (at == std::string::npos) return Value(int64_t{-1});
    return Value(static_cast<int64_t>(codepoint_count(std::string_view(s).substr(0, at))));  // code point index
  }
  if (name == "join") {
    RETURN_IF_ERROR(check_args(args, name, {"iterable"}, pos));
    const Value* items = find_arg(args, 0, "iterable");
    if (!items) return template_error(pos, "str.join() needs an argument");
    ASSIGN_OR_RETURN(ValueList list, iterate(*items, pos));
    std::string out;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) return template_error(pos, fmt::format("str.join(): item {} is a {}", i, list[i].type_name()));
      if (i) out += s;
      out += list[i].as_string();
    }
    return Value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    RETURN_IF_ERROR(check_args(args, name, {"affix"}, pos));
    const Value* affix = find_arg(args, 0, "affix");
    if (!affix || !affix->is_string()) return template_error(pos, fmt::format("str.{}() needs a string", name));
    const std::string& a = affix->as_string();
    if (a.size() <= s.size()) {
      if (name == "removeprefix" && s.compare(0, a.size(), a) == 0) return Value(s.substr(a.size()));
      if (name == "removesuffix" && s.compare(s.size() - a.size(), a.size(), a) == 0) {
        return Value(s.substr(0, s.size() - a.size()));
      }
    }
    return Value(s);
  }
  if (name == "splitlines") {
    RETURN_IF_ERROR(check_args(args, name, {}, pos));
    ValueList lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\n' && s[i] != '\r') continue;
      lines.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
    if (start < s.size()) lines.emplace_back(s.substr(start));
    return Value(std::move(lines));
  }
  if (name == "format") return python_format(s, args, pos);
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    RETURN_IF_ERROR(check_args(args, name, {}, pos));
    if (s.empty()) return Value(false);
    for (unsigned char c : s) {  // ASCII classification
      const bool digit = c >= '0' && c <= '9';
      const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
      const bool ok = name == "isdigit" ? digit : name == "isalpha" ? alpha : name == "isalnum" ? (digit || alpha)
                                                                        : is_python_space(c);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  return template_error(pos, fmt::format("unsupported string method '{}'", name));
}

bool is_string_method(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "replace", "upper", "lower",
      "title", "capitalize", "find", "rfind", "count", "join", "removeprefix", "removesuffix", "splitlines",
      "isdigit", "isspace", "isalpha", "isalnum", "format", "center", "ljust", "rjust", "zfill", "encode",
      "index", "rindex", "partition", "rpartition", "swapcase", "casefold", "expandtabs", "translate"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Result<Value> dict_method(const ValueMap& dict, std::string_view name, const CallArgs& args, SourcePos pos) {
  if (name == "items" || name == "keys" || name == "values") {
    RETURN_IF_ERROR(check_args(args, name, {}, pos));
    ValueList out;
    for (const auto& [key, value] : dict) {
      if (name == "items") out.push_back(Value::make_tuple({key, value}));
      else if (name == "keys") out.push_back(key);
      else out.push_back(value);
    }
    return Value(std::move(out));
  }
  // get(key, default=None)
  RETURN_IF_ERROR(check_args(args, name, {"key", "default"}, pos));
  const Value* key = find_arg(args, 0, "key");
  if (!key) return template_error(pos, "dict.get() needs a key");
  if (!is_hashable(*key)) return template_error(pos, fmt::format("dict.get(): unhashable key: a {}", key->type_name()));
  if (const Value* v = map_find(dict, *key)) return *v;
  const Value* fallback = find_arg(args, 1, "default");
  return fallback ? *fallback : Value::none();
}

}  // namespace

std::optional<Result<Value>> call_method(const Value& object, std::string_view name, const CallArgs& args,
                                         SourcePos pos) {
  if (object.is_string() && is_string_method(name)) return string_method(object.as_string(), name, args, pos);
  if (object.is_dict() && (name == "items" || name == "keys" || name == "values" || name == "get")) {
    return dict_method(object.dict(), name, args, pos);
  }
  if (object.is_list() && (name == "append" || name == "extend" || name == "pop" || name == "insert" ||
                           name == "remove" || name == "clear" || name == "sort" || name == "reverse")) {
    return Result<Value>(template_error(
        pos, fmt::format("list.{}() is not allowed: template values are immutable (as in Hugging Face's sandbox)", name)));
  }
  if (object.is_dict() && (name == "update" || name == "pop" || name == "setdefault" || name == "clear")) {
    return Result<Value>(template_error(
        pos, fmt::format("dict.{}() is not allowed: template values are immutable (as in Hugging Face's sandbox)", name)));
  }
  return std::nullopt;
}

}  // namespace moetier::text::jinja
