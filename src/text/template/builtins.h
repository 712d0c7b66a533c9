// Builtin filters (`x | tojson`), tests (`x is defined`), methods (`s.startswith('a')`) and
// global functions (`namespace()`, `range()`, `raise_exception()`), as Hugging Face's
// chat-template environment provides them. Names outside these tables are rejected by the
// parser (filters, tests) or at render time (methods), with the position in the template.
#pragma once

#include <optional>
#include <string_view>

#include "core/status.h"
#include "text/template/value.h"

namespace moetier::text::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

// Filters that take a test or filter name as an argument (select, map, ...) call back into
// these; `apply_filter` never sees a filter name the parser did not accept.
Result<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args, SourcePos pos);
Result<bool> apply_test(std::string_view name, const Value& value, const CallArgs& args, SourcePos pos);

// `object.name(args)` for builtin methods of strings, dicts and lists. std::nullopt when the
// object has no such method (the caller then falls back to attribute lookup).
std::optional<Result<Value>> call_method(const Value& object, std::string_view name, const CallArgs& args,
                                         SourcePos pos);

// Global functions visible to every template: namespace, range, dict, raise_exception, strftime_now.
ValueDict builtin_globals();

// Python-style helpers shared with the evaluator.
Result<Value> python_getitem(const Value& object, const Value& index, SourcePos pos);
Result<Value> python_slice(const Value& object, const std::optional<int64_t>& start,
                           const std::optional<int64_t>& stop, const std::optional<int64_t>& step, SourcePos pos);
// Iteration order of `for x in value`: list items, dict keys, string code points; undefined
// iterates as empty (Jinja2's default Undefined). Other kinds are an error.
Result<ValueList> iterate(const Value& value, SourcePos pos);

}  // namespace moetier::text::jinja
