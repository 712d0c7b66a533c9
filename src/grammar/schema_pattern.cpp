#include "grammar/schema_pattern.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "grammar/gbnf_writer.h"
#include "text/utf8.h"

namespace moetier::grammar {

namespace {

// Decodes UTF-8; false on a malformed sequence.
bool decode_utf8(std::string_view s, std::vector<char32_t>& out) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    out.push_back(cp);
    i += len;
  }
  return true;
}

using Range = std::pair<char32_t, char32_t>;  // inclusive code-point range

class PatternParser {
 public:
  PatternParser(std::vector<char32_t> p, StringForm form) : p_(std::move(p)), form_(form) {}

  Result<std::string> run(std::string_view any_char) {
    bool anchored_start = false;
    bool anchored_end = false;
    if (p_.size() > 0 && p_.front() == U'^') {
      anchored_start = true;
      i_ = 1;
    }
    if (p_.size() > i_ && p_.back() == '$' && !escaped_at(p_.size() - 1)) {
      anchored_end = true;
      p_.pop_back();
    }
    std::string body = alternation();
    if (error_.empty() && i_ < p_.size()) fail(fmt::format("unbalanced ')' at offset {}", i_));
    if (!error_.empty()) return Status::bad_input(error_);
    std::string out;
    if (!anchored_start) out += std::string(any_char) + "* ";
    out += body.empty() ? "\"\"" : body;
    if (!anchored_end) out += " " + std::string(any_char) + "*";
    return out;
  }

 private:
  struct Piece {
    std::string expr;
    std::string literal;  // encoded text when the piece is one unquantified literal
    bool is_literal = false;
  };

  bool escaped_at(size_t pos) const {
    size_t n = 0;
    while (pos > n && p_[pos - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }

  void fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
  }

  bool at_end() const { return i_ >= p_.size(); }

  // The characters of `cp` as they appear in the output text.
  std::string encode(char32_t cp) const {
    std::string out;
    if (form_ == StringForm::kJson) {
      switch (cp) {
        case '"': return "\\\"";
        case '\\': return "\\\\";
        case '\n': return "\\n";
        case '\r': return "\\r";
        case '\t': return "\\t";
        case '\b': return "\\b";
        case '\f': return "\\f";
        default:
          if (cp < 0x20) return fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      }
    }
    text::append_utf8(cp, out);
    return out;
  }

  // A class as an expression. In JSON form " \ and control characters of a positive class
  // become escaped literals; a negated class also excludes them (see the header).
  std::string class_expr(const std::vector<Range>& ranges, bool negated) const {
    if (form_ == StringForm::kRaw || negated) {
      std::string cls = negated ? "[^" : "[";
      for (auto [lo, hi] : ranges) cls += lo == hi ? gbnf_class_char(lo) : gbnf_class_char(lo) + "-" + gbnf_class_char(hi);
      if (negated && form_ == StringForm::kJson) cls += "\"\\\\\\x00-\\x1F";
      return cls + "]";
    }
    std::string cls;
    std::vector<std::string> specials;
    auto special = [](char32_t c) { return c < 0x20 || c == '"' || c == '\\'; };
    for (auto [lo, hi] : ranges) {
      char32_t start = lo;
      for (char32_t c = lo;; ++c) {
        const bool end = c > hi;
        if (end || special(c)) {
          if (c > start) cls += c - 1 == start ? gbnf_class_char(start) : gbnf_class_char(start) + "-" + gbnf_class_char(c - 1);
          if (end) break;
          specials.push_back(gbnf_literal(encode(c)));
          start = c + 1;
        }
        if (c >= 0x5D && !end) {  // nothing special above '\\': take the rest whole
          if (hi >= start) cls += hi == start ? gbnf_class_char(start) : gbnf_class_char(start) + "-" + gbnf_class_char(hi);
          break;
        }
      }
    }
    std::vector<std::string> alts;
    if (!cls.empty()) alts.push_back("[" + cls + "]");
    for (auto& s : specials) alts.push_back(s);
    if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // matches nothing (an empty class)
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  std::string alternation() {
    std::vector<std::string> alts{sequence()};
    while (!at_end() && p_[i_] == '|' && error_.empty()) {
      ++i_;
      alts.push_back(sequence());
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + (alts[k].empty() ? "\"\"" : alts[k]);
    return out + ")";
  }

  std::string sequence() {
    std::vector<Piece> pieces;
    while (!at_end() && p_[i_] != '|' && p_[i_] != ')' && error_.empty()) {
      Piece piece = atom();
      quantifier(piece);
      // Adjacent plain literals become one GBNF literal ("abc" rather than "a" "b" "c").
      if (piece.is_literal && !pieces.empty() && pieces.back().is_literal) {
        pieces.back().literal += piece.literal;
        pieces.back().expr = gbnf_literal(pieces.back().literal);
      } else {
        pieces.push_back(std::move(piece));
      }
    }
    std::string out;
    for (auto& piece : pieces) out += (out.empty() ? "" : " ") + piece.expr;
    return out;
  }

  Piece literal_piece(char32_t cp) const {
    Piece p;
    p.literal = encode(cp);
    p.expr = gbnf_literal(p.literal);
    p.is_literal = true;
    return p;
  }

  Piece atom() {
    const char32_t c = p_[i_++];
    switch (c) {
      case '(': {
        if (!at_end() && p_[i_] == '?') {
          if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
            i_ += 2;
          } else if (i_ + 1 < p_.size() && p_[i_ + 1] == '<' && i_ + 2 < p_.size() && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
            while (!at_end() && p_[i_] != '>') ++i_;  // named group: the name does not matter
            ++i_;
          } else {
            fail("lookahead/lookbehind groups (?=, (?!, (?<=, (?<!) are not supported in 'pattern'");
            return {};
          }
        }
        std::string inner = alternation();
        if (at_end() || p_[i_] != ')') {
          fail("unbalanced '(' in 'pattern'");
          return {};
        }
        ++i_;
        return {.expr = "(" + (inner.empty() ? std::string("\"\"") : inner) + ")"};
      }
      case '[': return char_class();
      case '.':
        return {.expr = form_ == StringForm::kJson ? "[^\"\\\\\\x00-\\x1F]" : "[^\\n\\r]"};
      case '^':
      case '$':
        fail(fmt::format("'{}' is supported in 'pattern' only at its very start ('^') or end ('$')", static_cast<char>(c)));
        return {};
      case '*':
      case '+':
      case '?':
        fail(fmt::format("quantifier '{}' with nothing to repeat in 'pattern'", static_cast<char>(c)));
        return {};
      case '\\': return escape();
      default: return literal_piece(c);
    }
  }

  // After a backslash, outside a class.
  Piece escape() {
    if (at_end()) {
      fail("'pattern' ends with a lone backslash");
      return {};
    }
    const char32_t c = p_[i_];
    std::vector<Range> ranges;
    bool negated = false;
    if (class_shorthand(c, ranges, negated)) {
      ++i_;
      return {.expr = class_expr(ranges, negated)};
    }
    char32_t cp = 0;
    if (!escaped_char(cp)) return {};
    return literal_piece(cp);
  }

  // \d \w \s and their negations as ranges.
  static bool class_shorthand(char32_t c, std::vector<Range>& ranges, bool& negated) {
    switch (c) {
      case 'd': case 'D': ranges.push_back({'0', '9'}); break;
      case 'w': case 'W':
        ranges.insert(ranges.end(), {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
        break;
      case 's': case 'S':
        ranges.insert(ranges.end(), {{'\t', '\r'}, {' ', ' '}});
        break;
      default: return false;
    }
    negated = c == 'D' || c == 'W' || c == 'S';
    return true;
  }

  // A single-character escape at i_ (after the backslash); advances past it.
  bool escaped_char(char32_t& cp) {
    const char32_t c = p_[i_++];
    auto hex = [&](int n) -> bool {
      cp = 0;
      for (int k = 0; k < n; ++k) {
        if (at_end()) return false;
        const char32_t h = p_[i_++];
        int v = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10) : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
        if (v < 0) return false;
        cp = cp * 16 + v;
      }
      return true;
    };
    switch (c) {
      case 'n': cp = '\n'; return true;
      case 't': cp = '\t'; return true;
      case 'r': cp = '\r'; return true;
      case 'f': cp = '\f'; return true;
      case 'v': cp = '\v'; return true;
      case '0': cp = 0; return true;
      case 'x':
        if (!hex(2)) fail("'\\x' in 'pattern' needs two hex digits");
        return error_.empty();
      case 'u':
        if (!hex(4)) fail("'\\u' in 'pattern' needs four hex digits");
        return error_.empty();
      case 'b': case 'B':
        fail(fmt::format("word boundaries (\\{}) are not supported in 'pattern'", static_cast<char>(c)));
        return false;
      case 'p': case 'P':
        fail("Unicode property escapes (\\p{...}) are not supported in 'pattern'");
        return false;
      default:
        if (c >= '1' && c <= '9') {
          fail("back-references (\\1 ...) are not supported in 'pattern'");
          return false;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          fail(fmt::format("unknown escape '\\{}' in 'pattern'", static_cast<char>(c)));
          return false;
        }
        cp = c;  // escaped punctuation stands for itself
        return true;
    }
  }

  Piece char_class() {
    bool negated = false;
    if (!at_end() && p_[i_] == '^') {
      negated = true;
      ++i_;
    }
    std::vector<Range> ranges;
    bool first = true;
    while (!at_end() && (p_[i_] != ']' || first) && error_.empty()) {
      first = false;
      char32_t lo = 0;
      if (!class_atom(ranges, lo)) continue;  // a shorthand such as \d was added whole
      if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        char32_t hi = 0;
        if (!class_atom(ranges, hi)) {
          fail("a class shorthand (\\d, \\w, \\s) cannot end a range in 'pattern'");
          break;
        }
        if (hi < lo) {
          fail("a character range in 'pattern' is out of order");
          break;
        }
        ranges.push_back({lo, hi});
      } else {
        ranges.push_back({lo, lo});
      }
    }
    if (error_.empty() && at_end()) fail("unterminated '[' in 'pattern'");
    if (!error_.empty()) return {};
    ++i_;  // ']'
    return {.expr = class_expr(ranges, negated)};
  }

  // One class member: false when it was a shorthand (added to `ranges` directly).
  bool class_atom(std::vector<Range>& ranges, char32_t& cp) {
    const char32_t c = p_[i_++];
    if (c != '\\') {
      cp = c;
      return true;
    }
    if (at_end()) {
      fail("unterminated '[' in 'pattern'");
      return false;
    }
    bool neg = false;
    std::vector<Range> shorthand;
    if (class_shorthand(p_[i_], shorthand, neg)) {
      ++i_;
      if (neg) fail("negated shorthands (\\D, \\W, \\S) inside a class are not supported in 'pattern'");
      ranges.insert(ranges.end(), shorthand.begin(), shorthand.end());
      return false;
    }
    if (p_[i_] == 'b') {  // [\b] is a backspace
      ++i_;
      cp = '\b';
      return true;
    }
    return escaped_char(cp);
  }

  void quantifier(Piece& piece) {
    if (at_end() || !error_.empty()) return;
    std::string q;
    const char32_t c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, static_cast<char>(c));
      ++i_;
    } else if (c == '{') {
      // {m}, {m,}, {m,n}; anything else is a literal '{' (as in ECMA-262's web grammar).
      size_t j = i_ + 1;
      auto number = [&](long& v) {
        const size_t s = j;
        v = 0;
        while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v < 100000) v = v * 10 + (p_[j++] - '0');
        return j > s;
      };
      long m = 0, n = -1;
      if (!number(m)) return;
      if (j < p_.size() && p_[j] == ',') {
        ++j;
        if (j < p_.size() && p_[j] != '}' && !number(n)) return;
      } else {
        n = m;
      }
      if (j >= p_.size() || p_[j] != '}') return;
      if (n >= 0 && n < m) {
        fail("a {m,n} quantifier in 'pattern' has n < m");
        return;
      }
      i_ = j + 1;
      q = n == m ? fmt::format("{{{}}}", m) : n < 0 ? fmt::format("{{{},}}", m) : fmt::format("{{{},{}}}", m, n);
    } else {
      return;
    }
    if (!at_end() && p_[i_] == '?') ++i_;  // lazy: same language
    if (!at_end() && p_[i_] == '+') {
      fail("possessive quantifiers are not supported in 'pattern'");
      return;
    }
    if (!at_end() && (p_[i_] == '*' || p_[i_] == '+' || (p_[i_] == '{' && q[0] != '{'))) {
      fail("a quantifier follows another quantifier in 'pattern'");
      return;
    }
    // Every atom is one GBNF element (a literal of one character, a class, a group), so the
    // quantifier applies to it as a whole.
    piece.expr += q;
    piece.is_literal = false;
    piece.literal.clear();
  }

  std::vector<char32_t> p_;
  StringForm form_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

Result<std::string> pattern_to_gbnf(std::string_view pattern, StringForm form, std::string_view any_char) {
  std::vector<char32_t> cps;
  if (!decode_utf8(pattern, cps)) return Status::bad_input("'pattern' is not valid UTF-8");
  PatternParser parser(std::move(cps), form);
  return parser.run(any_char);
}

}  // namespace moetier::grammar
