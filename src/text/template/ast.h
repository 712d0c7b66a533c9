// Syntax tree of a parsed template. One node struct per level (expressions, statements) with a
// kind tag; the comments on each kind say which fields it uses.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/template/value.h"

namespace moetier::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // args = items; name = "tuple" for `(a, b)`
  kDict,      // kwargs-like pairs in dict_items
  kGetAttr,   // args[0] = object, name = attribute
  kGetItem,   // args[0] = object, args[1] = index
  kSlice,     // args[0] = object, args[1..3] = start, stop, step (nullptr when omitted)
  kCall,      // args[0] = callee, call_args / call_kwargs
  kFilter,    // args[0] = input (none in a {% filter %} block's chain), name = filter, call_args / call_kwargs
  kTest,      // args[0] = tested value, name = test, negated, call_args
  kUnary,     // name = "not" | "-" | "+", args[0]
  kBinary,    // name = operator (+ - * / // % ** ~ == != < <= > >= in "not in" and or), args[0..1]
  kCondExpr,  // args[0] = value if true, args[1] = condition, args[2] = else value (nullptr = undefined)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  SourcePos pos;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<ExprPtr> call_args;
  std::vector<std::pair<std::string, ExprPtr>> call_kwargs;
  std::vector<std::pair<ExprPtr, ExprPtr>> dict_items;
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind {
  kText,      // text
  kOutput,    // expr
  kIf,        // branches (condition, body); else_body
  kFor,       // targets, expr = iterable, condition = optional `if` filter, body, else_body
  kSet,       // targets (names) or target_object + attribute; expr = value
  kSetBlock,  // targets[0], body rendered into a string
  kMacro,     // name, params, body
  kBreak,
  kContinue,
  kScope,     // body rendered in place (`{% generation %}`), no new scope
  kFilterBlock,  // body rendered, then expr = the filter chain (its innermost kFilter has no input)
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // nullptr: undefined when not passed
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  ExprPtr target_object;  // `set ns.attr = ...`
  std::string attribute;
  std::string name;
  std::vector<MacroParam> params;
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  StmtList body;
  StmtList else_body;
};

}  // namespace moetier::text::jinja
