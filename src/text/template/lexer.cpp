#include "text/template/lexer.h"
#include "text/utf8.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <optional>

namespace moetier::text::jinja {

namespace {

// Byte offset -> line:col, from the offsets where lines start.
class LineMap {
 public:
  explicit LineMap(std::string_view source) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\n') line_starts_.push_back(i + 1);
    }
  }
  SourcePos at(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());  // 1-based
    return SourcePos{static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

 private:
  std::vector<size_t> line_starts_;
};

// A piece of the source before whitespace control: literal text or a tag.
struct Piece {
  bool is_tag = false;
  // Text pieces.
  std::string text;
  size_t offset = 0;      // where the text starts in the source
  bool verbatim = false;  // raw-block content: only explicit '-' markers strip it
  // Tag pieces.
  bool is_block = false;     // statement or comment tag (trim_blocks / lstrip_blocks apply)
  bool strip_before = false; // '-' after the opener
  bool keep_before = false;  // '+' after the opener
  bool strip_after = false;  // '-' before the closer
  bool keep_after = false;   // '+' before the closer
  bool emit = false;         // becomes a segment (comments and raw markers do not)
  Segment segment;
};

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& options)
      : text_(normalize_source(source, options)), src_(text_), options_(options), lines_(src_) {}

  Result<std::vector<Segment>> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t open = find_opener(pos);
      if (open > pos) add_text(pos, open);
      if (open == src_.size()) break;
      ASSIGN_OR_RETURN(pos, lex_tag(open));
    }
    apply_whitespace_control();
    std::vector<Segment> segments;
    for (Piece& piece : pieces_) {
      if (piece.is_tag) {
        if (piece.emit) segments.push_back(std::move(piece.segment));
      } else if (!piece.text.empty()) {
        Segment seg;
        seg.kind = SegmentKind::kText;
        seg.text = std::move(piece.text);
        seg.pos = lines_.at(piece.offset);
        segments.push_back(std::move(seg));
      }
    }
    return segments;
  }

 private:
  size_t find_opener(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void add_text(size_t begin, size_t end, bool verbatim = false) {
    Piece piece;
    piece.text = std::string(src_.substr(begin, end - begin));
    piece.offset = begin;
    piece.verbatim = verbatim;
    pieces_.push_back(std::move(piece));
  }

  // Lexes the tag opening at `open`; returns the offset just past it.
  Result<size_t> lex_tag(size_t open) {
    const char type = src_[open + 1];
    Piece piece;
    piece.is_tag = true;
    size_t pos = open + 2;
    if (pos < src_.size() && (src_[pos] == '-' || src_[pos] == '+')) {
      piece.strip_before = src_[pos] == '-';
      piece.keep_before = src_[pos] == '+';
      ++pos;
    }
    if (type == '#') {
      const size_t close = src_.find("#}", pos);
      if (close == std::string_view::npos) return template_error(lines_.at(open), "comment '{#' is never closed");
      piece.is_block = true;
      piece.strip_after = close > pos && src_[close - 1] == '-';
      piece.keep_after = close > pos && src_[close - 1] == '+';
      pieces_.push_back(std::move(piece));
      return close + 2;
    }
    piece.is_block = type == '%';
    piece.emit = true;
    piece.segment.kind = type == '%' ? SegmentKind::kStatement : SegmentKind::kOutput;
    piece.segment.pos = lines_.at(open);
    ASSIGN_OR_RETURN(size_t end, lex_tokens(pos, type == '%' ? '%' : '}', piece));
    // `{% raw %}`: everything up to `{% endraw %}` is literal text.
    const auto& toks = piece.segment.tokens;
    if (type == '%' && toks.size() == 2 && toks[0].kind == TokenKind::kName && toks[0].text == "raw") {
      piece.emit = false;
      pieces_.push_back(std::move(piece));
      return lex_raw_body(end, open);
    }
    pieces_.push_back(std::move(piece));
    return end;
  }

  Result<size_t> lex_raw_body(size_t body_start, size_t raw_open) {
    for (size_t at = src_.find("{%", body_start); at != std::string_view::npos; at = src_.find("{%", at + 2)) {
      size_t p = at + 2;
      const bool strip_before = p < src_.size() && src_[p] == '-';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
      while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\n' || src_[p] == '\r')) ++p;
      if (src_.substr(p, 6) != "endraw") continue;
      add_text(body_start, at, /*verbatim=*/true);
      Piece close;
      close.is_tag = true;
      close.is_block = true;
      close.strip_before = strip_before;
      ASSIGN_OR_RETURN(size_t end, lex_tokens(at + 2 + (strip_before ? 1 : 0), '%', close));
      pieces_.push_back(std::move(close));
      return end;
    }
    return template_error(lines_.at(raw_open), "'{% raw %}' is never closed by '{% endraw %}'");
  }

  // Tokens of a tag body until its closer ("%}" when closer == '%', "}}" when '}').
  Result<size_t> lex_tokens(size_t pos, char closer, Piece& piece) {
    std::vector<Token>& tokens = piece.segment.tokens;
    int brace_depth = 0;  // dict literals inside {{ }} may contain "}}"
    auto at_closer = [&](size_t p) {
      if (p + 1 >= src_.size()) return false;
      if (closer == '%') return src_[p] == '%' && src_[p + 1] == '}';
      return brace_depth == 0 && src_[p] == '}' && src_[p + 1] == '}';
    };
    while (true) {
      while (pos < src_.size() && (src_[pos] == ' ' || src_[pos] == '\t' || src_[pos] == '\n' || src_[pos] == '\r')) {
        ++pos;
      }
      if (pos >= src_.size()) {
        return template_error(piece.segment.pos,
                              closer == '%' ? "tag '{%' is never closed by '%}'" : "'{{' is never closed by '}}'");
      }
      if (at_closer(pos)) {
        tokens.push_back(Token{.kind = TokenKind::kEnd, .pos = lines_.at(pos)});
        return pos + 2;
      }
      if ((src_[pos] == '-' || src_[pos] == '+') && at_closer(pos + 1)) {
        piece.strip_after = src_[pos] == '-';
        piece.keep_after = src_[pos] == '+';
        tokens.push_back(Token{.kind = TokenKind::kEnd, .pos = lines_.at(pos)});
        return pos + 3;
      }
      Token tok;
      tok.pos = lines_.at(pos);
      const char c = src_[pos];
      if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        tok.kind = TokenKind::kName;
        tok.text = std::string(src_.substr(pos, end - pos));
        pos = end;
      } else if (is_digit(c)) {
        ASSIGN_OR_RETURN(pos, lex_number(pos, tok));
      } else if (c == '\'' || c == '"') {
        ASSIGN_OR_RETURN(pos, lex_string(pos, tok));
      } else {
        static constexpr std::array<std::string_view, 6> kTwoChar = {"//", "**", "==", "!=", "<=", ">="};
        static constexpr std::string_view kOneChar = "+-*/%~<>=.,:|()[]{}";
        const std::string_view two = src_.substr(pos, 2);
        if (std::find(kTwoChar.begin(), kTwoChar.end(), two) != kTwoChar.end()) {
          tok.text = std::string(two);
        } else if (kOneChar.find(c) != std::string_view::npos) {
          tok.text = std::string(1, c);
        } else {
          return template_error(tok.pos, fmt::format("unexpected character '{}' inside a tag", c));
        }
        tok.kind = TokenKind::kOp;
        if (tok.text == "{") ++brace_depth;
        if (tok.text == "}") --brace_depth;
        pos += tok.text.size();
      }
      tokens.push_back(std::move(tok));
    }
  }

  Result<size_t> lex_number(size_t pos, Token& tok) {
    size_t end = pos;
    while (end < src_.size() && is_digit(src_[end])) ++end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      ++end;
      while (end < src_.size() && is_digit(src_[end])) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        end = p;
        while (end < src_.size() && is_digit(src_[end])) ++end;
      }
    }
    const std::string text(src_.substr(pos, end - pos));
    tok.text = text;
    if (is_float) {
      tok.kind = TokenKind::kFloat;
      tok.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      tok.kind = TokenKind::kInt;
      errno = 0;
      tok.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return template_error(tok.pos, fmt::format("integer literal {} is too large", text));
    }
    return end;
  }

  // A quoted string literal with Python escapes (\n \t \r \\ \' \" \xNN \uNNNN \UNNNNNNNN ...).
  Result<size_t> lex_string(size_t pos, Token& tok) {
    const char quote = src_[pos];
    tok.kind = TokenKind::kString;
    size_t p = pos + 1;
    while (p < src_.size() && src_[p] != quote) {
      if (src_[p] != '\\' || p + 1 >= src_.size()) {
        tok.text += src_[p++];
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n': tok.text += '\n'; break;
        case 't': tok.text += '\t'; break;
        case 'r': tok.text += '\r'; break;
        case 'b': tok.text += '\b'; break;
        case 'f': tok.text += '\f'; break;
        case 'v': tok.text += '\v'; break;
        case '0': tok.text += '\0'; break;
        case '\\': tok.text += '\\'; break;
        case '\'': tok.text += '\''; break;
        case '"': tok.text += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          if (p + n > src_.size()) return template_error(tok.pos, "truncated escape in string literal");
          for (size_t i = 0; i < n; ++i) {
            const char h = src_[p + i];
            int digit = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                      : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (digit < 0) return template_error(tok.pos, fmt::format("bad \\{} escape in string literal", e));
            cp = cp * 16 + static_cast<uint32_t>(digit);
          }
          if (cp > 0x10FFFF) return template_error(tok.pos, "escape beyond U+10FFFF in string literal");
          text::append_utf8(static_cast<char32_t>(cp), tok.text);
          p += n;
          break;
        }
        default:  // unknown escapes keep the backslash, as Python does
          tok.text += '\\';
          tok.text += e;
      }
    }
    if (p >= src_.size()) return template_error(tok.pos, "string literal is never closed");
    return p + 1;
  }

  void apply_whitespace_control() {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      Piece& piece = pieces_[i];
      if (piece.is_tag) continue;
      const Piece* prev = i > 0 && pieces_[i - 1].is_tag ? &pieces_[i - 1] : nullptr;
      const Piece* next = i + 1 < pieces_.size() && pieces_[i + 1].is_tag ? &pieces_[i + 1] : nullptr;
      std::string& text = piece.text;
      // Right end first: lstrip_blocks looks at the line as written in the source.
      if (next && next->strip_before) {
        text.erase(text.find_last_not_of(" \t\n\r\v\f") + 1);
      } else if (next && next->is_block && options_.lstrip_blocks && !next->keep_before && !piece.verbatim) {
        const size_t nl = text.rfind('\n');
        const size_t line_start = nl == std::string::npos ? 0 : nl + 1;
        const bool at_line_start = nl != std::string::npos || piece.offset == 0;
        if (at_line_start && text.find_first_not_of(" \t", line_start) == std::string::npos) {
          text.erase(line_start);
        }
      }
      if (prev && prev->strip_after) {
        text.erase(0, text.find_first_not_of(" \t\n\r\v\f"));  // npos erases everything
      } else if (prev && prev->is_block && options_.trim_blocks && !prev->keep_after && !piece.verbatim) {
        if (text.rfind("\n", 0) == 0) text.erase(0, 1);
      }
    }
  }

  // As Jinja2: "\r\n" and "\r" become "\n" (in text and string literals alike), and one
  // trailing newline at the end of the template is dropped unless keep_trailing_newline.
  static std::string normalize_source(std::string_view source, const LexOptions& options) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] != '\r') {
        out += source[i];
        continue;
      }
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
    if (!options.keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::string text_;
  std::string_view src_;
  LexOptions options_;
  LineMap lines_;
  std::vector<Piece> pieces_;
};

}  // namespace

Result<std::vector<Segment>> lex_template(std::string_view source, const LexOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace moetier::text::jinja
