// Argument helpers shared by the builtin filters, tests and methods (not part of the API).
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "text/template/value.h"

namespace moetier::text::jinja {

// The argument named `name` (keyword) or at `index` (positional); nullptr when not passed.
const Value* find_arg(const CallArgs& args, size_t index, std::string_view name);

// Fails when more positional arguments than `names` are given or a keyword is not in `names`.
Status check_args(const CallArgs& args, std::string_view what, std::initializer_list<std::string_view> names,
                  SourcePos pos);

// A string argument; none/absent -> std::nullopt; other kinds are an error.
Result<std::optional<std::string>> optional_string_arg(const CallArgs& args, size_t index, std::string_view name,
                                                       std::string_view what, SourcePos pos);
Result<int64_t> int_arg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback,
                        std::string_view what, SourcePos pos);

}  // namespace moetier::text::jinja
