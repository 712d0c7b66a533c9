// Builtin filters (`value | name(args)`), with Jinja2's semantics. `tojson` is Hugging Face's
// override: json.dumps(value, ensure_ascii=False) without key sorting or HTML escaping.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "text/template/builtins.h"
#include "text/template/builtins_internal.h"
#include "text/template/operators.h"
#include "text/template/string_ops.h"

namespace moetier::text::jinja {

namespace {

using FilterFn = Result<Value> (*)(const Value& in, const CallArgs& args, SourcePos pos);

// Jinja2's attribute path for map/sort/selectattr/join: "a.b.0" walks dict keys and list indices.
Value get_attribute_path(const Value& object, const std::string& path) {
  Value current = object;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Value key(part);
    if (!part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      key = Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10)));
    }
    Result<Value> next = python_getitem(current, key, SourcePos{});
    current = next.is_ok() ? std::move(next).value() : Value::undefined(path);
    if (current.is_undefined()) return Value::undefined(path);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return current;
}

Result<std::string> attribute_arg(const CallArgs& args, size_t index, std::string_view what, SourcePos pos) {
  const Value* attr = find_arg(args, index, "attribute");
  if (!attr || attr->is_none()) return std::string();
  if (attr->is_int()) return std::to_string(attr->as_int());
  if (!attr->is_string()) return template_error(pos, fmt::format("{}: attribute must be a string", what));
  return attr->as_string();
}

// Hugging Face's tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Result<Value> f_tojson(const Value& in, const CallArgs& args, SourcePos pos) {
  constexpr std::string_view kWhat = "filter 'tojson'";
  RETURN_IF_ERROR(check_args(args, kWhat, {"ensure_ascii", "indent", "separators", "sort_keys"}, pos));
  ASSIGN_OR_RETURN(int64_t indent, int_arg(args, 1, "indent", -1, kWhat, pos));
  const Value* ascii = find_arg(args, 0, "ensure_ascii");
  const Value* sort = find_arg(args, 3, "sort_keys");
  // Built in one go: assigning a literal to the separator afterwards trips GCC 12's -Wrestrict bug.
  JsonFormat format{
      .indent = static_cast<int>(std::clamp<int64_t>(indent, -1, 64)),
      .item_separator = indent >= 0 ? "," : ", ",
      .ensure_ascii = ascii && ascii->truthy(),
      .sort_keys = sort && sort->truthy(),
  };
  const Value* separators = find_arg(args, 2, "separators");
  if (separators && !separators->is_none()) {
    if (!separators->is_list() || separators->list().size() != 2 || !separators->list()[0].is_string() ||
        !separators->list()[1].is_string()) {
      return template_error(pos, "filter 'tojson': separators must be a pair of strings");
    }
    format.item_separator = separators->list()[0].as_string();
    format.key_separator = separators->list()[1].as_string();
  }
  ASSIGN_OR_RETURN(std::string text, to_json_text(in, format, pos));
  return Value(std::move(text));
}

Result<Value> f_length(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'length'", {}, pos));
  switch (in.kind()) {
    case Value::Kind::kString: return Value(static_cast<int64_t>(codepoint_count(in.as_string())));
    case Value::Kind::kList: return Value(static_cast<int64_t>(in.list().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(in.dict().size()));
    case Value::Kind::kUndefined: return Value(int64_t{0});
    default: return template_error(pos, fmt::format("filter 'length': a {} has no length", in.type_name()));
  }
}

Result<Value> f_string(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'string'", {}, pos));
  return Value(in.to_output());
}

Result<Value> f_trim(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'trim'", {"chars"}, pos));
  ASSIGN_OR_RETURN(std::optional<std::string> chars, optional_string_arg(args, 0, "chars", "filter 'trim'", pos));
  return Value(python_strip(in.to_output(), chars, true, true));
}

Result<Value> f_upper(const Value& in, const CallArgs&, SourcePos) { return Value(python_upper(in.to_output())); }
Result<Value> f_lower(const Value& in, const CallArgs&, SourcePos) { return Value(python_lower(in.to_output())); }
Result<Value> f_title(const Value& in, const CallArgs&, SourcePos) { return Value(python_title(in.to_output())); }
Result<Value> f_capitalize(const Value& in, const CallArgs&, SourcePos) {
  return Value(python_capitalize(in.to_output()));
}
// Jinja2's Markup: `safe` marks the text as HTML; `escape` escapes it once (Markup stays as is).
Result<Value> f_safe(const Value& in, const CallArgs&, SourcePos) {
  return Value::make_markup(in.is_string() ? in.as_string() : in.to_output());
}

Result<Value> f_escape(const Value& in, const CallArgs&, SourcePos) {
  if (in.is_markup()) return in;
  return Value::make_markup(html_escape(in.to_output()));
}

Result<Value> first_or_last(const Value& in, bool first, SourcePos pos) {
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  if (items.empty()) return Value::undefined(first ? "first of an empty sequence" : "last of an empty sequence");
  return first ? items.front() : items.back();
}
Result<Value> f_first(const Value& in, const CallArgs&, SourcePos pos) { return first_or_last(in, true, pos); }
Result<Value> f_last(const Value& in, const CallArgs&, SourcePos pos) { return first_or_last(in, false, pos); }

Result<Value> f_join(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'join'", {"d", "attribute"}, pos));
  ASSIGN_OR_RETURN(std::optional<std::string> sep, optional_string_arg(args, 0, "d", "filter 'join'", pos));
  ASSIGN_OR_RETURN(std::string attribute, attribute_arg(args, 1, "filter 'join'", pos));
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep.value_or("");
    out += (attribute.empty() ? items[i] : get_attribute_path(items[i], attribute)).to_output();
  }
  return Value(std::move(out));
}

Result<Value> f_default(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'default'", {"default_value", "boolean"}, pos));
  const Value* fallback = find_arg(args, 0, "default_value");
  const Value* boolean = find_arg(args, 1, "boolean");
  const bool use_fallback = in.is_undefined() || (boolean && boolean->truthy() && !in.truthy());
  if (!use_fallback) return in;
  return fallback ? *fallback : Value("");
}

Result<Value> f_list(const Value& in, const CallArgs&, SourcePos pos) {
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  return Value(std::move(items));
}

Result<Value> f_items(const Value& in, const CallArgs&, SourcePos pos) {
  if (in.is_undefined()) return Value(ValueList{});
  if (!in.is_dict()) return template_error(pos, fmt::format("filter 'items' needs a mapping, got {}", in.type_name()));
  ValueList out;
  for (const auto& [key, value] : in.dict()) out.push_back(Value::make_tuple({key, value}));
  return Value(std::move(out));
}

Result<Value> f_dictsort(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'dictsort'", {"case_sensitive", "by", "reverse"}, pos));
  if (!in.is_dict()) return template_error(pos, fmt::format("filter 'dictsort' needs a mapping, got {}", in.type_name()));
  const Value* case_arg = find_arg(args, 0, "case_sensitive");
  const Value* by_arg = find_arg(args, 1, "by");
  const Value* reverse_arg = find_arg(args, 2, "reverse");
  const bool case_sensitive = case_arg && case_arg->truthy();
  const bool by_value = by_arg && by_arg->is_string() && by_arg->as_string() == "value";
  ValueMap entries = in.dict();
  Status failure;
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& a, const auto& b) {
    Value x = by_value ? a.second : a.first;
    Value y = by_value ? b.second : b.first;
    if (!case_sensitive && x.is_string() && y.is_string()) {
      x = Value(python_lower(x.as_string()));
      y = Value(python_lower(y.as_string()));
    }
    Result<int> c = compare_values(x, y, pos);
    if (!c.is_ok()) {
      failure = c.status();
      return false;
    }
    return *c < 0;
  });
  RETURN_IF_ERROR(failure);
  if (reverse_arg && reverse_arg->truthy()) std::reverse(entries.begin(), entries.end());
  ValueList out;
  for (auto& [key, value] : entries) out.push_back(Value::make_tuple({key, value}));
  return Value(std::move(out));
}

Result<Value> f_replace(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'replace'", {"old", "new", "count"}, pos));
  const Value* old_v = find_arg(args, 0, "old");
  const Value* new_v = find_arg(args, 1, "new");
  if (!old_v || !new_v) return template_error(pos, "filter 'replace' needs two arguments");
  ASSIGN_OR_RETURN(int64_t count, int_arg(args, 2, "count", -1, "filter 'replace'", pos));
  return Value(python_replace(in.to_output(), old_v->to_output(), new_v->to_output(), count));
}

Result<Value> f_int(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'int'", {"default", "base"}, pos));
  ASSIGN_OR_RETURN(int64_t fallback, int_arg(args, 0, "default", 0, "filter 'int'", pos));
  ASSIGN_OR_RETURN(int64_t base, int_arg(args, 1, "base", 10, "filter 'int'", pos));
  if (in.is_int()) return in;
  if (in.is_bool()) return Value(int64_t{in.as_bool()});
  if (in.is_float()) return std::isfinite(in.as_number()) ? Value(static_cast<int64_t>(in.as_number())) : Value(fallback);
  if (in.is_string()) {
    const std::string s = python_strip(in.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, static_cast<int>(base));
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(static_cast<int64_t>(v));
    const double d = std::strtod(s.c_str(), &end);  // Jinja2 falls back to int(float(value))
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return Value(static_cast<int64_t>(d));
  }
  return Value(fallback);
}

Result<Value> f_float(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'float'", {"default"}, pos));
  const Value* fallback = find_arg(args, 0, "default");
  if (in.is_number() || in.is_bool()) return Value(in.as_number());
  if (in.is_string()) {
    const std::string s = python_strip(in.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
  }
  return fallback ? *fallback : Value(0.0);
}

Result<Value> f_abs(const Value& in, const CallArgs&, SourcePos pos) {
  if (in.is_int()) return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
  if (in.is_float()) return Value(std::fabs(in.as_number()));
  return template_error(pos, fmt::format("filter 'abs' needs a number, got {}", in.type_name()));
}

Result<Value> f_round(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'round'", {"precision", "method"}, pos));
  ASSIGN_OR_RETURN(int64_t precision, int_arg(args, 0, "precision", 0, "filter 'round'", pos));
  ASSIGN_OR_RETURN(std::optional<std::string> method, optional_string_arg(args, 1, "method", "filter 'round'", pos));
  if (!in.is_number()) return template_error(pos, fmt::format("filter 'round' needs a number, got {}", in.type_name()));
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = in.as_number() * scale;
  const std::string m = method.value_or("common");
  double r = 0;
  if (m == "common") r = std::round(x);  // half away from zero, as Jinja2's 'common'
  else if (m == "floor") r = std::floor(x);
  else if (m == "ceil") r = std::ceil(x);
  else return template_error(pos, "filter 'round': method must be 'common', 'floor' or 'ceil'");
  return Value(r / scale);
}

Result<Value> f_reverse(const Value& in, const CallArgs&, SourcePos pos) {
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  std::reverse(items.begin(), items.end());
  if (in.is_string()) {
    std::string out;
    for (const Value& c : items) out += c.as_string();
    return Value(std::move(out));
  }
  return Value(std::move(items));
}

Result<Value> f_sort(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'sort'", {"reverse", "case_sensitive", "attribute"}, pos));
  const Value* reverse_arg = find_arg(args, 0, "reverse");
  const Value* case_arg = find_arg(args, 1, "case_sensitive");
  ASSIGN_OR_RETURN(std::string attribute, attribute_arg(args, 2, "filter 'sort'", pos));
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  const bool case_sensitive = case_arg && case_arg->truthy();
  auto key = [&](const Value& v) {
    Value k = attribute.empty() ? v : get_attribute_path(v, attribute);
    if (!case_sensitive && k.is_string()) k = Value(python_lower(k.as_string()));
    return k;
  };
  Status failure;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    Result<int> c = compare_values(key(a), key(b), pos);
    if (!c.is_ok()) {
      failure = c.status();
      return false;
    }
    return *c < 0;
  });
  RETURN_IF_ERROR(failure);
  if (reverse_arg && reverse_arg->truthy()) std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Result<Value> f_unique(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'unique'", {"case_sensitive", "attribute"}, pos));
  const Value* case_arg = find_arg(args, 0, "case_sensitive");
  ASSIGN_OR_RETURN(std::string attribute, attribute_arg(args, 1, "filter 'unique'", pos));
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  ValueList out, seen;
  for (const Value& item : items) {
    Value k = attribute.empty() ? item : get_attribute_path(item, attribute);
    if (!(case_arg && case_arg->truthy()) && k.is_string()) k = Value(python_lower(k.as_string()));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return Value(std::move(out));
}

Result<Value> f_sum(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'sum'", {"attribute", "start"}, pos));
  ASSIGN_OR_RETURN(std::string attribute, attribute_arg(args, 0, "filter 'sum'", pos));
  const Value* start = find_arg(args, 1, "start");
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  Value total = start ? *start : Value(int64_t{0});
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(total, binary_op("+", total, attribute.empty() ? item : get_attribute_path(item, attribute), pos));
  }
  return total;
}

Result<Value> min_max(const Value& in, const CallArgs& args, bool want_max, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, want_max ? "filter 'max'" : "filter 'min'", {"case_sensitive", "attribute"}, pos));
  ASSIGN_OR_RETURN(std::string attribute, attribute_arg(args, 1, "filter 'min/max'", pos));
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  if (items.empty()) return Value::undefined("min/max of an empty sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value a = attribute.empty() ? items[i] : get_attribute_path(items[i], attribute);
    const Value b = attribute.empty() ? items[best] : get_attribute_path(items[best], attribute);
    ASSIGN_OR_RETURN(int c, compare_values(a, b, pos));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Result<Value> f_min(const Value& in, const CallArgs& args, SourcePos pos) { return min_max(in, args, false, pos); }
Result<Value> f_max(const Value& in, const CallArgs& args, SourcePos pos) { return min_max(in, args, true, pos); }

Result<Value> f_indent(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'indent'", {"width", "first", "blank"}, pos));
  const Value* width_arg = find_arg(args, 0, "width");
  const Value* first_arg = find_arg(args, 1, "first");
  const Value* blank_arg = find_arg(args, 2, "blank");
  std::string pad = "    ";
  if (width_arg && width_arg->is_int()) pad = std::string(static_cast<size_t>(std::clamp<int64_t>(width_arg->as_int(), 0, 256)), ' ');
  else if (width_arg && width_arg->is_string()) pad = width_arg->as_string();
  const bool first = first_arg && first_arg->truthy();
  const bool blank = blank_arg && blank_arg->truthy();
  const std::string s = in.to_output();
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    const size_t nl = s.find('\n', start);
    const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    const bool indent_line = (is_first ? first : true) && (blank || !line.empty());
    if (indent_line) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(std::move(out));
}

// select/reject(test, args...): keep items passing the test (truthiness without a test).
Result<Value> select_impl(const Value& in, const CallArgs& args, bool keep_passing, bool by_attribute,
                          SourcePos pos) {
  if (!in.truthy()) return Value(ValueList{});  // Jinja2 yields nothing for a falsy sequence (None too)
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  size_t next_arg = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return template_error(pos, "selectattr/rejectattr need an attribute name");
    }
    attribute = args.positional[next_arg++].as_string();
  }
  std::string test;
  if (next_arg < args.positional.size()) {
    if (!args.positional[next_arg].is_string()) return template_error(pos, "select/reject: the test name must be a string");
    test = args.positional[next_arg++].as_string();
    if (!is_known_test(test)) return template_error(pos, fmt::format("unknown test '{}'", test));
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next_arg), args.positional.end());
  test_args.keyword = args.keyword;
  ValueList out;
  for (const Value& item : items) {
    const Value subject = by_attribute ? get_attribute_path(item, attribute) : item;
    bool passed = subject.truthy();
    if (!test.empty()) {
      ASSIGN_OR_RETURN(passed, apply_test(test, subject, test_args, pos));
    }
    if (passed == keep_passing) out.push_back(item);
  }
  return Value(std::move(out));
}
Result<Value> f_select(const Value& in, const CallArgs& a, SourcePos p) { return select_impl(in, a, true, false, p); }
Result<Value> f_reject(const Value& in, const CallArgs& a, SourcePos p) { return select_impl(in, a, false, false, p); }
Result<Value> f_selectattr(const Value& in, const CallArgs& a, SourcePos p) { return select_impl(in, a, true, true, p); }
Result<Value> f_rejectattr(const Value& in, const CallArgs& a, SourcePos p) { return select_impl(in, a, false, true, p); }

// map(attribute='x', default=...) or map('filter', args...).
Result<Value> f_map(const Value& in, const CallArgs& args, SourcePos pos) {
  if (!in.truthy()) return Value(ValueList{});  // as Jinja2, for None too
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  ValueList out;
  if (const Value* attr = find_arg(args, SIZE_MAX, "attribute")) {
    if (!attr->is_string() && !attr->is_int()) return template_error(pos, "filter 'map': attribute must be a string");
    const std::string path = attr->is_int() ? std::to_string(attr->as_int()) : attr->as_string();
    const Value* fallback = find_arg(args, SIZE_MAX, "default");
    for (const Value& item : items) {
      Value v = get_attribute_path(item, path);
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    }
    return Value(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return template_error(pos, "filter 'map' needs a filter name or attribute=");
  }
  const std::string filter = args.positional[0].as_string();
  if (!is_known_filter(filter)) return template_error(pos, fmt::format("unknown filter '{}'", filter));
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, apply_filter(filter, item, filter_args, pos));
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

// Runs of word characters (Python's \w+): ASCII letters, digits and '_', plus the letters of
// the main alphabetic and CJK blocks. Punctuation, symbols and emoji separate words.
bool is_word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (simple_upper(cp) != cp || simple_lower(cp) != cp) return true;
  return (cp >= 0x00C0 && cp <= 0x024F && cp != 0xD7 && cp != 0xF7) || (cp >= 0x0370 && cp <= 0x052F) ||
         (cp >= 0x0590 && cp <= 0x06FF) || (cp >= 0x0900 && cp <= 0x0DFF) || (cp >= 0x3040 && cp <= 0x30FF) ||
         (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7AF);
}

Result<Value> f_wordcount(const Value& in, const CallArgs&, SourcePos) {
  int64_t words = 0;
  bool in_word = false;
  for (uint32_t cp : decode_utf8(in.to_output())) {
    const bool word = is_word_char(cp);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(words);
}

// batch(n, fill_with=None): lists of n items; the last one padded when fill_with is given.
Result<Value> f_batch(const Value& in, const CallArgs& args, SourcePos pos) {
  RETURN_IF_ERROR(check_args(args, "filter 'batch'", {"linecount", "fill_with"}, pos));
  ASSIGN_OR_RETURN(int64_t n, int_arg(args, 0, "linecount", 0, "filter 'batch'", pos));
  if (n <= 0) return template_error(pos, "filter 'batch' needs a positive size");
  const Value* fill = find_arg(args, 1, "fill_with");
  ASSIGN_OR_RETURN(ValueList items, iterate(in, pos));
  ValueList out;
  for (size_t i = 0; i < items.size(); i += static_cast<size_t>(n)) {
    ValueList chunk(items.begin() + static_cast<std::ptrdiff_t>(i),
                    items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + static_cast<size_t>(n))));
    while (fill && !fill->is_none() && chunk.size() < static_cast<size_t>(n)) chunk.push_back(*fill);
    out.emplace_back(std::move(chunk));
  }
  return Value(std::move(out));
}

Result<Value> f_attr(const Value& in, const CallArgs& args, SourcePos pos) {
  const Value* name = find_arg(args, 0, "name");
  if (!name || !name->is_string()) return template_error(pos, "filter 'attr' needs an attribute name");
  if (in.is_dict()) {
    if (const Value* v = map_find(in.dict(), std::string_view(name->as_string()))) return *v;
  }
  if (in.is_namespace()) {
    if (const Value* v = dict_find(in.ns().attrs, name->as_string())) return *v;
  }
  return Value::undefined(name->as_string());
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

const FilterEntry kFilters[] = {
    {"tojson", f_tojson},       {"length", f_length},     {"count", f_length},         {"string", f_string},
    {"trim", f_trim},           {"upper", f_upper},       {"lower", f_lower},          {"title", f_title},
    {"capitalize", f_capitalize}, {"safe", f_safe},       {"escape", f_escape},        {"e", f_escape},
    {"first", f_first},         {"last", f_last},         {"join", f_join},            {"default", f_default},
    {"d", f_default},           {"list", f_list},         {"items", f_items},          {"dictsort", f_dictsort},
    {"replace", f_replace},     {"int", f_int},           {"float", f_float},          {"abs", f_abs},
    {"round", f_round},         {"reverse", f_reverse},   {"sort", f_sort},            {"unique", f_unique},
    {"sum", f_sum},             {"min", f_min},           {"max", f_max},              {"indent", f_indent},
    {"select", f_select},       {"reject", f_reject},     {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
    {"map", f_map},             {"wordcount", f_wordcount}, {"batch", f_batch},      {"attr", f_attr},
};

const FilterEntry* find_filter(std::string_view name) {
  for (const FilterEntry& f : kFilters) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

bool is_known_filter(std::string_view name) { return find_filter(name) != nullptr; }

Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args, SourcePos pos) {
  const FilterEntry* filter = find_filter(name);
  if (!filter) return template_error(pos, fmt::format("unknown filter '{}'", name));
  return filter->fn(input, args, pos);
}

}  // namespace moetier::text::jinja
