#include "grammar/gbnf_writer.h"

#include <fmt/format.h>

#include "text/utf8.h"

namespace moetier::grammar {

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += fmt::format("\\x{:02X}", c);
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string gbnf_class_char(char32_t cp) {
  switch (cp) {
    case ']': return "\\]";
    case '[': return "\\[";
    case '\\': return "\\\\";
    // '-' and '^' are special only by position in a class; GBNF has no escape for them (as
    // llama.cpp's parser), so they are written by code point.
    case '-': return "\\x2D";
    case '^': return "\\x5E";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x20 || cp == 0x7F) return fmt::format("\\x{:02X}", static_cast<unsigned>(cp));
  std::string out;
  text::append_utf8(cp, out);
  return out;
}

std::string GbnfWriter::unique_name(std::string_view hint) {
  std::string base;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) {
      base += c;
    } else if (!base.empty() && base.back() != '-') {
      base += '-';  // any run of other characters (_, ., space, non-ASCII) becomes one '-'
    }
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  std::string name = base;
  for (int i = 2; bodies_.count(name); ++i) name = fmt::format("{}-{}", base, i);
  return name;
}

std::string GbnfWriter::add_rule(std::string_view name_hint, const std::string& body) {
  if (auto it = by_body_.find(body); it != by_body_.end()) return it->second;
  std::string name = unique_name(name_hint);
  order_.push_back(name);
  bodies_[name] = body;
  by_body_[body] = name;
  return name;
}

std::string GbnfWriter::add_named(std::string_view name, const std::string& body) {
  std::string n(name);
  if (!bodies_.count(n)) {
    order_.push_back(n);
    bodies_[n] = body;
    by_body_.emplace(body, n);
  }
  return n;
}

std::string GbnfWriter::reserve(std::string_view name_hint) {
  std::string name = unique_name(name_hint);
  order_.push_back(name);
  bodies_[name] = "";
  return name;
}

void GbnfWriter::define(const std::string& name, const std::string& body) {
  bodies_[name] = body;
  by_body_.emplace(body, name);
}

void GbnfWriter::define_or_add(const std::string& name, const std::string& body) {
  if (!bodies_.count(name)) order_.push_back(name);
  bodies_[name] = body;
}

std::string GbnfWriter::add_text_without(std::string_view name_hint, std::string_view forbidden) {
  if (auto it = text_rules_.find(std::string(forbidden)); it != text_rules_.end()) return it->second;
  // KMP failure function: fail[i] = length of the longest proper border of forbidden[0, i).
  const size_t k = forbidden.size();
  std::vector<size_t> fail(k + 1, 0);
  for (size_t i = 1; i < k; ++i) {
    size_t j = fail[i];
    while (j > 0 && forbidden[i] != forbidden[j]) j = fail[j];
    fail[i + 1] = forbidden[i] == forbidden[j] ? j + 1 : 0;
  }
  // State s = how many characters of `forbidden` the text currently ends with (0..k-1);
  // reaching k is the one thing the rule must not do.
  auto next_state = [&](size_t s, char c) {
    while (s > 0 && forbidden[s] != c) s = fail[s];
    return forbidden[s] == c ? s + 1 : 0;
  };
  std::vector<std::string> names(k);
  for (size_t s = 0; s < k; ++s) {
    names[s] = s == 0 ? unique_name(name_hint) : unique_name(fmt::format("{}-{}", names[0], s));
    order_.push_back(names[s]);
    bodies_[names[s]] = "";
  }
  // The distinct characters of `forbidden`; any other character sends every state to 0.
  std::string alphabet;
  for (char c : forbidden) {
    if (alphabet.find(c) == std::string::npos) alphabet += c;
  }
  for (size_t s = 0; s < k; ++s) {
    // Characters that lead somewhere other than state 0 (or would complete `forbidden`) are
    // listed; one negated class of them covers all the rest, which go back to state 0.
    std::string listed = "[^";
    std::vector<std::string> moves;  // "c" S_t
    for (char c : alphabet) {
      const size_t t = next_state(s, c);
      if (t == 0) continue;
      listed += gbnf_class_char(static_cast<unsigned char>(c));
      if (t < k) moves.push_back(gbnf_literal(std::string(1, c)) + " " + names[t]);
    }
    listed += "]";
    std::string body;
    if (s == 0) {
      // State 0 loops on the rest: a star, then at most one step to a later state (which
      // can come back to 0 itself).
      body = listed + "*";
      if (!moves.empty()) {
        body += " (";
        for (size_t i = 0; i < moves.size(); ++i) body += (i ? " | " : "") + moves[i];
        body += ")?";
      }
    } else {
      body = "(" + listed + " " + names[0];
      for (const std::string& m : moves) body += " | " + m;
      body += ")?";
    }
    bodies_[names[s]] = body;
  }
  text_rules_[std::string(forbidden)] = names[0];
  return names[0];
}

std::string GbnfWriter::str() const {
  std::string out;
  auto emit = [&](const std::string& name) { out += fmt::format("{} ::= {}\n", name, bodies_.at(name)); };
  if (bodies_.count("root")) emit("root");
  for (const std::string& name : order_) {
    if (name != "root") emit(name);
  }
  return out;
}

}  // namespace moetier::grammar
