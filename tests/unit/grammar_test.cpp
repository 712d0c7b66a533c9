// GBNF grammar engine: parser errors and syntax, the matcher on strings (with a reference
// recognizer for random grammars), partial UTF-8, masking on a hand-made vocabulary, and a
// fuzz-style robustness test. The real Qwen3 vocabulary is in grammar_vocab_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "support/json_gbnf.h"

namespace moetier::grammar {
namespace {

std::shared_ptr<const Grammar> parse_ok(std::string_view text, std::string_view root = "root") {
  auto g = Grammar::parse(text, root);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n--- grammar:\n" << text;
  if (!g.is_ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(g).value());
}

std::string parse_error(std::string_view text, const GrammarLimits& limits = {}) {
  auto g = Grammar::parse(text, "root", limits);
  EXPECT_FALSE(g.is_ok()) << "parsed:\n" << text;
  if (g.is_ok()) return "";
  EXPECT_EQ(g.status().kind(), ErrorKind::kBadInput);
  return g.status().message();
}

GrammarMatcher matcher(std::string_view text) {
  auto m = GrammarMatcher::create(parse_ok(text));
  EXPECT_TRUE(m.is_ok());
  return std::move(m).value();
}

// The whole string is a sentence of the grammar.
bool matches(std::string_view grammar, std::string_view input) {
  auto m = matcher(grammar);
  return m.accept_bytes(input) && m.can_end();
}

// ---------------------------------------------------------------------------------------
// Parse errors: each message checked.

TEST(GrammarParse, ErrorsNameLineAndColumn) {
  EXPECT_EQ(parse_error(""), "empty grammar: no rules");
  EXPECT_EQ(parse_error("  # only a comment\n\n"), "empty grammar: no rules");
  EXPECT_EQ(parse_error("root ::= a\n"), "1:10: undefined rule 'a'");
  EXPECT_EQ(parse_error("root ::= \"x\"\n  | foo-bar\n"), "2:5: undefined rule 'foo-bar'");
  EXPECT_EQ(parse_error("start ::= \"x\"\n"), "missing root rule 'root'");
  EXPECT_EQ(parse_error("root ::= \"abc\n"), "1:10: unterminated string literal");
  EXPECT_EQ(parse_error("root ::= [a-z\n"), "1:10: unterminated character class");
  EXPECT_EQ(parse_error("root ::= \"\\q\""), "1:11: bad escape '\\q'");
  EXPECT_EQ(parse_error("root ::= \"\\x4\""), "1:11: bad escape '\\x': expected 2 hex digits");
  EXPECT_EQ(parse_error("root ::= [\\u12G4]"), "1:11: bad escape '\\u': expected 4 hex digits");
  EXPECT_EQ(parse_error("root ::= \"\\U00110000\""), "1:11: bad escape: U+110000 is above U+10FFFF");
  EXPECT_EQ(parse_error("root ::= [z-a]"), "1:11: bad character range 'z-a': end U+0061 before start U+007A");
  EXPECT_EQ(parse_error("root ::= \"x\"{3,2}"), "1:13: bad repetition bounds: maximum 2 is less than minimum 3");
  EXPECT_EQ(parse_error("root ::= \"x\"{a}"), "1:14: bad repetition bounds: expected a number, found 'a'");
  EXPECT_EQ(parse_error("root ::= \"x\"{2"), "1:15: bad repetition bounds: expected '}', found end of input");
  EXPECT_EQ(parse_error("root ::= \"x\"{,}"), "1:13: bad repetition bounds: '{,}' needs a maximum");
  EXPECT_EQ(parse_error("root ::= \"x\"{99999}"), "1:14: bad repetition bounds: count above the limit of 10000");
  EXPECT_EQ(parse_error("root ::= * \"x\""), "1:10: '*' must follow an item to repeat");
  EXPECT_EQ(parse_error("root ::= (\"x\" \"y\"\n"), "1:10: unterminated group: missing ')'");
  EXPECT_EQ(parse_error("root ::= \"x\")"), "1:13: unexpected ')'");
  EXPECT_EQ(parse_error("root = \"x\""), "1:6: expected '::=' after rule name 'root', found '='");
  EXPECT_EQ(parse_error("root ::= \"x\" a ::= \"y\""), "1:14: a new rule must start on its own line");
  EXPECT_EQ(parse_error("root ::= (\"x\"\na ::= \"y\")"), "2:1: expected ')' or '|', found 'a'");
  EXPECT_EQ(parse_error("root ::= \"x\"\nroot ::= \"y\""), "2:1: rule 'root' defined twice");
  EXPECT_EQ(parse_error("root ::= \"\xff\""), "1:11: invalid UTF-8 in string literal");
  EXPECT_EQ(parse_error("root ::= \"x\"\n!x ::= \"y\""), "2:1: expected a rule name, found '!'");
}

TEST(GrammarParse, LeftRecursionIsAnErrorNotAHang) {
  EXPECT_EQ(parse_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]"),
            "2:1: left recursion in rule 'expr': expr -> expr (a rule must match some input before it can refer to "
            "itself again)");
  // Indirect, and hidden behind a rule that can match nothing.
  EXPECT_EQ(parse_error("root ::= a\na ::= b \"x\"\nb ::= c\nc ::= a | \"y\""),
            "2:1: left recursion in rule 'a': a -> b -> c -> a (a rule must match some input before it can refer "
            "to itself again)");
  EXPECT_EQ(parse_error("root ::= opt root \"x\" | \"y\"\nopt ::= \"o\"?"),
            "1:1: left recursion in rule 'root': root -> root (a rule must match some input before it can refer "
            "to itself again)");
  // A loop through the last item only is fine: (x?)* and right recursion.
  EXPECT_TRUE(matches("root ::= (\"a\"?)* \"b\"", "aab"));
  EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"", "aaab"));
}

TEST(GrammarParse, LimitsGuardPathologicalInput) {
  EXPECT_EQ(parse_error("root ::= \"x\"", GrammarLimits{.max_input_bytes = 4}),
            "grammar is 12 bytes, more than the limit of 4");
  EXPECT_EQ(parse_error("root ::= " + std::string(200, '(') + std::string(200, ')')),
            "1:138: parentheses nested deeper than 128");
  EXPECT_EQ(parse_error("root ::= \"x\"{10000}{1000}"),
            "1:26: grammar too large: more than 2097152 elements after expanding repetitions");
  EXPECT_EQ(parse_error("root ::= \"x\"{0,100}", GrammarLimits{.max_rules = 50}),
            "1:20: grammar too large: more than 50 rules");
  // Deep nesting within the limit and long repetition chains parse and run.
  EXPECT_TRUE(matches("root ::= " + std::string(100, '(') + "\"x\"" + std::string(100, ')'), "x"));
  EXPECT_TRUE(matches("root ::= \"x\"{0,5000}", std::string(4999, 'x')));
}

// ---------------------------------------------------------------------------------------
// Syntax features.

TEST(GrammarParse, LiteralsAndEscapes) {
  EXPECT_TRUE(matches("root ::= \"hello\"", "hello"));
  EXPECT_FALSE(matches("root ::= \"hello\"", "hell"));
  EXPECT_FALSE(matches("root ::= \"hello\"", "hello!"));
  EXPECT_TRUE(matches(R"(root ::= "a\n\t\r\\\"\[\]")", "a\n\t\r\\\"[]"));
  EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(matches("root ::= \"h\xC3\xA9llo \xE4\xBD\xA0\"", "h\xC3\xA9llo \xE4\xBD\xA0"));
  EXPECT_TRUE(matches("root ::= \"\"", ""));
  EXPECT_TRUE(matches("root ::=\nx ::= \"y\"", ""));  // an empty rule ends before the next rule
  EXPECT_TRUE(matches("root ::= x |\nx ::= \"y\"", ""));
  EXPECT_TRUE(matches("root ::= ", ""));
  EXPECT_FALSE(matches("root ::= \"\"", "x"));
}

TEST(GrammarParse, CharacterClasses) {
  const char* g = "root ::= [a-cx0-9_]";
  for (const char* ok : {"a", "b", "c", "x", "0", "5", "9", "_"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"d", "w", "A", "-", ""}) EXPECT_FALSE(matches(g, bad)) << bad;
  EXPECT_TRUE(matches("root ::= [^a-z]", "A"));
  EXPECT_TRUE(matches("root ::= [^a-z]", "\xE4\xBD\xA0"));
  EXPECT_FALSE(matches("root ::= [^a-z]", "q"));
  EXPECT_TRUE(matches("root ::= [a-]", "-"));        // '-' before ']' is literal
  EXPECT_TRUE(matches("root ::= [-a]", "-"));
  EXPECT_TRUE(matches(R"(root ::= [\]\[\\"])", "]"));
  EXPECT_TRUE(matches(R"(root ::= [\x00-\x1F])", "\x1f"));
  EXPECT_TRUE(matches("root ::= [\xCE\xB1-\xCF\x89]+", "\xCE\xB1\xCE\xB2\xCF\x89"));  // alpha..omega
  EXPECT_FALSE(matches("root ::= []", "a"));          // empty class: nothing
  EXPECT_TRUE(matches("root ::= [^]", "a"));          // negated empty class: anything
  EXPECT_TRUE(matches("root ::= . . .", "a\xF0\x9F\x98\x80\n"));
  EXPECT_FALSE(matches("root ::= .", ""));
}

TEST(GrammarParse, RepetitionOperators) {
  const char* star = "root ::= \"a\"* \"b\"";
  EXPECT_TRUE(matches(star, "b"));
  EXPECT_TRUE(matches(star, "aaaab"));
  const char* plus = "root ::= \"ab\"+";  // applies to the whole literal
  EXPECT_FALSE(matches(plus, ""));
  EXPECT_TRUE(matches(plus, "ababab"));
  EXPECT_FALSE(matches(plus, "aba"));
  EXPECT_TRUE(matches("root ::= \"a\"? \"b\"", "b"));
  EXPECT_TRUE(matches("root ::= \"a\"? \"b\"", "ab"));
  EXPECT_FALSE(matches("root ::= \"a\"? \"b\"", "aab"));
  for (int n = 0; n <= 6; ++n) {
    const std::string s(static_cast<size_t>(n), 'x');
    EXPECT_EQ(matches("root ::= \"x\"{3}", s), n == 3) << n;
    EXPECT_EQ(matches("root ::= \"x\"{2,}", s), n >= 2) << n;
    EXPECT_EQ(matches("root ::= \"x\"{2,4}", s), n >= 2 && n <= 4) << n;
    EXPECT_EQ(matches("root ::= \"x\"{,3}", s), n <= 3) << n;
    EXPECT_EQ(matches("root ::= \"x\"{0}", s), n == 0) << n;
    EXPECT_EQ(matches("root ::= \"x\"{ 1 , 2 }", s), n == 1 || n == 2) << n;
    EXPECT_EQ(matches("root ::= (\"x\" \"x\"){1,2}", s), n == 2 || n == 4) << n;
    EXPECT_EQ(matches("root ::= \"x\"{2}*", s), n % 2 == 0) << n;  // a repetition repeated
  }
}

TEST(GrammarParse, RulesCommentsAndMultiLine) {
  const char* g = R"(# a comment line
root ::= greeting ", " name-2 # trailing comment
greeting ::= "hello" | "hi" |
             "hey"
name-2 ::= (
    "world"   # inside a group newlines are free
  | "there"
  )
  | "you"
)";
  for (const char* ok : {"hello, world", "hi, there", "hey, you"}) EXPECT_TRUE(matches(g, ok)) << ok;
  EXPECT_FALSE(matches(g, "hello, "));
  EXPECT_FALSE(matches(g, "yo, you"));
  // Windows line endings and a custom start rule.
  auto m = GrammarMatcher::create(parse_ok("a ::= \"x\" b\r\nb ::= \"y\"\r\n", "a"));
  ASSERT_TRUE(m.is_ok());
  EXPECT_TRUE(m->accept_bytes("xy"));
  EXPECT_TRUE(m->can_end());
  // Generated rules are named after the rule they come from, like llama.cpp.
  const auto grammar = parse_ok("root ::= (\"a\" | \"b\")* x\nx ::= [0-9]{1,2}");
  EXPECT_EQ(grammar->to_string(),
            "root ::= root_2 x\n"
            "root_1 ::= [a] | [b]\n"
            "root_2 ::= root_1 root_2 |\n"
            "x ::= [0-9] x_1\n"
            "x_1 ::= [0-9] |\n");
}

// ---------------------------------------------------------------------------------------
// Matcher behaviour.

TEST(GrammarMatcher, RejectLeavesStateUnchangedAndResetRestarts) {
  auto m = matcher("root ::= \"ab\" \"c\"+");
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_FALSE(m.accept_bytes("bd"));  // 'b' fits but 'd' does not: nothing consumed
  EXPECT_TRUE(m.accept_bytes("bc"));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("cc"));
  EXPECT_TRUE(m.accept_bytes(""));
  EXPECT_FALSE(m.accept_bytes("x"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.is_dead());
  m.reset();
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.accept_bytes("abc"));
}

TEST(GrammarMatcher, PartialUtf8AcrossTokens) {
  auto m = matcher("root ::= \"\xC3\xA9\" \"\xE4\xBD\xA0\"+ \"!\"");  // é 你+ !
  EXPECT_TRUE(m.accept_bytes("\xC3"));
  EXPECT_TRUE(m.inside_char());
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_bytes("\x28"));      // not a continuation byte
  EXPECT_FALSE(m.accept_bytes("\xA8"));      // completes è, which the grammar does not allow
  EXPECT_TRUE(m.accept_bytes("\xA9\xE4"));
  EXPECT_TRUE(m.accept_bytes("\xBD"));
  EXPECT_FALSE(m.accept_bytes("\xA1"));      // 你 is E4 BD A0
  EXPECT_TRUE(m.accept_bytes("\xA0\xE4\xBD\xA0!"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.inside_char());

  // A lead byte is refused when no allowed character starts with it.
  auto g = matcher("root ::= [\xCE\xB1-\xCF\x89]");  // U+03B1..U+03C9
  EXPECT_FALSE(g.accept_bytes("\xD0"));
  EXPECT_TRUE(g.accept_bytes("\xCF"));
  EXPECT_FALSE(g.accept_bytes("\x8A"));  // U+03CA is past omega
  EXPECT_TRUE(g.accept_bytes("\x89"));
  EXPECT_TRUE(g.can_end());

  // Invalid UTF-8 is never accepted, even by '.'.
  for (const char* bad : {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xF4\x90\x80\x80", "\xF5", "\xFF"}) {
    auto any = matcher("root ::= .*");
    EXPECT_FALSE(any.accept_bytes(bad)) << bad;
  }
  auto any = matcher("root ::= .*");
  EXPECT_TRUE(any.accept_bytes("\xF0\x9F"));
  EXPECT_TRUE(any.accept_bytes("\x98"));
  EXPECT_FALSE(any.can_end());
  EXPECT_TRUE(any.accept_bytes("\x80"));
  EXPECT_TRUE(any.can_end());
}

TEST(GrammarMatcher, AmbiguousGrammarIsRefusedNotSlow) {
  // Every split of the input into nested roots is a separate stack: their number grows
  // exponentially with the length. Past AutomatonLimits::max_stacks the input is refused.
  auto m = matcher("root ::= . root root root | ");
  int accepted = 0;
  for (int i = 0; i < 40; ++i) accepted += m.accept_bytes("a");
  EXPECT_GE(accepted, 3);
  EXPECT_LT(accepted, 40);
  EXPECT_FALSE(m.is_dead());  // a refused byte leaves the matcher where it was
}

constexpr const char* kJsonGrammar = testing::kJsonGbnf;

TEST(GrammarMatcher, JsonGrammarAcceptsAndRejects) {
  const auto grammar = parse_ok(kJsonGrammar);
  ASSERT_NE(grammar, nullptr);
  auto check = [&](std::string_view text) {
    auto m = GrammarMatcher::create(grammar);
    return m->accept_bytes(text) && m->can_end();
  };
  for (const char* ok : {R"({})", R"([])", R"(0)", R"(-12.5e+3)", R"("x")", R"(true)", R"( null )",
                         R"({"a": [1, 2, {"b": null}], "c": "d\n\u00e9\"", "e": -0.5})",
                         "[\"h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80\"]",
                         "{\n  \"k\" : [ ]\n}\n", R"([[[[[[[[[[1]]]]]]]]]])"}) {
    EXPECT_TRUE(check(ok)) << ok;
  }
  for (const char* bad : {R"({)", R"({"a" 1})", R"([1,])", R"(01)", R"(1.)", R"("\x")", "\"a\nb\"",
                          R"({a: 1})", R"(tru)", R"([1 2])", R"({"a":1,})", R"(.5)", R"(-)", ""}) {
    EXPECT_FALSE(check(bad)) << bad;
  }
}

// ---------------------------------------------------------------------------------------
// Masking on a hand-made vocabulary.

std::vector<int32_t> allowed_ids(const GrammarMatcher& m, const TokenVocabulary& vocab) {
  std::vector<float> logits(static_cast<size_t>(vocab.size()) + 2, 1.0f);  // 2 padded rows
  m.mask_logits(logits, vocab);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == 1.0f) ids.push_back(static_cast<int32_t>(i));
    else EXPECT_EQ(logits[i], -INFINITY);
  }
  return ids;
}

TEST(GrammarMask, ExactMaskOnSmallVocabulary) {
  //                        0    1    2     3      4     5    6   7       8     9      10
  TokenVocabulary vocab({"a", "b", "ab", "abc", "ba", "c", "", "<eos>", "\xC3", "\xA9", "\xC3\xA9",
                         //  11        12    13
                         "\xA9" "c", "bb", "a"},
                        {7});
  EXPECT_EQ(vocab.size(), 14);
  auto m = matcher("root ::= \"a\" \"b\"* (\"\xC3\xA9\" | \"c\")");
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{0, 2, 3, 13}));
  ASSERT_TRUE(m.accept_token(2, vocab));  // "ab"
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{1, 5, 8, 10, 12}));
  EXPECT_FALSE(m.accept_token(7, vocab));  // EOG before the grammar is complete
  EXPECT_FALSE(m.accept_token(6, vocab));  // empty piece
  EXPECT_FALSE(m.accept_token(4, vocab));  // "ba": 'a' cannot follow
  ASSERT_TRUE(m.accept_token(8, vocab));   // first byte of é
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{9}));  // only the byte that completes é
  ASSERT_TRUE(m.accept_token(9, vocab));
  EXPECT_TRUE(m.can_end());
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{7}));  // only EOG
  EXPECT_TRUE(m.accept_token(7, vocab));

  auto c = matcher("root ::= \"a\" \"b\"* (\"\xC3\xA9\" | \"c\")");
  ASSERT_TRUE(c.accept_token(0, vocab));
  ASSERT_TRUE(c.accept_token(3 - 2, vocab));  // "b"
  ASSERT_TRUE(c.accept_token(5, vocab));       // "c"
  EXPECT_EQ(allowed_ids(c, vocab), (std::vector<int32_t>{7}));
}

TEST(GrammarMask, EndOfGenerationOnlyWhenComplete) {
  TokenVocabulary vocab({"1", "2", "12", "+", "<eot>", "<eos>"}, {4, 5});
  auto m = matcher("root ::= [0-9]+ (\"+\" [0-9]+)*");
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{0, 1, 2}));
  ASSERT_TRUE(m.accept_token(2, vocab));
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  ASSERT_TRUE(m.accept_token(3, vocab));
  EXPECT_EQ(allowed_ids(m, vocab), (std::vector<int32_t>{0, 1, 2}));
  // The mask agrees with accept_token token by token.
  std::vector<uint8_t> allowed;
  m.fill_allowed(vocab, allowed);
  for (int32_t id = 0; id < vocab.size(); ++id) {
    auto copy = matcher("root ::= [0-9]+ (\"+\" [0-9]+)*");
    ASSERT_TRUE(copy.accept_bytes("12+"));
    EXPECT_EQ(copy.accept_token(id, vocab), allowed[static_cast<size_t>(id)] != 0) << id;
  }
}

// ---------------------------------------------------------------------------------------
// Random grammars: the matcher against a straightforward reference recognizer, and no crash
// on random (mostly invalid) grammar text.

// Sets of end positions of each rule from each start (memoized; a rule met again at the same
// position while being computed contributes nothing new, which is exact for the only cycles
// the parser allows: loops through a last item without consuming input).
class ReferenceRecognizer {
 public:
  ReferenceRecognizer(const Grammar& g, std::u32string s) : g_(g), s_(std::move(s)) {}
  bool accepts() { return rule(g_.root(), 0).count(s_.size()) > 0; }

 private:
  std::set<size_t> seq(uint32_t p, size_t i) {
    const Element& e = g_.elements()[p];
    if (e.kind == ElementKind::kEnd) return {i};
    if (e.kind == ElementKind::kChars) {
      if (i < s_.size() && g_.char_sets()[e.index].contains(s_[i])) return seq(p + 1, i + 1);
      return {};
    }
    std::set<size_t> out;
    for (const size_t j : rule(e.index, i)) {
      const auto rest = seq(p + 1, j);
      out.insert(rest.begin(), rest.end());
    }
    return out;
  }
  std::set<size_t> rule(uint32_t r, size_t i) {
    const auto key = std::make_pair(r, i);
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second;
    memo_[key] = {};  // in progress
    std::set<size_t> out;
    for (const uint32_t alt : g_.rules()[r].alternatives) {
      const auto ends = seq(alt, i);
      out.insert(ends.begin(), ends.end());
    }
    memo_[key] = out;
    return out;
  }
  const Grammar& g_;
  std::u32string s_;
  std::map<std::pair<uint32_t, size_t>, std::set<size_t>> memo_;
};

// Items of rule `self`: literals, classes, groups and references to later rules only (no
// recursion: a recursive, highly ambiguous grammar can need exponentially many stacks, see
// GrammarMatcher.AmbiguousGrammarIsRefusedNotSlow).
std::string random_item(std::mt19937& rng, int self, int n_rules, int depth) {
  static const char* kAtoms[] = {"\"a\"", "\"b\"", "\"ab\"", "[a-c]", "[^a]", "\"\xC3\xA9\"", ".", "\"\""};
  std::string item;
  const int kind = static_cast<int>(rng() % 10);
  if (kind < 6 || depth > 2 || (kind < 8 && self + 1 >= n_rules)) {
    item = kAtoms[rng() % 8];
  } else if (kind < 8) {
    item = "r" + std::to_string(self + 1 + static_cast<int>(rng() % static_cast<unsigned>(n_rules - self - 1)));
  } else {
    item = "(" + random_item(rng, self, n_rules, depth + 1) + " " + random_item(rng, self, n_rules, depth + 1) +
           " | " + random_item(rng, self, n_rules, depth + 1) + ")";
  }
  static const char* kOps[] = {"", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "{,2}"};
  return item + kOps[rng() % 10];
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b == 0xC3 && i + 1 < s.size()) {
      out += static_cast<char32_t>(((b & 0x1F) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3F));
      i += 2;
    } else {
      out += static_cast<char32_t>(b);
      i += 1;
    }
  }
  return out;
}

TEST(GrammarFuzz, RandomGrammarsAgreeWithReferenceRecognizer) {
  std::mt19937 rng(1234);
  int n_grammars = 0;
  int n_accepted = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const int n_rules = 1 + static_cast<int>(rng() % 4);
    std::string text;
    for (int r = 0; r < n_rules; ++r) {
      text += (r == 0 ? std::string("root") : "r" + std::to_string(r)) + " ::=";
      const int n_alts = 1 + static_cast<int>(rng() % 3);
      for (int a = 0; a < n_alts; ++a) {
        text += a ? " |" : "";
        const int n_items = static_cast<int>(rng() % 4);
        for (int i = 0; i < n_items; ++i) text += " " + random_item(rng, r, n_rules, 0);
      }
      text += "\n";
    }
    auto parsed = Grammar::parse(text);
    if (!parsed.is_ok()) {
      ADD_FAILURE() << parsed.status().message() << "\n" << text;
      continue;
    }
    ++n_grammars;
    const auto grammar = std::make_shared<const Grammar>(std::move(parsed).value());
    auto m = GrammarMatcher::create(grammar);
    ASSERT_TRUE(m.is_ok());
    static const char* kPieces[] = {"a", "b", "c", "\xC3\xA9", "d"};
    for (int s = 0; s < 30; ++s) {
      std::string input;
      const int len = static_cast<int>(rng() % 7);
      for (int k = 0; k < len; ++k) input += kPieces[rng() % 5];
      m->reset();
      bool ok = true;
      for (const char c : input) ok = ok && m->accept_bytes(std::string_view(&c, 1));
      const bool got = ok && m->can_end();
      const bool want = ReferenceRecognizer(*grammar, decode(input)).accepts();
      ASSERT_EQ(got, want) << "input '" << input << "'\n" << text << "\nlowered:\n" << grammar->to_string();
      n_accepted += want;
    }
  }
  EXPECT_EQ(n_grammars, 300);
  EXPECT_GT(n_accepted, 200);
}

TEST(GrammarFuzz, RandomTextNeverCrashes) {
  std::mt19937 rng(99);
  static const char* kPieces[] = {"root", " ::= ", "::=", "a", "\"", "\"x\"", "[", "]", "^", "-", "(", ")", "|",
                                  "*", "+", "?", "{", "}", ",", "2", "99", "\\", "\\x", "\\u00", "#", "\n", " ",
                                  ".", "root ::= ", "\n| ", "\xC3", "\xA9", "r1", "\nr1 ::= ", "\t", "\r"};
  TokenVocabulary vocab({"a", "x", "\"", "[", "\xC3", "\xA9", "ab", " ", "\n", "2", "<e>"}, {10});
  int n_ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) text += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    auto g = Grammar::parse(text);
    if (!g.is_ok()) {
      EXPECT_FALSE(g.status().message().empty());
      continue;
    }
    ++n_ok;
    auto m = GrammarMatcher::create(std::make_shared<const Grammar>(std::move(g).value()));
    std::vector<float> logits(static_cast<size_t>(vocab.size()));
    for (int step = 0; step < 8; ++step) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      m->mask_logits(logits, vocab);
      std::vector<int32_t> ok_ids;
      for (int32_t id = 0; id < vocab.size(); ++id) {
        if (logits[static_cast<size_t>(id)] == 0.0f) ok_ids.push_back(id);
      }
      if (ok_ids.empty()) break;
      const int32_t id = ok_ids[rng() % ok_ids.size()];
      ASSERT_TRUE(m->accept_token(id, vocab)) << "masked-in token " << id << " refused; grammar:\n" << text;
      if (vocab.is_eog(id)) break;
    }
  }
  EXPECT_GT(n_ok, 5);
}

}  // namespace
}  // namespace moetier::grammar
