// Writing GBNF text (llama.cpp's grammar syntax): quoting literals and character-class
// members, and a rule set that grows as a JSON schema or a tool-call format is walked.
// This only produces text; parsing and matching grammars is src/grammar's engine.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::grammar {

// A GBNF string literal matching exactly the UTF-8 bytes `text`: "..." with \" \\ \n \r \t
// escaped and other control bytes as \xHH; non-ASCII bytes are kept as they are.
std::string gbnf_literal(std::string_view text);

// One code point written for use inside a character class [...]: ] [ \ are escaped, - ^ and
// control characters written as \xHH (GBNF has no escape for - and ^).
std::string gbnf_class_char(char32_t cp);

// An ordered set of rules. Names are made from hints (only [a-zA-Z0-9-] survive) and made
// unique with a numeric suffix; a body already present under some name is reused, so shared
// sub-schemas become one rule. str() writes `root` first, then the others in creation order.
class GbnfWriter {
 public:
  // Adds `name_hint ::= body` (or finds the rule with that exact body) and returns its name.
  std::string add_rule(std::string_view name_hint, const std::string& body);
  // Fixed-name rules (primitives such as `ws`, `string`): added once, later calls return the
  // name. The body must be the same each time (it is ignored after the first call).
  std::string add_named(std::string_view name, const std::string& body);
  // Two-step form for recursion: reserve a name now, give its body once it is known.
  std::string reserve(std::string_view name_hint);
  void define(const std::string& name, const std::string& body);
  void set_root(const std::string& body) { define_or_add("root", body); }

  // Rule that matches any text (possibly empty) in which `forbidden` does not occur, as a
  // right-linear grammar of the substring automaton (KMP states): lets a grammar say "free
  // text up to the first `</think>`" exactly. `forbidden` must be non-empty ASCII. One rule
  // set per `forbidden` text (later calls return the first name).
  std::string add_text_without(std::string_view name_hint, std::string_view forbidden);

  std::string str() const;

 private:
  std::string unique_name(std::string_view hint);
  void define_or_add(const std::string& name, const std::string& body);

  std::vector<std::string> order_;              // names in creation order
  std::map<std::string, std::string> bodies_;   // name -> body ("" while reserved)
  std::map<std::string, std::string> by_body_;  // body -> name, for reuse
  std::map<std::string, std::string> text_rules_;  // forbidden text -> add_text_without's rule
};

}  // namespace moetier::grammar
