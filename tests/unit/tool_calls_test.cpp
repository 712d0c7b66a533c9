// Tool calls: format detection, request validation, parsing both Qwen formats (several
// calls, text around them, malformed and cut-off blocks), the streaming parser against the
// whole-text parser on many random splits, and the forcing grammar's text.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/tool_calls.h"
#include "support/tool_call_stream.h"

namespace moetier::server {
namespace {

using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"metric":{"type":"boolean"},
                  "opts":{"type":"object"}},
    "required":["city"],"additionalProperties":false}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}}}
])");

std::vector<ToolSpec> tools() { return *parse_tools(kTools); }

ParsedReply parse(std::string_view text, ToolCallFormat format) {
  static const std::vector<ToolSpec> specs = tools();
  return parse_tool_calls(text, {.format = format, .tools = &specs, .id_prefix = "call_x_"});
}

TEST(ToolCalls, DetectsTheFormatFromTheTemplate) {
  EXPECT_EQ(detect_tool_call_format("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"), ToolCallFormat::kQwen35Xml);
  EXPECT_EQ(detect_tool_call_format("{{- '<tool_call>\\n{\"name\": \"' }}"), ToolCallFormat::kQwen3Json);
  EXPECT_EQ(detect_tool_call_format("{{ message.content }}"), ToolCallFormat::kNone);
}

TEST(ToolCalls, ParsesQwen3JsonCallsWithTextBefore) {
  const ParsedReply r = parse(
      "I'll check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Asia/Tokyo\"}}\n</tool_call>",
      ToolCallFormat::kQwen3Json);
  EXPECT_EQ(r.content, "I'll check both.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].id, "call_x_0");
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Tokyo"})");
  EXPECT_EQ(r.tool_calls[1].id, "call_x_1");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"tz":"Asia/Tokyo"})");
}

TEST(ToolCalls, ArgumentsAsStringAndMissingArguments) {
  const ParsedReply r = parse("<tool_call>{\"name\":\"get_time\",\"arguments\":\"{\\\"tz\\\":\\\"UTC\\\"}\"}</tool_call>"
                              "<tool_call>{\"name\":\"get_time\"}</tool_call>",
                              ToolCallFormat::kQwen3Json);
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
  EXPECT_EQ(r.content, "");
}

TEST(ToolCalls, ParsesQwen35XmlCallsConvertingByType) {
  const ParsedReply r = parse(
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
      "<parameter=metric>\nTrue\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_time>\n<parameter=tz>\n123\n</parameter>\n</function>\n</tool_call>",
      ToolCallFormat::kQwen35Xml);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"New York","days":3,"metric":true,"opts":{"a":[1,2]}})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"tz":"123"})");  // a string parameter stays a string
}

TEST(ToolCalls, XmlValuesKeepInnerNewlinesAndFallBackToText) {
  const ParsedReply r = parse(
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nline 1\n\nline 2\n</parameter>\n<parameter=days>\nthree\n</parameter>\n"
      "</function>\n</tool_call>",
      ToolCallFormat::kQwen35Xml);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"line 1\n\nline 2","days":"three"})");
}

TEST(ToolCalls, MalformedAndCutOffBlocksStayContent) {
  const std::string bad = "<tool_call>\n{\"name\": oops}\n</tool_call>";
  ParsedReply r = parse("Hi " + bad + " bye", ToolCallFormat::kQwen3Json);
  EXPECT_EQ(r.content, "Hi " + bad + " bye");
  EXPECT_TRUE(r.tool_calls.empty());

  const std::string cut = "Sure.\n<tool_call>\n{\"name\": \"get_time\", \"argum";
  r = parse(cut, ToolCallFormat::kQwen3Json);
  EXPECT_EQ(r.content, cut);
  EXPECT_TRUE(r.tool_calls.empty());

  r = parse("a <tool_ca", ToolCallFormat::kQwen3Json);
  EXPECT_EQ(r.content, "a <tool_ca");

  // One good call, then a cut-off one.
  r = parse("<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get",
            ToolCallFormat::kQwen35Xml);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.content, "<tool_call>\n<function=get");

  // XML missing </function>, and text after the parameters.
  r = parse("<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</tool_call>", ToolCallFormat::kQwen35Xml);
  EXPECT_TRUE(r.tool_calls.empty());
  r = parse("<tool_call>\n<function=get_time>\nhello\n</function>\n</tool_call>", ToolCallFormat::kQwen35Xml);
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ToolCalls, TextWithoutCallsIsUnchanged) {
  for (const char* text : {"", "  plain text \n\n", "<tools> are not <tool_call", "a < b and c > d\n"}) {
    EXPECT_EQ(parse(text, ToolCallFormat::kQwen3Json).content, text);
    EXPECT_EQ(parse(text, ToolCallFormat::kNone).content, text);
  }
  // kNone never extracts calls.
  const std::string call = "<tool_call>{\"name\":\"get_time\"}</tool_call>";
  EXPECT_EQ(parse(call, ToolCallFormat::kNone).content, call);
}

TEST(ToolCalls, ContentAroundCallsIsJoinedByOneNewline) {
  const ParsedReply r = parse("Before.  \n<tool_call>{\"name\":\"get_time\"}</tool_call>\n\n  After.\n",
                              ToolCallFormat::kQwen3Json);
  EXPECT_EQ(r.content, "Before.\nAfter.\n");  // white space at the very end is the model's
  ASSERT_EQ(r.tool_calls.size(), 1u);
}

// Feeds `text` in random pieces; the concatenated deltas must equal the whole-text result.
void check_stream(const std::string& text, ToolCallFormat format, std::mt19937& rng) {
  static const std::vector<ToolSpec> specs = tools();
  testing::check_tool_call_stream(text, {.format = format, .tools = &specs, .id_prefix = "c"}, rng);
}

TEST(ToolCallStream, RandomSplitsGiveTheWholeTextResult) {
  std::mt19937 rng(1234);
  const char* json_texts[] = {
      "I'll check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Asia/Tokyo\"}}\n</tool_call>",
      "Before.  \n<tool_call>{\"name\":\"get_time\"}</tool_call>\n\n  After.\n",
      "Hi <tool_call>\n{\"name\": oops}\n</tool_call> bye <tool_call>{\"name\":\"get_time\"}</tool_call>",
      "<tools> and <tool_c <tool_call> <tool_call>{\"name\":\"x\"}</tool_call>  ",
      "Sure.\n<tool_call>\n{\"name\": \"get_time\", \"argum",
      "  \n\t plain  text with spaces  \n ",
  };
  for (const char* t : json_texts) check_stream(t, ToolCallFormat::kQwen3Json, rng);
  const char* xml_texts[] = {
      "Let me look.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n"
      "</tool_call>",
      "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get",
  };
  for (const char* t : xml_texts) check_stream(t, ToolCallFormat::kQwen35Xml, rng);
}

TEST(ToolCallStream, HoldsBackOnlyWhatCouldBeATag) {
  ToolCallStream s({.format = ToolCallFormat::kQwen3Json});
  EXPECT_EQ(s.push("Hello <to").content, "Hello");  // the space may precede a call; "<to" may start one
  EXPECT_EQ(s.push("ols> x").content, " <tools> x");
  ToolStreamDelta d = s.push("\n<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}");
  EXPECT_TRUE(d.empty());
  d = s.push("</tool_call>");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].to_json().dump(), R"({"index":0,"id":"call_0","type":"function","function":{"name":"f","arguments":""}})");
  EXPECT_EQ(d.tool_calls[1].to_json().dump(), R"({"index":0,"function":{"arguments":"{\"a\":1}"}})");
  EXPECT_TRUE(s.finish().empty());
}

TEST(ToolCalls, ValidatesToolsAndToolChoice) {
  auto err = [](const char* tools_json) {
    auto r = parse_tools(ordered_json::parse(tools_json));
    EXPECT_FALSE(r.is_ok()) << tools_json;
    return r.is_ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(err(R"({"type":"function"})").find("must be an array"), std::string::npos);
  EXPECT_NE(err(R"([{"type":"function","function":{"parameters":{}}}])").find("tools[0].function.name is missing"), std::string::npos);
  EXPECT_NE(err(R"([{"type":"retrieval"}])").find("tools[0].type"), std::string::npos);
  EXPECT_NE(err(R"([{"type":"function","function":{"name":"a b"}}])").find("\"a b\""), std::string::npos);
  EXPECT_NE(err(R"([{"function":{"name":"f"}},{"function":{"name":"f"}}])").find("defined twice"), std::string::npos);
  EXPECT_NE(err(R"([{"function":{"name":"f","parameters":{"type":"string"}}}])").find("\"type\": \"object\""), std::string::npos);
  EXPECT_NE(err(R"([{"function":{"name":"f","parameters":[1]}}])").find("JSON schema object"), std::string::npos);
  EXPECT_TRUE(parse_tools(ordered_json()).is_ok());
  EXPECT_EQ(parse_tools(ordered_json::parse(R"([{"function":{"name":"f"}}])"))->at(0).parameters.dump(),
            R"({"type":"object","properties":{}})");

  const std::vector<ToolSpec> specs = tools();
  auto choice = [&](const char* j) { return parse_tool_choice(ordered_json::parse(j), specs); };
  EXPECT_EQ(choice("null")->mode, ToolChoiceMode::kAuto);
  EXPECT_EQ(choice(R"("none")")->mode, ToolChoiceMode::kNone);
  EXPECT_EQ(choice(R"("required")")->mode, ToolChoiceMode::kRequired);
  EXPECT_EQ(choice(R"({"type":"function","function":{"name":"get_time"}})")->function, "get_time");
  EXPECT_NE(choice(R"({"type":"function","function":{"name":"nope"}})").status().message().find("\"nope\", which is not in 'tools'"),
            std::string::npos);
  EXPECT_NE(choice(R"("always")").status().message().find("\"always\""), std::string::npos);
  EXPECT_NE(choice(R"({"type":"function"})").status().message().find("tool_choice must look like"), std::string::npos);
  EXPECT_FALSE(parse_tool_choice("required", {}).is_ok());
}

std::string grammar(ToolGrammarParams p) {
  auto g = build_tool_call_grammar(p);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() && g->has_value() ? **g : "";
}

std::string rule_of(const std::string& g, const std::string& name) {
  const std::string head = name + " ::= ";
  size_t p = g.compare(0, head.size(), head) == 0 ? 0 : g.find("\n" + head);
  if (p == std::string::npos) return "";
  if (p) ++p;
  return g.substr(p + head.size(), g.find('\n', p) - p - head.size());
}

TEST(ToolCallGrammar, RequiredNamedAndParallel) {
  const std::vector<ToolSpec> specs = tools();
  // auto / none: no grammar.
  auto none = build_tool_call_grammar({.tools = &specs});
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());

  std::string g = grammar({.format = ToolCallFormat::kQwen3Json, .tools = &specs, .choice = {.mode = ToolChoiceMode::kRequired},
                           .parallel_tool_calls = false});
  EXPECT_EQ(rule_of(g, "root"), "call");
  EXPECT_EQ(rule_of(g, "call"), "call-get-weather | call-get-time");
  EXPECT_EQ(rule_of(g, "call-get-time"),
            R"("<tool_call>\n{\"name\": \"get_time\", \"arguments\": " "{" ws get-time-args-tz-kv "}" "}\n</tool_call>")");
  // (As llama.cpp's grammars, an object without additionalProperties takes no extra members.)
  EXPECT_EQ(rule_of(g, "get-weather-args-days"), "[1-7]");

  g = grammar({.format = ToolCallFormat::kQwen3Json, .tools = &specs,
               .choice = {.mode = ToolChoiceMode::kFunction, .function = "get_time"}, .parallel_tool_calls = true});
  EXPECT_EQ(rule_of(g, "root"), R"(call-get-time ("\n" call-get-time)*)");
  EXPECT_EQ(rule_of(g, "call-get-weather"), "");

  g = grammar({.format = ToolCallFormat::kQwen35Xml, .tools = &specs, .choice = {.mode = ToolChoiceMode::kRequired},
               .allow_think_block = true, .allow_leading_text = true});
  EXPECT_EQ(rule_of(g, "root"), R"(("<think>" think-text "</think>" after-think)? leading-text call ("\n" call)*)");
  EXPECT_EQ(rule_of(g, "call-get-weather"),
            R"("<tool_call>\n<function=get_weather>\n" get-weather-city-param get-weather-days-param? get-weather-metric-param? get-weather-opts-param? "</function>\n</tool_call>")");
  EXPECT_EQ(rule_of(g, "get-weather-city-param"), R"("<parameter=city>\n" param-text "\n</parameter>\n")");
  EXPECT_EQ(rule_of(g, "get-weather-days-param"), R"("<parameter=days>\n" [1-7] "\n</parameter>\n")");
  // Raw text up to the first "</parameter>": the substring automaton.
  EXPECT_EQ(rule_of(g, "param-text"), R"([^<]* ("<" param-text-1)?)");
  EXPECT_EQ(rule_of(g, "param-text-1"), R"(([^</] param-text | "<" param-text-1 | "/" param-text-2)?)");
  EXPECT_EQ(rule_of(g, "param-text-11"), R"(([^<>] param-text | "<" param-text-1)?)");
  EXPECT_EQ(rule_of(g, "leading-text"), R"([^<]* ("<" leading-text-1)?)");
}

TEST(ToolCallGrammar, Errors) {
  const std::vector<ToolSpec> specs = tools();
  auto g = build_tool_call_grammar({.format = ToolCallFormat::kNone, .tools = &specs, .choice = {.mode = ToolChoiceMode::kRequired}});
  EXPECT_FALSE(g.is_ok());
  const std::vector<ToolSpec> bad = *parse_tools(ordered_json::parse(
      R"([{"function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}}}}])"));
  g = build_tool_call_grammar({.format = ToolCallFormat::kQwen3Json, .tools = &bad, .choice = {.mode = ToolChoiceMode::kRequired}});
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("function \"f\""), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("uniqueItems"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace moetier::server
