#include "text/template/eval.h"

#include <memory>

#include "text/template/builtins.h"
#include "text/template/operators.h"

namespace moetier::text::jinja {

namespace {

// Variables of one scope; lookups walk up to the parent. Scopes are shared so that a macro
// can keep the scope it was defined in alive.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent_scope) : parent(std::move(parent_scope)) {}
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      if (const Value* v = dict_find(s->vars, name)) return v;
    }
    return nullptr;
  }
  ValueDict vars;
  std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

// Text of a variable path for messages: `message.content`, `messages[0].role`.
std::string describe(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kName: return e.name;
    case ExprKind::kGetAttr: return describe(*e.args[0]) + "." + e.name;
    case ExprKind::kGetItem: {
      const Expr& index = *e.args[1];
      if (index.kind == ExprKind::kLiteral) return describe(*e.args[0]) + "[" + index.literal.repr() + "]";
      return describe(*e.args[0]) + "[" + describe(index) + "]";
    }
    case ExprKind::kSlice: return describe(*e.args[0]) + "[...]";
    case ExprKind::kCall: return describe(*e.args[0]) + "(...)";
    case ExprKind::kFilter: return (e.args.empty() ? std::string("(filter block)") : describe(*e.args[0])) + " | " + e.name;
    case ExprKind::kLiteral: return e.literal.repr();
    default: return "expression";
  }
}

class Evaluator {
 public:
  Evaluator(ScopePtr globals, const RenderLimits& limits) : globals_(std::move(globals)), limits_(limits) {}

  Status exec_list(const StmtList& list, const ScopePtr& scope, std::string& out, Flow& flow) {
    for (const auto& stmt : list) {
      RETURN_IF_ERROR(exec(*stmt, scope, out, flow));
      if (flow != Flow::kNormal) return Status::ok();
    }
    return Status::ok();
  }

 private:
  Status exec(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow) {
    switch (stmt.kind) {
      case StmtKind::kText: return append(out, stmt.text, stmt.pos);
      case StmtKind::kOutput: {
        ASSIGN_OR_RETURN(Value v, eval(*stmt.expr, scope));
        return append(out, v.to_output(), stmt.pos);
      }
      case StmtKind::kIf:
        for (const auto& [cond, body] : stmt.branches) {
          ASSIGN_OR_RETURN(Value c, eval(*cond, scope));
          if (c.truthy()) return exec_list(body, scope, out, flow);
        }
        return exec_list(stmt.else_body, scope, out, flow);
      case StmtKind::kFor: return exec_for(stmt, scope, out);
      case StmtKind::kSet: return exec_set(stmt, scope);
      case StmtKind::kSetBlock: {
        std::string captured;
        Flow inner = Flow::kNormal;
        RETURN_IF_ERROR(exec_list(stmt.body, scope, captured, inner));
        dict_set(scope->vars, stmt.targets[0], Value(std::move(captured)));
        return Status::ok();
      }
      case StmtKind::kMacro: {
        dict_set(scope->vars, stmt.name, make_macro(stmt, scope));
        return Status::ok();
      }
      case StmtKind::kBreak: flow = Flow::kBreak; return Status::ok();
      case StmtKind::kContinue: flow = Flow::kContinue; return Status::ok();
      case StmtKind::kScope: return exec_list(stmt.body, scope, out, flow);
      case StmtKind::kFilterBlock: {
        std::string captured;
        RETURN_IF_ERROR(exec_list(stmt.body, scope, captured, flow));
        ASSIGN_OR_RETURN(Value v, apply_filter_chain(*stmt.expr, Value(std::move(captured)), scope));
        return append(out, v.to_output(), stmt.pos);
      }
    }
    return Status::ok();
  }

  Status append(std::string& out, const std::string& text, SourcePos pos) {
    if (out.size() + text.size() > limits_.max_output_bytes) {
      return template_error(pos, fmt::format("output exceeds {} bytes", limits_.max_output_bytes));
    }
    out += text;
    return Status::ok();
  }

  // Binds loop targets: one name takes the item, several unpack a list item (`for k, v in d|items`).
  Status bind_targets(const std::vector<std::string>& targets, const Value& item, Scope& scope, SourcePos pos) {
    if (targets.size() == 1) {
      dict_set(scope.vars, targets[0], item);
      return Status::ok();
    }
    if (!item.is_list() || item.list().size() != targets.size()) {
      return template_error(pos, fmt::format("cannot unpack {} into {} variables", item.type_name(), targets.size()));
    }
    for (size_t i = 0; i < targets.size(); ++i) dict_set(scope.vars, targets[i], item.list()[i]);
    return Status::ok();
  }

  Status exec_for(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
    ASSIGN_OR_RETURN(Value iterable, eval(*stmt.expr, scope));
    ASSIGN_OR_RETURN(ValueList items, iterate(iterable, stmt.expr->pos));
    if (stmt.condition) {  // `for x in xs if cond`: filtered before loop.* is computed
      ValueList kept;
      for (Value& item : items) {
        auto probe = std::make_shared<Scope>(scope);
        RETURN_IF_ERROR(bind_targets(stmt.targets, item, *probe, stmt.pos));
        ASSIGN_OR_RETURN(Value keep, eval(*stmt.condition, probe));
        if (keep.truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Flow flow = Flow::kNormal;
      return exec_list(stmt.else_body, scope, out, flow);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      auto iteration = std::make_shared<Scope>(scope);
      RETURN_IF_ERROR(bind_targets(stmt.targets, items[i], *iteration, stmt.pos));
      dict_set(iteration->vars, "loop", loop_object(items, i));
      Flow flow = Flow::kNormal;
      RETURN_IF_ERROR(exec_list(stmt.body, iteration, out, flow));
      if (flow == Flow::kBreak) break;
    }
    return Status::ok();
  }

  // The `loop` variable of iteration i of n.
  static Value loop_object(const ValueList& items, int64_t i) {
    const int64_t n = static_cast<int64_t>(items.size());
    ValueDict loop;
    loop.reserve(11);
    loop.emplace_back("index0", Value(i));
    loop.emplace_back("index", Value(i + 1));
    loop.emplace_back("revindex0", Value(n - 1 - i));
    loop.emplace_back("revindex", Value(n - i));
    loop.emplace_back("first", Value(i == 0));
    loop.emplace_back("last", Value(i == n - 1));
    loop.emplace_back("length", Value(n));
    loop.emplace_back("depth", Value(1));
    loop.emplace_back("depth0", Value(0));
    loop.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined("loop.previtem"));
    loop.emplace_back("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("loop.nextitem"));
    loop.emplace_back("cycle", Value::make_callable("loop.cycle", [i](const CallArgs& args, SourcePos pos) -> Result<Value> {
      if (args.positional.empty()) return template_error(pos, "loop.cycle() needs at least one argument");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    }));
    return Value(std::move(loop));
  }

  Status exec_set(const Stmt& stmt, const ScopePtr& scope) {
    ASSIGN_OR_RETURN(Value value, eval(*stmt.expr, scope));
    if (stmt.target_object) {
      ASSIGN_OR_RETURN(Value object, eval(*stmt.target_object, scope));
      if (!object.is_namespace()) {
        return template_error(stmt.pos, fmt::format("cannot assign attribute '{}' on '{}' ({}); only namespace() objects "
                                                    "can be assigned to",
                                                    stmt.attribute, stmt.target_object->name, object.type_name()));
      }
      dict_set(object.ns().attrs, stmt.attribute, std::move(value));
      return Status::ok();
    }
    return bind_targets(stmt.targets, value, *scope, stmt.pos);
  }

  Value make_macro(const Stmt& stmt, const ScopePtr& definition_scope) {
    // The scope holds the macro and the macro refers to the scope: a weak reference breaks
    // the cycle. A macro smuggled out of its scope (into a namespace) fails cleanly when called.
    const Stmt* macro = &stmt;
    std::weak_ptr<Scope> weak_scope = definition_scope;
    return Value::make_callable(stmt.name, [this, macro, weak_scope](const CallArgs& args, SourcePos pos) -> Result<Value> {
      ScopePtr scope = weak_scope.lock();
      if (!scope) return template_error(pos, fmt::format("macro '{}' called outside the scope it was defined in", macro->name));
      return call_macro(*macro, scope, args, pos);
    });
  }

  Result<Value> call_macro(const Stmt& macro, const ScopePtr& definition_scope, const CallArgs& args, SourcePos pos) {
    if (depth_ >= limits_.max_call_depth) {
      return template_error(pos, fmt::format("macro calls nested deeper than {}", limits_.max_call_depth));
    }
    if (args.positional.size() > macro.params.size()) {
      return template_error(pos, fmt::format("macro '{}' takes {} arguments, got {}", macro.name, macro.params.size(),
                                             args.positional.size()));
    }
    auto scope = std::make_shared<Scope>(definition_scope);
    for (const auto& [key, value] : args.keyword) {
      bool known = false;
      for (const MacroParam& p : macro.params) known = known || p.name == key;
      if (!known) return template_error(pos, fmt::format("macro '{}' has no parameter '{}'", macro.name, key));
    }
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const MacroParam& param = macro.params[i];
      Value value = Value::undefined(param.name);
      bool given = false;
      if (i < args.positional.size()) {
        value = args.positional[i];
        given = true;
      }
      for (const auto& [key, kw_value] : args.keyword) {
        if (key != param.name) continue;
        if (given) return template_error(pos, fmt::format("macro '{}' got '{}' twice", macro.name, key));
        value = kw_value;
        given = true;
      }
      if (!given && param.default_value) {
        ASSIGN_OR_RETURN(value, eval(*param.default_value, scope));
      }
      dict_set(scope->vars, param.name, std::move(value));
    }
    ++depth_;
    std::string out;
    Flow flow = Flow::kNormal;
    Status st = exec_list(macro.body, scope, out, flow);
    --depth_;
    RETURN_IF_ERROR(st);
    return Value(std::move(out));
  }

  // A {% filter %} block's chain on its rendered body: the innermost filter gets the body.
  Result<Value> apply_filter_chain(const Expr& e, Value body, const ScopePtr& scope) {
    Value input = std::move(body);
    if (!e.args.empty()) {
      ASSIGN_OR_RETURN(input, apply_filter_chain(*e.args[0], std::move(input), scope));
    }
    ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
    return apply_filter(e.name, input, args, e.pos);
  }

  Result<CallArgs> eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs args;
    for (const auto& arg : e.call_args) {
      ASSIGN_OR_RETURN(Value v, eval(*arg, scope));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [key, arg] : e.call_kwargs) {
      ASSIGN_OR_RETURN(Value v, eval(*arg, scope));
      args.keyword.emplace_back(key, std::move(v));
    }
    return args;
  }

  Status undefined_error(const Value& object, const Expr& e, std::string_view action) {
    return template_error(e.pos, fmt::format("'{}' is undefined (cannot {})", describe(*e.args[0]), action));
  }

  // `object.name`: dict key or namespace attribute; anything else has no attributes.
  Result<Value> get_attr(const Value& object, const Expr& e) {
    if (object.is_undefined()) return undefined_error(object, e, fmt::format("read attribute '{}'", e.name));
    const Value* found = nullptr;
    if (object.is_dict()) found = map_find(object.dict(), std::string_view(e.name));
    if (object.is_namespace()) found = dict_find(object.ns().attrs, e.name);
    if (found) return *found;
    return Value::undefined(describe(e));
  }

  Result<Value> eval_call(const Expr& e, const ScopePtr& scope) {
    const Expr& callee = *e.args[0];
    ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
    Value fn;
    if (callee.kind == ExprKind::kGetAttr) {
      ASSIGN_OR_RETURN(Value object, eval(*callee.args[0], scope));
      if (object.is_undefined()) return undefined_error(object, callee, fmt::format("call method '{}'", callee.name));
      if (auto result = call_method(object, callee.name, args, e.pos)) return std::move(*result);
      ASSIGN_OR_RETURN(fn, get_attr(object, callee));
      if (!fn.is_callable()) {
        return template_error(e.pos, fmt::format("cannot call '{}': {} has no method '{}'", describe(callee),
                                                 object.type_name(), callee.name));
      }
    } else {
      ASSIGN_OR_RETURN(fn, eval(callee, scope));
    }
    if (!fn.is_callable()) {
      if (fn.is_undefined()) return template_error(e.pos, fmt::format("cannot call '{}': it is undefined", describe(callee)));
      return template_error(e.pos, fmt::format("cannot call '{}': it is a {}, not a function", describe(callee),
                                               fn.type_name()));
    }
    return fn.callable().call(args, e.pos);
  }

  static Result<std::optional<int64_t>> slice_bound(const Value& v, SourcePos pos) {
    if (v.is_undefined() || v.is_none()) return std::optional<int64_t>();
    if (v.is_int()) return std::optional<int64_t>(v.as_int());
    if (v.is_bool()) return std::optional<int64_t>(v.as_bool() ? 1 : 0);
    return template_error(pos, fmt::format("slice indices must be integers, got {}", v.type_name()));
  }

  Result<Value> eval(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.literal;
      case ExprKind::kName: {
        if (const Value* v = scope->find(e.name)) return *v;
        return Value::undefined(e.name);
      }
      case ExprKind::kList: {
        ValueList items;
        for (const auto& item : e.args) {
          ASSIGN_OR_RETURN(Value v, eval(*item, scope));
          items.push_back(std::move(v));
        }
        if (e.name == "tuple") return Value::make_tuple(std::move(items));
        return Value(std::move(items));
      }
      case ExprKind::kDict: {
        ValueMap dict;
        for (const auto& [key_expr, value_expr] : e.dict_items) {
          ASSIGN_OR_RETURN(Value key, eval(*key_expr, scope));
          if (!is_hashable(key)) {
            return template_error(key_expr->pos, fmt::format("unhashable dict key: a {}", key.type_name()));
          }
          ASSIGN_OR_RETURN(Value value, eval(*value_expr, scope));
          map_set(dict, std::move(key), std::move(value));
        }
        return Value(std::move(dict));
      }
      case ExprKind::kGetAttr: {
        ASSIGN_OR_RETURN(Value object, eval(*e.args[0], scope));
        return get_attr(object, e);
      }
      case ExprKind::kGetItem: {
        ASSIGN_OR_RETURN(Value object, eval(*e.args[0], scope));
        if (object.is_undefined()) return undefined_error(object, e, "subscript it");
        ASSIGN_OR_RETURN(Value index, eval(*e.args[1], scope));
        ASSIGN_OR_RETURN(Value item, python_getitem(object, index, e.pos));
        if (item.is_undefined()) return Value::undefined(describe(e));
        return item;
      }
      case ExprKind::kSlice: {
        ASSIGN_OR_RETURN(Value object, eval(*e.args[0], scope));
        if (object.is_undefined()) return undefined_error(object, e, "slice it");
        std::optional<int64_t> bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (!e.args[1 + i]) continue;
          ASSIGN_OR_RETURN(Value v, eval(*e.args[1 + i], scope));
          ASSIGN_OR_RETURN(bounds[i], slice_bound(v, e.args[1 + i]->pos));
        }
        return python_slice(object, bounds[0], bounds[1], bounds[2], e.pos);
      }
      case ExprKind::kCall: return eval_call(e, scope);
      case ExprKind::kFilter: {
        ASSIGN_OR_RETURN(Value input, eval(*e.args[0], scope));
        ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
        return apply_filter(e.name, input, args, e.pos);
      }
      case ExprKind::kTest: {
        ASSIGN_OR_RETURN(Value value, eval(*e.args[0], scope));
        ASSIGN_OR_RETURN(CallArgs args, eval_args(e, scope));
        ASSIGN_OR_RETURN(bool result, apply_test(e.name, value, args, e.pos));
        return Value(e.negated ? !result : result);
      }
      case ExprKind::kUnary: {
        ASSIGN_OR_RETURN(Value operand, eval(*e.args[0], scope));
        if (e.name == "not") return Value(!operand.truthy());
        return unary_minus(operand, e.name == "-", e.pos);
      }
      case ExprKind::kBinary: {
        ASSIGN_OR_RETURN(Value lhs, eval(*e.args[0], scope));
        // `and` / `or` short-circuit and return an operand, as in Python.
        if (e.name == "and") return lhs.truthy() ? eval(*e.args[1], scope) : Result<Value>(lhs);
        if (e.name == "or") return lhs.truthy() ? Result<Value>(lhs) : eval(*e.args[1], scope);
        ASSIGN_OR_RETURN(Value rhs, eval(*e.args[1], scope));
        return binary_op(e.name, lhs, rhs, e.pos);
      }
      case ExprKind::kCondExpr: {
        ASSIGN_OR_RETURN(Value cond, eval(*e.args[1], scope));
        if (cond.truthy()) return eval(*e.args[0], scope);
        if (e.args[2]) return eval(*e.args[2], scope);
        return Value::undefined("conditional expression without else");
      }
    }
    return template_error(e.pos, "unknown expression kind");
  }

  ScopePtr globals_;
  RenderLimits limits_;
  int depth_ = 0;
};

}  // namespace

Result<std::string> render_program(const StmtList& program, const ValueDict& globals, const RenderLimits& limits) {
  auto builtins = std::make_shared<Scope>(nullptr);
  builtins->vars = builtin_globals();
  auto top = std::make_shared<Scope>(builtins);
  top->vars = globals;
  Evaluator evaluator(top, limits);
  std::string out;
  Flow flow = Flow::kNormal;
  RETURN_IF_ERROR(evaluator.exec_list(program, top, out, flow));
  return out;
}

}  // namespace moetier::text::jinja
