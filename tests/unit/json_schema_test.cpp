// JSON Schema -> GBNF: golden grammars for small schemas, number ranges checked against a
// brute-force matcher of the generated alternatives, and errors for what a grammar here
// cannot express. (The grammar engine is tested on its own; these check the text.)
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/number_range.h"
#include "grammar/schema_pattern.h"

namespace moetier::grammar {
namespace {

using nlohmann::ordered_json;

std::string convert(const char* schema) {
  auto r = json_schema_to_gbnf(ordered_json::parse(schema));
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : "";
}

std::string error_of(const char* schema) {
  auto r = json_schema_to_gbnf(ordered_json::parse(schema));
  EXPECT_FALSE(r.is_ok()) << schema;
  return r.is_ok() ? "" : r.status().message();
}

// The rule `name ::= ...` of a grammar, "" when absent.
std::string rule_of(const std::string& grammar, const std::string& name) {
  const std::string head = name + " ::= ";
  size_t p = grammar.rfind("\n" + head);
  p = grammar.compare(0, head.size(), head) == 0 ? 0 : (p == std::string::npos ? p : p + 1);
  if (p == std::string::npos) return "";
  const size_t e = grammar.find('\n', p);
  return grammar.substr(p + head.size(), e - p - head.size());
}

// A GBNF expression of only literals, digit classes, ( | ) ? and {m,n} turned into an
// ECMAScript regex, to check generated number ranges by brute force.
std::string to_regex(const std::string& g) {
  std::string out;
  for (size_t i = 0; i < g.size(); ++i) {
    const char c = g[i];
    if (c == ' ') continue;
    if (c == '"') {
      for (++i; g[i] != '"'; ++i) out += (g[i] == '.' || g[i] == '-') ? std::string("\\") + g[i] : std::string(1, g[i]);
    } else {
      out += c;
    }
  }
  return out;
}

TEST(JsonSchema, ObjectWithRequiredOptionalAndNoExtras) {
  const std::string g = convert(R"({"type":"object","properties":{"name":{"type":"string"},
      "age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
      "required":["name"],"additionalProperties":false})");
  EXPECT_EQ(rule_of(g, "root"), R"("{" ws name-kv ("," ws age-kv)? ("," ws tags-kv)? "}")");
  EXPECT_EQ(rule_of(g, "name-kv"), R"("\"name\"" ws ":" ws string ws)");
  EXPECT_EQ(rule_of(g, "age"), R"(([0-9] | [1-9] [0-9] | "1" ([0-4] [0-9] | "5" "0")))");
  EXPECT_EQ(rule_of(g, "tags"), R"("[" ws (string ws ("," ws string ws){0,2})? "]")");
  EXPECT_EQ(rule_of(g, "ws"), R"((" " | "\n" [ \t]{0,20})?)");
  EXPECT_EQ(g.substr(0, 5), "root ");  // root comes first
}

TEST(JsonSchema, MissingAdditionalPropertiesAllowsExtrasAfterDeclaredOnes) {
  const std::string g = convert(R"({"type":"object","properties":{"a":{"type":"boolean"}}})");
  EXPECT_EQ(rule_of(g, "root"),
            R"("{" ws (a-kv ("," ws additional-kv)* | additional-kv ("," ws additional-kv)*)? "}")");
  EXPECT_EQ(rule_of(g, "additional-kv"), R"(string ws ":" ws value ws)");
  // The option turns the default around.
  auto strict = json_schema_to_gbnf(ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"boolean"}}})"),
                                    {.extra_properties_by_default = false});
  ASSERT_TRUE(strict.is_ok());
  EXPECT_EQ(rule_of(*strict, "root"), R"("{" ws (a-kv)? "}")");
}

TEST(JsonSchema, OptionalOnlyObjectsNeedNoLeadingComma) {
  const std::string g = convert(R"({"properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}},
      "additionalProperties":false})");
  EXPECT_EQ(rule_of(g, "root"),
            R"("{" ws (a-kv ("," ws b-kv)? ("," ws c-kv)? | b-kv ("," ws c-kv)? | c-kv)? "}")");
}

TEST(JsonSchema, EnumConstNullableAndTypeArrays) {
  EXPECT_EQ(rule_of(convert(R"({"enum":["red", 1, null, {"k":[true]}]})"), "root"),
            R"("\"red\"" | "1" | "null" | "{\"k\":[true]}")");
  EXPECT_EQ(rule_of(convert(R"({"const":"a\"b"})"), "root"), R"("\"a\\\"b\"")");
  EXPECT_EQ(rule_of(convert(R"({"type":"string","nullable":true})"), "root"), "string | null");
  EXPECT_EQ(rule_of(convert(R"({"type":["string","null"],"maxLength":4})"), "root"), R"(("\"" char{0,4} "\"") | null)");
}

TEST(JsonSchema, RecursiveRefsAndDefinitions) {
  const std::string g = convert(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},
      "$ref":"#/$defs/node"})");
  EXPECT_EQ(rule_of(g, "root"), "node");
  EXPECT_EQ(rule_of(g, "node"), R"("{" ws node-v-kv "," ws node-next-kv "}")");
  EXPECT_EQ(rule_of(g, "node-next"), "node | null");
  const std::string d = convert(R"({"definitions":{"id":{"type":"string","format":"uuid"}},"type":"array","items":{"$ref":"#/definitions/id"}})");
  EXPECT_EQ(rule_of(d, "root"), R"("[" ws (id ws ("," ws id ws)*)? "]")");
  EXPECT_EQ(rule_of(d, "id"), R"("\"" uuid "\"")");
}

TEST(JsonSchema, AllOfMergesObjects) {
  const std::string g = convert(R"({"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
      {"properties":{"b":{"type":"boolean"}},"required":["b"],"additionalProperties":false}]})");
  EXPECT_EQ(rule_of(g, "root"), R"("{" ws a-kv "," ws b-kv "}")");
  EXPECT_NE(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})").find("no 'type' in common"), std::string::npos);
}

TEST(JsonSchema, ArraysTuplesAndCounts) {
  EXPECT_EQ(rule_of(convert(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false,"minItems":1})"),
                    "root"),
            R"("[" ws string ws ("," ws integer ws)? "]")");
  EXPECT_EQ(rule_of(convert(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":2})"), "root"),
            R"("[" ws boolean ws ("," ws boolean ws) "]")");
  EXPECT_EQ(rule_of(convert(R"({"type":"array","items":{"type":"boolean"},"minItems":1})"), "root"),
            R"("[" ws boolean ws ("," ws boolean ws)* "]")");
  EXPECT_EQ(rule_of(convert(R"({"type":"array","maxItems":0})"), "root"), R"("[" ws "]")");
}

TEST(JsonSchema, StringFormatsAndPatterns) {
  const std::string g = convert(R"({"type":"string","format":"date-time"})");
  EXPECT_EQ(rule_of(g, "root"), R"("\"" date-time "\"")");
  EXPECT_EQ(rule_of(g, "date-time"), R"(date "T" time)");
  EXPECT_EQ(rule_of(convert(R"({"type":"string","format":"email"})"), "root"), "string");  // annotation only
  EXPECT_EQ(rule_of(convert(R"({"type":"string","pattern":"^[a-z\"]+\\d{2}$"})"), "pattern"), R"(([a-z] | "\\\"")+ [0-9]{2})");
  // Unanchored sides match any characters.
  EXPECT_EQ(rule_of(convert(R"({"type":"string","pattern":"ab|c"})"), "pattern"), R"(char* ("ab" | "c") char*)");
  EXPECT_EQ(rule_of(convert(R"({"type":"string","pattern":"^(?:x|y.)?z{1,3}?$"})"), "pattern"),
            R"((("x" | "y" [^"\\\x00-\x1F]))? "z"{1,3})");
}

TEST(JsonSchemaPattern, RawFormKeepsCharactersAsTheyAre) {
  auto r = pattern_to_gbnf("^a\"\\n[^<]$", StringForm::kRaw, "c");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(*r, "\"a\\\"\\n\" [^<]");
  auto j = pattern_to_gbnf("^a\"\\n$", StringForm::kJson, "c");
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(*j, R"("a\\\"\\n")");  // the JSON text a\"\n
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  for (const char* kw : {"not", "if", "patternProperties", "minProperties", "multipleOf", "contains", "propertyNames"}) {
    const std::string schema = fmt::format(R"({{"type":"object","properties":{{"x":{{"{}":{{}}}}}}}})", kw);
    auto r = json_schema_to_gbnf(ordered_json::parse(schema));
    ASSERT_FALSE(r.is_ok()) << kw;
    EXPECT_NE(r.status().message().find(fmt::format("'{}'", kw)), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("#/properties/x"), std::string::npos) << r.status().message();
  }
  EXPECT_NE(error_of(R"({"type":"array","uniqueItems":true})").find("uniqueItems"), std::string::npos);
  EXPECT_EQ(convert(R"({"type":"array","uniqueItems":false,"title":"t","description":"d","examples":[1]})").empty(), false);
}

TEST(JsonSchema, BadInputsAreErrors) {
  EXPECT_NE(error_of(R"~({"type":"string","pattern":"a(?=b)"})~").find("lookahead"), std::string::npos);
  EXPECT_NE(error_of(R"~({"type":"string","pattern":"(a)\\1"})~").find("back-references"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"a^b"})").find("'^'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"\\bword"})").find("word boundaries"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"(ab"})").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"https://example.com/s.json"})").find("only local $ref"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"number","minimum":0.5})").find("not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","minimum":5,"maximum":4})").find("above the maximum"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"frob"})").find("unknown type"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","required":["x"],"additionalProperties":false})").find("'x' is required"),
            std::string::npos);
  EXPECT_NE(error_of("false").find("accepts no value"), std::string::npos);
}

TEST(JsonSchema, AnyObjectGrammar) {
  const std::string g = json_any_gbnf();
  EXPECT_EQ(rule_of(g, "root"), "object");
  EXPECT_EQ(rule_of(g, "value"), "object | array | string | number | boolean | null");
}

// Every integer in a window around the bounds: inside exactly when the grammar matches.
TEST(NumberRange, IntegerRangesMatchExactly) {
  const std::pair<std::optional<int64_t>, std::optional<int64_t>> cases[] = {
      {0, 150}, {17, 1234}, {-5, 150}, {-1234, -17}, {1, std::nullopt}, {std::nullopt, -3}, {0, 0}, {-99, 99}, {100, 100999}};
  for (auto [lo, hi] : cases) {
    const std::regex re(to_regex(integer_range_gbnf(lo, hi)));
    for (int64_t n = -1300; n <= 102000; n += (n > 1300 && n < 99000 ? 97 : 1)) {
      const bool inside = (!lo || n >= *lo) && (!hi || n <= *hi);
      EXPECT_EQ(std::regex_match(std::to_string(n), re), inside) << n << " in [" << lo.value_or(-999999) << ", " << hi.value_or(999999) << "]";
    }
    EXPECT_FALSE(std::regex_match("007", re));
    EXPECT_FALSE(std::regex_match("-0", re));
  }
}

TEST(NumberRange, DecimalRangesMatchExactly) {
  struct Case {
    std::optional<NumberBound> lo, hi;
  };
  const Case cases[] = {{NumberBound{0}, NumberBound{1}},          {NumberBound{0, true}, NumberBound{10}},
                        {NumberBound{-3}, NumberBound{-1}},        {NumberBound{-2, true}, NumberBound{2, true}},
                        {std::nullopt, NumberBound{0, true}},      {NumberBound{5}, std::nullopt}};
  const char* samples[] = {"0", "0.0", "0.5", "1", "1.0", "1.25", "-1", "-1.5", "-3", "-3.0", "-3.01", "-2", "-2.5",
                           "2", "2.0", "1.999", "9.75", "10", "10.0", "10.01", "-0.5", "5", "4.999", "123.5", "-0"};
  for (const Case& c : cases) {
    const std::regex re(to_regex(number_range_gbnf(c.lo, c.hi)));
    for (const char* s : samples) {
      const double x = std::stod(s);
      bool inside = true;
      if (c.lo) inside &= c.lo->exclusive ? x > c.lo->value : x >= c.lo->value;
      if (c.hi) inside &= c.hi->exclusive ? x < c.hi->value : x <= c.hi->value;
      if (std::string(s) == "-0") continue;  // "-0" is 0: either answer is valid JSON for 0
      EXPECT_EQ(std::regex_match(s, re), inside) << s << " with " << number_range_gbnf(c.lo, c.hi);
    }
  }
}

// Counts the grammar cannot honour are errors, not ignored or clamped.
TEST(JsonSchema, CountsAreWholeNumbersWithinTheGrammarLimit) {
  for (const char* schema : {R"({"type":"array","maxItems":"5"})", R"({"type":"array","maxItems":1e30})",
                             R"({"type":"array","minItems":-1})", R"({"type":"string","maxLength":2.5})",
                             R"({"type":"string","minLength":20000})"}) {
    EXPECT_FALSE(json_schema_to_gbnf(nlohmann::ordered_json::parse(schema)).is_ok()) << schema;
  }
  EXPECT_TRUE(json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":"array","maxItems":10000})")).is_ok());
  // A keyword of the wrong JSON type is an error, not an exception.
  EXPECT_FALSE(json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":"integer","minimum":"3"})")).is_ok());
}

// What the converter writes, run through the grammar engine: every grammar parses, accepts
// a valid instance and refuses an invalid one (the writer and the parser agree on GBNF).
TEST(JsonSchema, TheEngineRunsWhatTheConverterWrites) {
  struct Case {
    const char* schema;
    const char* valid;
    const char* invalid;
  };
  const Case cases[] = {
      {R"({"type":"string","pattern":"^[a-z0-]{2}$"})", R"("a-")", R"("a_")"},
      {R"({"type":"string","pattern":"^[\\^\\]\\[\\\\-]+$"})", R"("^]-")", R"("a")"},
      {R"({"type":"string","pattern":"^[^a-c]x$"})", R"("dx")", R"("ax")"},
      {R"({"type":"string","pattern":"^[az0-]{,5}$"})", R"("a{,5}")", R"("aa")"},
      {R"({"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":120}},"required":["n"]})",
       R"({"n": 42})", R"({"n": 121})"},
      {R"({"enum":["a-b","^",1,null]})", R"("^")", R"("b")"},
      {R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2})", "[true,false]", "[]"},
      {R"({"type":"string","format":"date"})", R"("2026-12-02")", R"("2026-13-02")"},
      {R"({"type":"string","format":"date-time"})", R"("2026-12-02T12:30:00-02:00")", R"("2026-12-02T25:00:00Z")"},
  };
  for (const Case& c : cases) {
    auto gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(c.schema), {.extra_properties_by_default = false});
    ASSERT_TRUE(gbnf.is_ok()) << c.schema << ": " << gbnf.status().message();
    auto g = Grammar::parse(*gbnf);
    ASSERT_TRUE(g.is_ok()) << c.schema << ": " << g.status().message() << "\n" << *gbnf;
    auto shared = std::make_shared<const Grammar>(std::move(g).value());
    auto accepts = [&](const char* text) {
      auto m = GrammarMatcher::create(shared);
      return m->accept_bytes(text) && m->can_end();
    };
    EXPECT_TRUE(accepts(c.valid)) << c.schema << " should accept " << c.valid << "\n" << *gbnf;
    EXPECT_FALSE(accepts(c.invalid)) << c.schema << " should refuse " << c.invalid << "\n" << *gbnf;
  }
}

// Whitespace between tokens is tight (llama.cpp bounds it for the same reason): nothing, one
// space, or one newline and an indent of at most 20 spaces or tabs, in schema grammars and in
// json_object's alike. A sampler cannot spend a reply's token budget on blank lines.
TEST(JsonSchema, WhitespaceIsOneSpaceOrOneNewlineAndABoundedIndent) {
  const std::string schema_gbnf = convert(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
  for (const std::string& gbnf : {schema_gbnf, json_any_gbnf()}) {
    auto g = Grammar::parse(gbnf);
    ASSERT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
    auto shared = std::make_shared<const Grammar>(std::move(g).value());
    auto accepts = [&](const std::string& text) {
      auto m = GrammarMatcher::create(shared);
      return m->accept_bytes(text) && m->can_end();
    };
    EXPECT_TRUE(accepts(R"({"city":"Paris"})"));
    EXPECT_TRUE(accepts(R"({ "city": "Paris" })"));
    EXPECT_TRUE(accepts("{\n  \"city\": \"Paris\"\n}"));
    EXPECT_TRUE(accepts("{\n\t\t\"city\": \"Paris\"\n}")) << "an indent of tabs";
    EXPECT_FALSE(accepts("{\"city\":\t\"Paris\"}")) << "a tab alone";
    EXPECT_TRUE(accepts("{\n" + std::string(20, ' ') + "\"city\": \"Paris\"}"));
    EXPECT_FALSE(accepts("{\n" + std::string(21, ' ') + "\"city\": \"Paris\"}")) << "indent above 20";
    EXPECT_FALSE(accepts("{\"city\"\n         \t\t\t  \n\n\t\t\t:\"Paris\"}")) << "several newlines";
    EXPECT_FALSE(accepts("{\"city\":  \"Paris\"}")) << "two spaces";
    EXPECT_FALSE(accepts("{\"city\": \n\"Paris\"}")) << "a space, then a newline";
  }
}

}  // namespace
}  // namespace moetier::grammar
