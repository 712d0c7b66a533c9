#include "text/template/operators.h"

#include <cmath>

namespace moetier::text::jinja {

namespace {

bool is_numeric(const Value& v) { return v.is_number() || v.is_bool(); }
int64_t int_of(const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); }

Status type_error(SourcePos pos, std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    return template_error(pos, fmt::format("'{}' is undefined (operator '{}')", u.undefined_hint(), op));
  }
  return template_error(pos, fmt::format("unsupported operand types for '{}': {} and {}", op, a.type_name(),
                                         b.type_name()));
}

// Python floor division and modulo (results take the sign of the divisor).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Result<int> compare_values(const Value& a, const Value& b, SourcePos pos) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_number(), y = b.as_number();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = int_of(a), y = int_of(b);
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order = code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const ValueList& x = a.list();
    const ValueList& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return compare_values(x[i], y[i], pos);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return type_error(pos, "<", a, b);
}

Result<bool> contains(const Value& haystack, const Value& needle, SourcePos pos) {
  switch (haystack.kind()) {
    case Value::Kind::kString:
      if (!needle.is_string()) {
        return template_error(pos, fmt::format("'in <string>' needs a string on the left, got {}", needle.type_name()));
      }
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& item : haystack.list()) {
        if (values_equal(item, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!is_hashable(needle)) {
        return template_error(pos, fmt::format("'in <mapping>': unhashable key: a {}", needle.type_name()));
      }
      return map_find(haystack.dict(), needle) != nullptr;
    case Value::Kind::kUndefined: return false;
    default:
      return template_error(pos, fmt::format("'in' needs a string, list or mapping on the right, got {}",
                                             haystack.type_name()));
  }
}

Result<Value> unary_minus(const Value& operand, bool negate, SourcePos pos) {
  if (operand.is_float()) return Value(negate ? -operand.as_number() : operand.as_number());
  if (operand.is_int() || operand.is_bool()) return Value(negate ? -int_of(operand) : int_of(operand));
  if (operand.is_undefined()) {
    return template_error(pos, fmt::format("'{}' is undefined (unary '{}')", operand.undefined_hint(), negate ? '-' : '+'));
  }
  return template_error(pos, fmt::format("bad operand type for unary '{}': {}", negate ? '-' : '+', operand.type_name()));
}

Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, SourcePos pos) {
  if (op == "~") return Value(a.to_output() + b.to_output());
  if (op == "==") return Value(values_equal(a, b));
  if (op == "!=") return Value(!values_equal(a, b));
  if (op == "<" || op == "<=" || op == ">" || op == ">=") {
    ASSIGN_OR_RETURN(int c, compare_values(a, b, pos));
    if (op == "<") return Value(c < 0);
    if (op == "<=") return Value(c <= 0);
    if (op == ">") return Value(c > 0);
    return Value(c >= 0);
  }
  if (op == "in" || op == "not in") {
    ASSIGN_OR_RETURN(bool found, contains(b, a, pos));
    return Value(op == "in" ? found : !found);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() || b.is_markup()) {  // Markup + str escapes the str, either side
        auto part = [](const Value& v) { return v.is_markup() ? v.as_string() : html_escape(v.as_string()); };
        return Value::make_markup(part(a) + part(b));
      }
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      ValueList joined = a.list();
      joined.insert(joined.end(), b.list().begin(), b.list().end());
      return Value(std::move(joined));
    }
  }
  if (op == "*") {  // sequence repetition
    const Value* seq = a.is_string() || a.is_list() ? &a : (b.is_string() || b.is_list() ? &b : nullptr);
    const Value* count = seq == &a ? &b : &a;
    if (seq && (count->is_int() || count->is_bool())) {
      const int64_t n = int_of(*count);
      if (n > 0 && (seq->is_string() ? seq->as_string().size() : seq->list().size()) * n > (size_t{1} << 30)) {
        return template_error(pos, "sequence repetition result is too large");
      }
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->as_string();
        return Value(std::move(out));
      }
      ValueList out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->list().begin(), seq->list().end());
      return Value(std::move(out));
    }
  }
  if (!is_numeric(a) || !is_numeric(b)) {
    if (op == "%" && a.is_string()) {
      return template_error(pos, "printf-style string formatting ('...' % x) is not supported; use ~ or format filters");
    }
    return type_error(pos, op, a, b);
  }
  const bool floats = a.is_float() || b.is_float();
  if (op == "/") {
    if (b.as_number() == 0) return template_error(pos, "division by zero");
    return Value(a.as_number() / b.as_number());
  }
  if (op == "**") {
    if (!floats && int_of(b) >= 0) {
      int64_t result = 1;
      for (int64_t i = 0; i < int_of(b); ++i) {
        result *= int_of(a);
        if (std::abs(result) > (int64_t{1} << 53)) return Value(std::pow(a.as_number(), b.as_number()));
      }
      return Value(result);
    }
    return Value(std::pow(a.as_number(), b.as_number()));
  }
  if (floats) {
    const double x = a.as_number(), y = b.as_number();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (y == 0) return template_error(pos, "division by zero");
    if (op == "//") return Value(std::floor(x / y));
    if (op == "%") return Value(x - std::floor(x / y) * y);
  } else {
    const int64_t x = int_of(a), y = int_of(b);
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (y == 0) return template_error(pos, "division by zero");
    if (op == "//") return Value(floor_div(x, y));
    if (op == "%") return Value(x - floor_div(x, y) * y);
  }
  return template_error(pos, fmt::format("unknown operator '{}'", op));
}

}  // namespace moetier::text::jinja
