// GBNF text -> Grammar: a recursive-descent parser that lowers groups and repetitions into
// generated rules as it goes (the syntax and the lowering are described in gbnf.h).
#include "grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "grammar/gbnf_validate.h"
#include "text/utf8.h"

namespace moetier::grammar {

namespace {

constexpr uint32_t kUnbounded = UINT32_MAX;  // x{m,} / x* / x+
constexpr size_t kNoPos = SIZE_MAX;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void normalize(CharSet& set) {
  auto& r = set.ranges;
  std::sort(r.begin(), r.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const CharRange& x : r) {
    if (!merged.empty() && x.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, x.hi);
    else merged.push_back(x);
  }
  r = std::move(merged);
}

}  // namespace

// Parser state for one Grammar::parse call. Rules are drafted as vectors of alternatives and
// flattened at the end, because groups create new rules in the middle of a sequence.
class GrammarBuilder {
 public:
  GrammarBuilder(std::string_view src, const GrammarLimits& limits) : src_(src), limits_(limits) {}

  Result<Grammar> build(std::string_view root_name) {
    if (src_.size() > limits_.max_input_bytes) {
      return Status::bad_input(
          fmt::format("grammar is {} bytes, more than the limit of {}", src_.size(), limits_.max_input_bytes));
    }
    skip_space(true);
    if (at_end()) return Status::bad_input("empty grammar: no rules");
    while (!at_end()) RETURN_IF_ERROR(parse_rule());

    // The first undefined reference, in text order.
    const Draft* undefined = nullptr;
    for (const Draft& d : drafts_) {
      if (!d.defined && (undefined == nullptr || d.first_use < undefined->first_use)) undefined = &d;
    }
    if (undefined != nullptr) return error(undefined->first_use, fmt::format("undefined rule '{}'", undefined->name));
    const auto root = by_name_.find(std::string(root_name));
    if (root == by_name_.end()) return Status::bad_input(fmt::format("missing root rule '{}'", root_name));

    Grammar g;
    g.char_sets_ = std::move(sets_);
    g.root_ = root->second;
    std::vector<std::string> where;  // "LINE:COL" of each rule's (origin's) definition
    for (const Draft& d : drafts_) {
      Rule rule{.name = d.name, .alternatives = {}, .generated = d.generated, .origin = d.origin};
      for (const auto& alt : d.alts) {
        rule.alternatives.push_back(static_cast<uint32_t>(g.elements_.size()));
        g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
        g.elements_.push_back(Element{.kind = ElementKind::kEnd, .index = 0});
      }
      g.rules_.push_back(std::move(rule));
      where.push_back(location(d.def_at));
    }
    RETURN_IF_ERROR(check_left_recursion(g, where));
    return g;
  }

 private:
  struct Draft {
    std::string name;
    std::string origin;
    std::vector<std::vector<Element>> alts;
    bool defined = false;
    bool generated = false;
    size_t first_use = kNoPos;  // offset of the first reference (for "undefined rule")
    size_t def_at = 0;          // offset of the definition (or of the origin's, if generated)
  };

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  std::string location(size_t offset) const {
    offset = std::min(offset, src_.size());
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < offset; ++i) {
      if (src_[i] == '\n') ++line, line_start = i + 1;
    }
    return fmt::format("{}:{}", line, offset - line_start + 1);
  }

  Status error(size_t offset, const std::string& msg) const {
    return Status::bad_input(fmt::format("{}: {}", location(offset), msg));
  }

  std::string describe_char(size_t at) const {
    if (at >= src_.size()) return "end of input";
    const auto c = static_cast<uint8_t>(src_[at]);
    if (c == '\n' || c == '\r') return "end of line";
    if (c >= 0x20 && c < 0x7F) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02X}", c);
  }

  // Spaces, tabs and comments; newlines too when `newline_ok`.
  void skip_space(bool newline_ok) {
    skipped_newline_ = false;
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
        skipped_newline_ = true;
      } else {
        break;
      }
    }
  }

  Status count_elements(size_t n) {
    n_elements_ += n;
    if (n_elements_ > limits_.max_elements) {
      return error(pos_, fmt::format("grammar too large: more than {} elements after expanding repetitions",
                                     limits_.max_elements));
    }
    return Status::ok();
  }

  Result<uint32_t> new_rule(std::string name, size_t def_at, bool generated) {
    if (drafts_.size() >= limits_.max_rules) {
      return error(pos_, fmt::format("grammar too large: more than {} rules", limits_.max_rules));
    }
    const auto id = static_cast<uint32_t>(drafts_.size());
    drafts_.push_back(Draft{.name = std::move(name), .origin = {}, .alts = {}, .defined = false,
                            .generated = generated, .first_use = kNoPos, .def_at = def_at});
    return id;
  }

  Result<uint32_t> generated_rule(std::vector<std::vector<Element>> alts) {
    const std::string name = fmt::format("{}_{}", origin_, ++generated_count_[origin_]);
    ASSIGN_OR_RETURN(const uint32_t id, new_rule(name, origin_at_, true));
    RETURN_IF_ERROR(count_elements(alts.size()));  // the kEnd of each alternative
    drafts_[id].alts = std::move(alts);
    drafts_[id].defined = true;
    drafts_[id].origin = origin_;
    return id;
  }

  Result<uint32_t> rule_id(const std::string& name) {
    const auto it = by_name_.find(name);
    if (it != by_name_.end()) return it->second;
    ASSIGN_OR_RETURN(const uint32_t id, new_rule(name, 0, false));
    by_name_.emplace(name, id);
    return id;
  }

  Element chars(CharSet set) {
    normalize(set);
    std::string key = set.negated ? "^" : "";
    for (const CharRange& r : set.ranges) key += fmt::format("{:x}-{:x},", r.lo, r.hi);
    auto [it, inserted] = set_index_.emplace(std::move(key), static_cast<uint32_t>(sets_.size()));
    if (inserted) sets_.push_back(std::move(set));
    return Element{.kind = ElementKind::kChars, .index = it->second};
  }

  std::string read_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  Status parse_rule() {
    const size_t name_at = pos_;
    if (!is_name_char(peek())) return error(pos_, fmt::format("expected a rule name, found {}", describe_char(pos_)));
    const std::string name = read_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") {
      return error(pos_, fmt::format("expected '::=' after rule name '{}', found {}", name, describe_char(pos_)));
    }
    pos_ += 3;
    ASSIGN_OR_RETURN(const uint32_t id, rule_id(name));
    if (drafts_[id].defined) return error(name_at, fmt::format("rule '{}' defined twice", name));
    drafts_[id].defined = true;
    drafts_[id].def_at = name_at;
    drafts_[id].origin = name;
    origin_ = name;
    origin_at_ = name_at;
    skip_space(true);
    std::vector<std::vector<Element>> alts;
    RETURN_IF_ERROR(parse_alternatives(0, alts));
    const bool next_rule = at_rule_definition();
    if (!at_end() && peek() != '\n' && peek() != '\r' && !(next_rule && skipped_newline_)) {
      if (next_rule) return error(pos_, "a new rule must start on its own line");
      return error(pos_, fmt::format("unexpected {}", describe_char(pos_)));
    }
    RETURN_IF_ERROR(count_elements(alts.size()));
    drafts_[id].alts = std::move(alts);
    skip_space(true);
    return Status::ok();
  }

  // At `name ::=`: the start of the next rule (so `a ::=` with nothing after it, or a last
  // alternative left empty after '|', ends before the next line's rule).
  bool at_rule_definition() const {
    size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  // alternative ('|' alternative)*. At depth 0 a rule ends at a newline unless the line ends
  // with '|' or the next line starts with '|'.
  Status parse_alternatives(int depth, std::vector<std::vector<Element>>& alts) {
    while (true) {
      std::vector<Element> seq;
      RETURN_IF_ERROR(parse_sequence(depth, seq));
      alts.push_back(std::move(seq));
      if (peek() == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      if (depth == 0 && (peek() == '\n' || peek() == '\r')) {
        const size_t saved = pos_;
        skip_space(true);
        if (peek() == '|') {
          ++pos_;
          skip_space(true);
          continue;
        }
        pos_ = saved;
      }
      return Status::ok();
    }
  }

  Status parse_sequence(int depth, std::vector<Element>& seq) {
    size_t last_item = kNoPos;  // where the last item's elements start in seq
    while (!at_end()) {
      const char c = peek();
      const size_t item_at = seq.size();
      if (c == '"') {
        RETURN_IF_ERROR(parse_literal(seq));
      } else if (c == '[') {
        RETURN_IF_ERROR(parse_class(seq));
      } else if (c == '.') {
        ++pos_;
        seq.push_back(chars(CharSet{.ranges = {}, .negated = true}));
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          return error(pos_, fmt::format("parentheses nested deeper than {}", limits_.max_nesting));
        }
        const size_t open = pos_++;
        skip_space(true);
        std::vector<std::vector<Element>> alts;
        RETURN_IF_ERROR(parse_alternatives(depth + 1, alts));
        if (peek() != ')') {
          if (at_end()) return error(open, "unterminated group: missing ')'");
          return error(pos_, fmt::format("expected ')' or '|', found {}", describe_char(pos_)));
        }
        ++pos_;
        ASSIGN_OR_RETURN(const uint32_t id, generated_rule(std::move(alts)));
        seq.push_back(Element{.kind = ElementKind::kRule, .index = id});
      } else if (is_name_char(c) && !at_rule_definition()) {
        const size_t at = pos_;
        ASSIGN_OR_RETURN(const uint32_t id, rule_id(read_name()));
        if (drafts_[id].first_use == kNoPos) drafts_[id].first_use = at;
        seq.push_back(Element{.kind = ElementKind::kRule, .index = id});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_item == kNoPos) return error(pos_, fmt::format("'{}' must follow an item to repeat", c));
        RETURN_IF_ERROR(parse_repetition(seq, last_item));
        skip_space(depth > 0);
        continue;  // the repetition is the last item now (x{2}* repeats "x x")
      } else {
        break;  // '|', ')', a newline or something unexpected: the caller decides
      }
      RETURN_IF_ERROR(count_elements(seq.size() - item_at));
      last_item = item_at;
      skip_space(depth > 0);
    }
    return Status::ok();
  }

  Status parse_literal(std::vector<Element>& seq) {
    const size_t open = pos_++;
    while (true) {
      if (at_end()) return error(open, "unterminated string literal");
      if (peek() == '"') {
        ++pos_;
        return Status::ok();
      }
      ASSIGN_OR_RETURN(const uint32_t cp, parse_char(open, "string literal"));
      seq.push_back(chars(CharSet{.ranges = {CharRange{.lo = cp, .hi = cp}}, .negated = false}));
    }
  }

  Status parse_class(std::vector<Element>& seq) {
    const size_t open = pos_++;
    CharSet set;
    if (peek() == '^') {
      set.negated = true;
      ++pos_;
    }
    while (true) {
      if (at_end()) return error(open, "unterminated character class");
      if (peek() == ']') {
        ++pos_;
        break;
      }
      const size_t lo_at = pos_;
      ASSIGN_OR_RETURN(const uint32_t lo, parse_char(open, "character class"));
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        ASSIGN_OR_RETURN(hi, parse_char(open, "character class"));
        if (hi < lo) {
          return error(lo_at, fmt::format("bad character range '{}': end U+{:04X} before start U+{:04X}",
                                          src_.substr(lo_at, pos_ - lo_at), hi, lo));
        }
      }
      set.ranges.push_back(CharRange{.lo = lo, .hi = hi});
    }
    seq.push_back(chars(std::move(set)));
    return Status::ok();
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  Result<uint32_t> parse_char(size_t open, const char* what) {
    const size_t at = pos_;
    if (peek() != '\\') {
      const auto cp = text::decode_strict(src_, pos_);
      if (!cp) return error(at, fmt::format("invalid UTF-8 in {}", what));
      return *cp;
    }
    ++pos_;
    if (at_end()) return error(open, fmt::format("unterminated {}", what));
    const char e = src_[pos_++];
    switch (e) {
      case 'n': return uint32_t{'\n'};
      case 't': return uint32_t{'\t'};
      case 'r': return uint32_t{'\r'};
      case '\\': case '"': case '[': case ']': return static_cast<uint32_t>(e);
      case 'x': case 'u': case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < digits; ++i) {
          const int v = hex_value(peek());
          if (v < 0) return error(at, fmt::format("bad escape '\\{}': expected {} hex digits", e, digits));
          cp = cp * 16 + static_cast<uint32_t>(v);
          ++pos_;
        }
        if (cp > kMaxCodePoint) return error(at, fmt::format("bad escape: U+{:X} is above U+10FFFF", cp));
        return cp;
      }
      default: {
        const auto u = static_cast<uint8_t>(e);
        if (u >= 0x20 && u < 0x7F) return error(at, fmt::format("bad escape '\\{}'", e));
        return error(at, "bad escape: '\\' followed by " + describe_char(at + 1));
      }
    }
  }

  Result<uint32_t> parse_count(size_t open) {
    const size_t at = pos_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      ++pos_;
      if (v > limits_.max_repetition) {
        return error(at, fmt::format("bad repetition bounds: count above the limit of {}", limits_.max_repetition));
      }
    }
    return static_cast<uint32_t>(v);
  }

  // '*', '+', '?' or '{m}', '{m,}', '{m,n}', '{,n}' after the item seq[item..].
  Status parse_repetition(std::vector<Element>& seq, size_t item) {
    const size_t op_at = pos_;
    uint32_t min = 0;
    uint32_t max = kUnbounded;
    const char op = src_[pos_++];
    if (op == '+') min = 1;
    if (op == '?') max = 1;
    if (op == '{') {
      skip_space(true);
      const bool has_min = peek() >= '0' && peek() <= '9';
      if (!has_min && peek() != ',') {
        return error(pos_, fmt::format("bad repetition bounds: expected a number, found {}", describe_char(pos_)));
      }
      ASSIGN_OR_RETURN(min, parse_count(op_at));
      skip_space(true);
      if (peek() == '}') {
        if (!has_min) return error(op_at, "bad repetition bounds: '{,}' needs a maximum");
        max = min;
      } else if (peek() == ',') {
        ++pos_;
        skip_space(true);
        if (peek() >= '0' && peek() <= '9') {
          ASSIGN_OR_RETURN(max, parse_count(op_at));
          skip_space(true);
        } else if (!has_min) {
          return error(op_at, "bad repetition bounds: '{,}' needs a maximum");
        }
      }
      if (peek() != '}') {
        return error(pos_, fmt::format("bad repetition bounds: expected '}}', found {}", describe_char(pos_)));
      }
      ++pos_;
      if (max != kUnbounded && max < min) {
        return error(op_at, fmt::format("bad repetition bounds: maximum {} is less than minimum {}", max, min));
      }
    }

    const std::vector<Element> unit(seq.begin() + static_cast<std::ptrdiff_t>(item), seq.end());
    seq.resize(item);
    if (unit.empty()) return Status::ok();  // ""* and the like match only the empty string
    RETURN_IF_ERROR(count_elements(unit.size() * (min + (max == kUnbounded ? 1 : max - min))));
    for (uint32_t i = 0; i < min; ++i) seq.insert(seq.end(), unit.begin(), unit.end());
    if (max == kUnbounded) {
      // R ::= unit R | ""  (R in tail position, so the matcher's stacks do not grow)
      ASSIGN_OR_RETURN(const uint32_t r, generated_rule({}));
      std::vector<Element> loop = unit;
      loop.push_back(Element{.kind = ElementKind::kRule, .index = r});
      drafts_[r].alts = {std::move(loop), {}};
      RETURN_IF_ERROR(count_elements(2));
      seq.push_back(Element{.kind = ElementKind::kRule, .index = r});
    } else if (max > min) {
      // R1 ::= unit | "",  Rk ::= unit R(k-1) | ""
      std::optional<uint32_t> inner;
      for (uint32_t k = 0; k < max - min; ++k) {
        std::vector<Element> alt = unit;
        if (inner) alt.push_back(Element{.kind = ElementKind::kRule, .index = *inner});
        ASSIGN_OR_RETURN(inner, generated_rule({std::move(alt), {}}));
      }
      seq.push_back(Element{.kind = ElementKind::kRule, .index = *inner});
    }
    return Status::ok();
  }

  std::string_view src_;
  GrammarLimits limits_;
  size_t pos_ = 0;
  size_t n_elements_ = 0;
  bool skipped_newline_ = false;  // the last skip_space() crossed a line end
  std::vector<Draft> drafts_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<CharSet> sets_;
  std::map<std::string, uint32_t> set_index_;  // canonical text of a CharSet -> index in sets_
  std::string origin_;                          // the user rule being parsed
  size_t origin_at_ = 0;
  std::unordered_map<std::string, int> generated_count_;
};

bool CharSet::contains(uint32_t cp) const {
  // Ranges are sorted: binary search for the last range starting at or before cp.
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp, [](uint32_t v, const CharRange& r) { return v < r.lo; });
  const bool in = it != ranges.begin() && cp <= std::prev(it)->hi;
  return in != negated;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const CharRange& r : ranges) {
      if (r.lo <= hi && lo <= r.hi) return true;
    }
    return false;
  }
  // Complement: [lo, hi] intersects it unless the ranges cover all of [lo, hi].
  uint32_t next = lo;  // the first code point of [lo, hi] not yet known to be covered
  for (const CharRange& r : ranges) {
    if (r.hi < next) continue;
    if (r.lo > next) return true;
    if (r.hi >= hi) return false;
    next = r.hi + 1;
  }
  return next <= hi;
}

Result<Grammar> Grammar::parse(std::string_view gbnf, std::string_view root, const GrammarLimits& limits) {
  return GrammarBuilder(gbnf, limits).build(root);
}

std::optional<uint32_t> Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].name == name) return static_cast<uint32_t>(i);
  }
  return std::nullopt;
}

std::string Grammar::to_string() const {
  auto cp_text = [](uint32_t cp) {
    if (cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\' && cp != ']' && cp != '[' && cp != '-' && cp != '^') {
      return std::string(1, static_cast<char>(cp));
    }
    return cp <= 0xFF ? fmt::format("\\x{:02X}", cp) : fmt::format("\\U{:08X}", cp);
  };
  std::string out;
  for (const Rule& rule : rules_) {
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      for (uint32_t p = rule.alternatives[a]; elements_[p].kind != ElementKind::kEnd; ++p) {
        const Element& e = elements_[p];
        if (e.kind == ElementKind::kRule) {
          out += " " + rules_[e.index].name;
          continue;
        }
        const CharSet& s = char_sets_[e.index];
        out += s.negated ? " [^" : " [";
        for (const CharRange& r : s.ranges) out += r.lo == r.hi ? cp_text(r.lo) : cp_text(r.lo) + "-" + cp_text(r.hi);
        out += "]";
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace moetier::grammar
