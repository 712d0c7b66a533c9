// Evaluator: renders a parsed template against a dict of global variables.
// Scoping follows Jinja2: a for loop's body gets a fresh scope per iteration (so `set` inside a
// loop is not visible after it; namespace() objects are the way out), `if` has no scope, a
// macro runs in a new scope on top of the scope it was defined in.
#pragma once

#include <string>

#include "core/status.h"
#include "text/template/ast.h"
#include "text/template/value.h"

namespace moetier::text::jinja {

struct RenderLimits {
  int max_call_depth = 200;                  // nested macro calls (recursion guard)
  size_t max_output_bytes = size_t{1} << 30;  // a runaway template fails instead of eating memory
};

// `globals` = the render context (messages, tools, add_generation_prompt, ...); builtin
// functions are added underneath them.
Result<std::string> render_program(const StmtList& program, const ValueDict& globals, const RenderLimits& limits);

}  // namespace moetier::text::jinja
