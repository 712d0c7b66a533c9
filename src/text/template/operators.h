// Python semantics of the template's operators on Values: arithmetic (+ - * / // % **),
// string concatenation (~), comparisons and membership (in). `and`, `or` and `not` are
// handled by the evaluator (they short-circuit).
#pragma once

#include <string_view>

#include "core/status.h"
#include "text/template/value.h"

namespace moetier::text::jinja {

Result<Value> binary_op(std::string_view op, const Value& lhs, const Value& rhs, SourcePos pos);
Result<Value> unary_minus(const Value& operand, bool negate, SourcePos pos);

// `needle in haystack`: substring, list element, dict key; undefined contains nothing.
Result<bool> contains(const Value& haystack, const Value& needle, SourcePos pos);

// Python ordering (numbers, strings, lists); fails for other kinds. Returns <0, 0, >0.
Result<int> compare_values(const Value& a, const Value& b, SourcePos pos);

}  // namespace moetier::text::jinja
