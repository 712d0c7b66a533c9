#include "text/template/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include "text/template/builtins.h"

namespace moetier::text::jinja {

namespace {

bool is_reserved(std::string_view name) {
  static constexpr std::string_view kReserved[] = {"and", "or", "not", "in", "is", "if", "else"};
  return std::find(std::begin(kReserved), std::end(kReserved), name) != std::end(kReserved);
}

// Tags that Jinja2 knows but this subset does not implement: named in the error.
bool is_unsupported_tag(std::string_view name) {
  static constexpr std::string_view kUnsupported[] = {
      "include", "import", "from", "extends", "block", "call", "with",
      "autoescape", "do", "trans", "pluralize", "endblock", "endcall", "endwith"};
  return std::find(std::begin(kUnsupported), std::end(kUnsupported), name) != std::end(kUnsupported);
}

std::string describe(const Token& tok) {
  switch (tok.kind) {
    case TokenKind::kEnd: return "end of tag";
    case TokenKind::kString: return "string literal";
    default: return "'" + tok.text + "'";
  }
}

// Nesting limits: a hostile template ("((((...") must fail cleanly, not overflow the stack.
constexpr int kMaxExpressionDepth = 256;
constexpr int kMaxBlockDepth = 256;

// Counts recursion depth for the lifetime of a parse function's frame.
class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

ExprPtr make_expr(ExprKind kind, SourcePos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr make_binary(std::string op, ExprPtr lhs, ExprPtr rhs, SourcePos pos) {
  ExprPtr e = make_expr(ExprKind::kBinary, pos);
  e->name = std::move(op);
  e->args.push_back(std::move(lhs));
  e->args.push_back(std::move(rhs));
  return e;
}

// Recursive-descent expression parser over one tag's tokens, with Jinja2's precedence:
// conditional < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - +
// < postfix (. [] ()) and filters/tests.
class ExprParser {
 public:
  explicit ExprParser(const std::vector<Token>& tokens) : toks_(tokens) {}

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(i_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = peek();
    if (i_ < toks_.size() - 1) ++i_;
    return t;
  }
  bool is_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOp && peek(ahead).text == op;
  }
  bool is_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool at_end() const { return peek().kind == TokenKind::kEnd; }
  Status error_here(const std::string& what) const {
    return template_error(peek().pos, fmt::format("{}, found {}", what, describe(peek())));
  }
  Status expect_op(std::string_view op) {
    if (!is_op(op)) return error_here(fmt::format("expected '{}'", op));
    next();
    return Status::ok();
  }
  Status expect_end() {
    if (!at_end()) return error_here("expected end of tag");
    return Status::ok();
  }
  Result<std::string> expect_name(std::string_view what) {
    if (peek().kind != TokenKind::kName || is_reserved(peek().text)) return error_here("expected " + std::string(what));
    return next().text;
  }

  Result<ExprPtr> parse_expression() { return parse_condexpr(); }

  // `a if cond else b`
  Result<ExprPtr> parse_condexpr() {
    DepthGuard guard(depth_);
    if (depth_ > kMaxExpressionDepth) return error_here("expression nested too deeply");
    ASSIGN_OR_RETURN(ExprPtr value, parse_or());
    while (is_name("if")) {
      const SourcePos pos = next().pos;
      ExprPtr e = make_expr(ExprKind::kCondExpr, pos);
      ASSIGN_OR_RETURN(ExprPtr cond, parse_or());
      ExprPtr otherwise;
      if (is_name("else")) {
        next();
        ASSIGN_OR_RETURN(otherwise, parse_condexpr());
      }
      e->args.push_back(std::move(value));
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(otherwise));
      value = std::move(e);
    }
    return value;
  }

  Result<ExprPtr> parse_or() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_and());
    while (is_name("or")) {
      const SourcePos pos = next().pos;
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_and());
      lhs = make_binary("or", std::move(lhs), std::move(rhs), pos);
    }
    return lhs;
  }

  Result<ExprPtr> parse_and() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_not());
    while (is_name("and")) {
      const SourcePos pos = next().pos;
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_not());
      lhs = make_binary("and", std::move(lhs), std::move(rhs), pos);
    }
    return lhs;
  }

  Result<ExprPtr> parse_not() {
    DepthGuard guard(depth_);
    if (depth_ > kMaxExpressionDepth) return error_here("expression nested too deeply");
    if (is_name("not")) {
      ExprPtr e = make_expr(ExprKind::kUnary, next().pos);
      e->name = "not";
      ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
      e->args.push_back(std::move(operand));
      return e;
    }
    return parse_compare();
  }

  // One comparison per expression; Python's chains (a < b < c) are rejected with a clear error.
  Result<ExprPtr> parse_compare() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_math1());
    ExprPtr result;
    while (true) {
      std::string op;
      const SourcePos pos = peek().pos;
      if (peek().kind == TokenKind::kOp &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == "<=" ||
           peek().text == ">" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (result) return template_error(pos, "chained comparisons (a < b < c) are not supported");
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_math1());
      result = make_binary(op, std::move(lhs), std::move(rhs), pos);
    }
    return result ? std::move(result) : std::move(lhs);
  }

  Result<ExprPtr> parse_math1() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_concat());
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_concat());
      lhs = make_binary(op.text, std::move(lhs), std::move(rhs), op.pos);
    }
    return lhs;
  }

  Result<ExprPtr> parse_concat() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_math2());
    while (is_op("~")) {
      const SourcePos pos = next().pos;
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_math2());
      lhs = make_binary("~", std::move(lhs), std::move(rhs), pos);
    }
    return lhs;
  }

  Result<ExprPtr> parse_math2() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_pow());
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_pow());
      lhs = make_binary(op.text, std::move(lhs), std::move(rhs), op.pos);
    }
    return lhs;
  }

  Result<ExprPtr> parse_pow() {
    ASSIGN_OR_RETURN(ExprPtr lhs, parse_unary(true));
    while (is_op("**")) {
      const SourcePos pos = next().pos;
      ASSIGN_OR_RETURN(ExprPtr rhs, parse_unary(true));
      lhs = make_binary("**", std::move(lhs), std::move(rhs), pos);
    }
    return lhs;
  }

  // As in Jinja2, `-x | f` applies the filter to -x.
  Result<ExprPtr> parse_unary(bool with_filter) {
    DepthGuard guard(depth_);
    if (depth_ > kMaxExpressionDepth) return error_here("expression nested too deeply");
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      node = make_expr(ExprKind::kUnary, op.pos);
      node->name = op.text;
      ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
      node->args.push_back(std::move(operand));
    } else {
      ASSIGN_OR_RETURN(node, parse_primary());
      ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
    }
    if (with_filter) return parse_filters_and_tests(std::move(node));
    return node;
  }

  Result<ExprPtr> parse_primary() {
    const Token& tok = peek();
    switch (tok.kind) {
      case TokenKind::kName: {
        if (is_reserved(tok.text)) return error_here("expected an expression");
        next();
        ExprPtr e = make_expr(ExprKind::kLiteral, tok.pos);
        if (tok.text == "true" || tok.text == "True") e->literal = Value(true);
        else if (tok.text == "false" || tok.text == "False") e->literal = Value(false);
        else if (tok.text == "none" || tok.text == "None") e->literal = Value::none();
        else {
          e->kind = ExprKind::kName;
          e->name = tok.text;
        }
        return e;
      }
      case TokenKind::kString: {
        ExprPtr e = make_expr(ExprKind::kLiteral, tok.pos);
        std::string text;
        while (peek().kind == TokenKind::kString) text += next().text;  // adjacent literals concatenate
        e->literal = Value(std::move(text));
        return e;
      }
      case TokenKind::kInt: {
        ExprPtr e = make_expr(ExprKind::kLiteral, tok.pos);
        e->literal = Value(tok.int_value);
        next();
        return e;
      }
      case TokenKind::kFloat: {
        ExprPtr e = make_expr(ExprKind::kLiteral, tok.pos);
        e->literal = Value(tok.float_value);
        next();
        return e;
      }
      case TokenKind::kOp:
        if (tok.text == "(") return parse_paren();
        if (tok.text == "[") return parse_list();
        if (tok.text == "{") return parse_dict();
        break;
      case TokenKind::kEnd: break;
    }
    return error_here("expected an expression");
  }

  // `(expr)` or a tuple `(a, b)` / `()`; tuples are kList nodes named "tuple".
  Result<ExprPtr> parse_paren() {
    const SourcePos pos = next().pos;
    if (is_op(")")) {
      next();
      ExprPtr empty = make_expr(ExprKind::kList, pos);
      empty->name = "tuple";
      return empty;
    }
    ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
    if (is_op(")")) {
      next();
      return first;
    }
    ExprPtr tuple = make_expr(ExprKind::kList, pos);
    tuple->name = "tuple";
    tuple->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (is_op(")")) break;
      ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      tuple->args.push_back(std::move(item));
    }
    RETURN_IF_ERROR(expect_op(")"));
    return tuple;
  }

  Result<ExprPtr> parse_list() {
    ExprPtr list = make_expr(ExprKind::kList, next().pos);
    while (!is_op("]")) {
      ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      list->args.push_back(std::move(item));
      if (!is_op(",")) break;
      next();
    }
    RETURN_IF_ERROR(expect_op("]"));
    return list;
  }

  Result<ExprPtr> parse_dict() {
    ExprPtr dict = make_expr(ExprKind::kDict, next().pos);
    while (!is_op("}")) {
      ASSIGN_OR_RETURN(ExprPtr key, parse_expression());
      RETURN_IF_ERROR(expect_op(":"));
      ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      dict->dict_items.emplace_back(std::move(key), std::move(value));
      if (!is_op(",")) break;
      next();
    }
    RETURN_IF_ERROR(expect_op("}"));
    return dict;
  }

  Result<ExprPtr> parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const SourcePos pos = next().pos;
        ExprPtr e = make_expr(ExprKind::kGetAttr, pos);
        if (peek().kind == TokenKind::kInt) {  // `x.0` is `x[0]` in Jinja2
          e->kind = ExprKind::kGetItem;
          e->args.push_back(std::move(node));
          ExprPtr index = make_expr(ExprKind::kLiteral, peek().pos);
          index->literal = Value(next().int_value);
          e->args.push_back(std::move(index));
        } else {
          if (peek().kind != TokenKind::kName) return error_here("expected an attribute name after '.'");
          e->name = next().text;
          e->args.push_back(std::move(node));
        }
        node = std::move(e);
      } else if (is_op("[")) {
        ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
      } else if (is_op("(")) {
        ExprPtr e = make_expr(ExprKind::kCall, peek().pos);
        e->args.push_back(std::move(node));
        RETURN_IF_ERROR(parse_call_args(*e));
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  // `x[i]` or a slice `x[start:stop:step]` with any part omitted.
  Result<ExprPtr> parse_subscript(ExprPtr object) {
    const SourcePos pos = next().pos;
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        if (++colons > 2) return error_here("too many ':' in a slice");
        next();
        continue;
      }
      if (parts[colons]) return error_here("expected ':' or ']'");
      ASSIGN_OR_RETURN(parts[colons], parse_expression());
    }
    next();
    if (colons == 0) {
      if (!parts[0]) return template_error(pos, "empty subscript '[]'");
      ExprPtr e = make_expr(ExprKind::kGetItem, pos);
      e->args.push_back(std::move(object));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    ExprPtr e = make_expr(ExprKind::kSlice, pos);
    e->args.push_back(std::move(object));
    for (auto& part : parts) e->args.push_back(std::move(part));
    return e;
  }

  // `(a, b, key=c)`; the opening '(' is the current token.
  Status parse_call_args(Expr& call) {
    RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) return error_here("*args / **kwargs in calls are not supported");
      if (peek().kind == TokenKind::kName && is_op("=", 1)) {
        std::string key = next().text;
        next();
        ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        call.call_kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        if (!call.call_kwargs.empty()) return error_here("positional argument after a keyword argument");
        ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        call.call_args.push_back(std::move(value));
      }
      if (!is_op(",")) break;
      next();
    }
    return expect_op(")");
  }

  // `f(args) | g ...` after `{% filter`: the filters applied to the block's output, so the
  // innermost one has no input expression.
  Result<ExprPtr> parse_filter_block_chain() {
    ExprPtr node;
    while (true) {
      const Token& name = peek();
      if (name.kind != TokenKind::kName) return error_here("expected a filter name");
      next();
      ExprPtr e = make_expr(ExprKind::kFilter, name.pos);
      e->name = name.text;
      if (node) e->args.push_back(std::move(node));
      if (is_op("(")) RETURN_IF_ERROR(parse_call_args(*e));
      node = std::move(e);
      if (!is_op("|")) return node;
      next();
    }
  }

  Result<ExprPtr> parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        const Token& name = peek();
        if (name.kind != TokenKind::kName) return error_here("expected a filter name after '|'");
        next();
        ExprPtr e = make_expr(ExprKind::kFilter, name.pos);
        e->name = name.text;
        e->args.push_back(std::move(node));
        if (is_op("(")) RETURN_IF_ERROR(parse_call_args(*e));
        node = std::move(e);
      } else if (is_name("is")) {
        next();
        ExprPtr e = make_expr(ExprKind::kTest, peek().pos);
        if (is_name("not")) {
          next();
          e->negated = true;
        }
        const Token& name = peek();
        if (name.kind != TokenKind::kName) return error_here("expected a test name after 'is'");
        next();
        e->pos = name.pos;
        e->name = name.text;
        e->args.push_back(std::move(node));
        if (is_op("(")) {
          RETURN_IF_ERROR(parse_call_args(*e));
        } else if (starts_test_argument()) {  // `x is divisibleby 3`, `x is sameas none`
          ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
          ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
          e->call_args.push_back(std::move(arg));
        }
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::kString || t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat) return true;
    if (t.kind == TokenKind::kName) return !is_reserved(t.text);
    return t.kind == TokenKind::kOp && (t.text == "[" || t.text == "{");
  }

 private:
  const std::vector<Token>& toks_;
  size_t i_ = 0;
  int depth_ = 0;
};

class TemplateParser {
 public:
  explicit TemplateParser(const std::vector<Segment>& segments) : segs_(segments) {}

  Result<StmtList> parse() {
    StmtList body;
    ASSIGN_OR_RETURN(std::string end, parse_body(body, {}, "", SourcePos{}));
    (void)end;
    RETURN_IF_ERROR(check_names(body, /*soft=*/false));
    return body;
  }

 private:
  // Parses statements into `body` until a statement tag named in `stop` (returned; its
  // parser is left in cur_ just after the name), or the end of the template when stop is empty.
  Result<std::string> parse_body(StmtList& body, std::initializer_list<std::string_view> stop,
                                 std::string_view opener, SourcePos opener_pos) {
    DepthGuard guard(block_depth_);
    if (block_depth_ > kMaxBlockDepth) return template_error(opener_pos, "blocks nested too deeply");
    while (seg_ < segs_.size()) {
      const Segment& seg = segs_[seg_++];
      auto stmt = std::make_unique<Stmt>();
      stmt->pos = seg.pos;
      if (seg.kind == SegmentKind::kText) {
        stmt->kind = StmtKind::kText;
        stmt->text = seg.text;
        body.push_back(std::move(stmt));
        continue;
      }
      cur_ = std::make_unique<ExprParser>(seg.tokens);
      if (seg.kind == SegmentKind::kOutput) {
        stmt->kind = StmtKind::kOutput;
        ASSIGN_OR_RETURN(stmt->expr, cur_->parse_expression());
        RETURN_IF_ERROR(cur_->expect_end());
        body.push_back(std::move(stmt));
        continue;
      }
      const Token& name_tok = cur_->peek();
      if (name_tok.kind != TokenKind::kName) return cur_->error_here("expected a statement name after '{%'");
      const std::string name = cur_->next().text;
      if (std::find(stop.begin(), stop.end(), name) != stop.end()) return name;
      RETURN_IF_ERROR(parse_statement(name, *stmt));
      body.push_back(std::move(stmt));
    }
    if (stop.size() == 0) return std::string();
    return template_error(opener_pos, fmt::format("'{{% {} %}}' is never closed (expected '{{% {} %}}')", opener,
                                                  *(stop.end() - 1)));
  }

  Status parse_statement(const std::string& name, Stmt& stmt) {
    const SourcePos pos = stmt.pos;
    if (name == "if") return parse_if(stmt);
    if (name == "for") return parse_for(stmt);
    if (name == "set") return parse_set(stmt);
    if (name == "macro") return parse_macro(stmt);
    if (name == "filter") {  // {% filter f(args) | g %}...{% endfilter %}
      stmt.kind = StmtKind::kFilterBlock;
      ASSIGN_OR_RETURN(stmt.expr, cur_->parse_filter_block_chain());
      RETURN_IF_ERROR(cur_->expect_end());
      ASSIGN_OR_RETURN(std::string end, parse_body(stmt.body, {"endfilter"}, "filter", pos));
      (void)end;
      return cur_->expect_end();
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return template_error(pos, fmt::format("'{{% {} %}}' outside a for loop", name));
      stmt.kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      return cur_->expect_end();
    }
    if (name == "generation") {  // Hugging Face's assistant-mask marker: renders its body as is
      RETURN_IF_ERROR(cur_->expect_end());
      stmt.kind = StmtKind::kScope;
      ASSIGN_OR_RETURN(std::string end, parse_body(stmt.body, {"endgeneration"}, "generation", pos));
      (void)end;
      return cur_->expect_end();
    }
    if (is_unsupported_tag(name)) {
      return template_error(pos, fmt::format("unsupported statement '{{% {} %}}'", name));
    }
    static constexpr std::string_view kClosers[] = {"elif", "else", "endif", "endfor", "endset", "endmacro",
                                                    "endgeneration", "endraw", "endfilter"};
    if (std::find(std::begin(kClosers), std::end(kClosers), name) != std::end(kClosers)) {
      return template_error(pos, fmt::format("unexpected '{{% {} %}}'", name));
    }
    return template_error(pos, fmt::format("unknown statement '{{% {} %}}'", name));
  }

  Status parse_if(Stmt& stmt) {
    stmt.kind = StmtKind::kIf;
    const SourcePos pos = stmt.pos;
    while (true) {
      ASSIGN_OR_RETURN(ExprPtr cond, cur_->parse_expression());
      RETURN_IF_ERROR(cur_->expect_end());
      StmtList branch;
      ASSIGN_OR_RETURN(std::string end, parse_body(branch, {"elif", "else", "endif"}, "if", pos));
      stmt.branches.emplace_back(std::move(cond), std::move(branch));
      if (end == "elif") continue;
      if (end == "else") {
        RETURN_IF_ERROR(cur_->expect_end());
        ASSIGN_OR_RETURN(end, parse_body(stmt.else_body, {"endif"}, "if", pos));
      }
      return cur_->expect_end();
    }
  }

  // Loop targets: `x`, `k, v` or `(k, v)`.
  Status parse_targets(std::vector<std::string>& targets) {
    const bool paren = cur_->is_op("(");
    if (paren) cur_->next();
    do {
      if (!targets.empty()) cur_->next();  // the ','
      ASSIGN_OR_RETURN(std::string target, cur_->expect_name("a variable name"));
      targets.push_back(std::move(target));
    } while (cur_->is_op(","));
    if (paren) RETURN_IF_ERROR(cur_->expect_op(")"));
    return Status::ok();
  }

  Status parse_for(Stmt& stmt) {
    stmt.kind = StmtKind::kFor;
    RETURN_IF_ERROR(parse_targets(stmt.targets));
    if (!cur_->is_name("in")) return cur_->error_here("expected 'in' in a for loop");
    cur_->next();
    ASSIGN_OR_RETURN(stmt.expr, cur_->parse_or());  // no conditional: `if` here filters items
    if (cur_->is_name("if")) {
      cur_->next();
      ASSIGN_OR_RETURN(stmt.condition, cur_->parse_expression());
    }
    if (cur_->is_name("recursive")) return cur_->error_here("recursive for loops are not supported");
    RETURN_IF_ERROR(cur_->expect_end());
    ++loop_depth_;
    ASSIGN_OR_RETURN(std::string end, parse_body(stmt.body, {"else", "endfor"}, "for", stmt.pos));
    --loop_depth_;
    if (end == "else") {
      RETURN_IF_ERROR(cur_->expect_end());
      ASSIGN_OR_RETURN(end, parse_body(stmt.else_body, {"endfor"}, "for", stmt.pos));
    }
    return cur_->expect_end();
  }

  Status parse_set(Stmt& stmt) {
    stmt.kind = StmtKind::kSet;
    ASSIGN_OR_RETURN(std::string first, cur_->expect_name("a variable name"));
    if (cur_->is_op(".")) {  // `set ns.attr = value`
      cur_->next();
      ExprPtr object = make_expr(ExprKind::kName, stmt.pos);
      object->name = first;
      stmt.target_object = std::move(object);
      ASSIGN_OR_RETURN(stmt.attribute, cur_->expect_name("an attribute name"));
    } else {
      stmt.targets.push_back(first);
      while (cur_->is_op(",")) {
        cur_->next();
        ASSIGN_OR_RETURN(std::string target, cur_->expect_name("a variable name"));
        stmt.targets.push_back(std::move(target));
      }
    }
    if (cur_->at_end()) {  // block form: {% set x %}...{% endset %}
      if (stmt.targets.size() != 1) return template_error(stmt.pos, "block '{% set %}' needs exactly one variable name");
      stmt.kind = StmtKind::kSetBlock;
      ASSIGN_OR_RETURN(std::string end, parse_body(stmt.body, {"endset"}, "set", stmt.pos));
      (void)end;
      return cur_->expect_end();
    }
    RETURN_IF_ERROR(cur_->expect_op("="));
    ASSIGN_OR_RETURN(stmt.expr, cur_->parse_expression());
    if (cur_->is_op(",")) {  // `set a = 1, 2` builds a tuple
      ExprPtr tuple = make_expr(ExprKind::kList, stmt.expr->pos);
      tuple->name = "tuple";
      tuple->args.push_back(std::move(stmt.expr));
      while (cur_->is_op(",")) {
        cur_->next();
        ASSIGN_OR_RETURN(ExprPtr item, cur_->parse_expression());
        tuple->args.push_back(std::move(item));
      }
      stmt.expr = std::move(tuple);
    }
    return cur_->expect_end();
  }

  Status parse_macro(Stmt& stmt) {
    stmt.kind = StmtKind::kMacro;
    ASSIGN_OR_RETURN(stmt.name, cur_->expect_name("a macro name"));
    RETURN_IF_ERROR(cur_->expect_op("("));
    while (!cur_->is_op(")")) {
      MacroParam param;
      ASSIGN_OR_RETURN(param.name, cur_->expect_name("a parameter name"));
      if (cur_->is_op("=")) {
        cur_->next();
        ASSIGN_OR_RETURN(param.default_value, cur_->parse_expression());
      }
      stmt.params.push_back(std::move(param));
      if (!cur_->is_op(",")) break;
      cur_->next();
    }
    RETURN_IF_ERROR(cur_->expect_op(")"));
    RETURN_IF_ERROR(cur_->expect_end());
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;  // break/continue cannot cross a macro boundary
    ASSIGN_OR_RETURN(std::string end, parse_body(stmt.body, {"endmacro"}, "macro", stmt.pos));
    (void)end;
    loop_depth_ = saved_depth;
    if (cur_->peek().kind == TokenKind::kName && cur_->peek().text == stmt.name) cur_->next();
    return cur_->expect_end();
  }

  // Unknown filters and tests, as Jinja2's compiler treats them: an error when the template
  // is parsed, except inside an `{% if %}` (its conditions and branches) or a conditional
  // expression, where the error comes only if the filter is reached when rendering
  // (templates guard newer filters that way). Loop, macro, set-block and filter-block bodies
  // are strict again, as Jinja2's inner frames are.
  static Status check_names(const Expr* e, bool soft) {
    if (!e) return Status::ok();
    if (e->kind == ExprKind::kCondExpr) soft = true;
    if (!soft && e->kind == ExprKind::kFilter && !is_known_filter(e->name)) {
      return template_error(e->pos, fmt::format("unknown filter '{}'", e->name));
    }
    if (!soft && e->kind == ExprKind::kTest && !is_known_test(e->name)) {
      return template_error(e->pos, fmt::format("unknown test '{}'", e->name));
    }
    for (const auto& a : e->args) RETURN_IF_ERROR(check_names(a.get(), soft));
    for (const auto& a : e->call_args) RETURN_IF_ERROR(check_names(a.get(), soft));
    for (const auto& [k, a] : e->call_kwargs) RETURN_IF_ERROR(check_names(a.get(), soft));
    for (const auto& [k, v] : e->dict_items) {
      RETURN_IF_ERROR(check_names(k.get(), soft));
      RETURN_IF_ERROR(check_names(v.get(), soft));
    }
    return Status::ok();
  }

  static Status check_names(const StmtList& list, bool soft) {
    for (const auto& stmt : list) {
      switch (stmt->kind) {
        case StmtKind::kIf:
          for (const auto& [cond, body] : stmt->branches) {
            RETURN_IF_ERROR(check_names(cond.get(), true));
            RETURN_IF_ERROR(check_names(body, true));
          }
          RETURN_IF_ERROR(check_names(stmt->else_body, true));
          break;
        case StmtKind::kFor:
          RETURN_IF_ERROR(check_names(stmt->expr.get(), soft));
          RETURN_IF_ERROR(check_names(stmt->condition.get(), false));
          RETURN_IF_ERROR(check_names(stmt->body, false));
          RETURN_IF_ERROR(check_names(stmt->else_body, false));
          break;
        case StmtKind::kMacro:
          for (const MacroParam& p : stmt->params) RETURN_IF_ERROR(check_names(p.default_value.get(), false));
          RETURN_IF_ERROR(check_names(stmt->body, false));
          break;
        case StmtKind::kSetBlock:
        case StmtKind::kScope:
          RETURN_IF_ERROR(check_names(stmt->body, false));
          break;
        case StmtKind::kFilterBlock:
          RETURN_IF_ERROR(check_names(stmt->expr.get(), soft));
          RETURN_IF_ERROR(check_names(stmt->body, false));
          break;
        default:
          RETURN_IF_ERROR(check_names(stmt->expr.get(), soft));
          RETURN_IF_ERROR(check_names(stmt->target_object.get(), soft));
          break;
      }
    }
    return Status::ok();
  }

  const std::vector<Segment>& segs_;
  size_t seg_ = 0;
  std::unique_ptr<ExprParser> cur_;  // parser of the statement tag being read
  int loop_depth_ = 0;
  int block_depth_ = 0;
};

}  // namespace

Result<StmtList> parse_template(const std::vector<Segment>& segments) { return TemplateParser(segments).parse(); }

}  // namespace moetier::text::jinja
