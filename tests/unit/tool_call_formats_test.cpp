// The tool-call formats beyond Qwen's (tool_formats/): detection from template text,
// whole replies, the streaming parser against the whole-text parser on random splits,
// malformed and cut-off blocks staying content, and the forcing grammar run through the
// grammar engine (a well-formed call is accepted, junk refused).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "server/tool_calls.h"
#include "support/tool_call_stream.h"

namespace moetier::server {
namespace {

using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}}},
  {"type":"function","function":{"name":"python","parameters":{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}}}
])");

const std::vector<ToolSpec>& specs() {
  static const std::vector<ToolSpec> s = *parse_tools(kTools);
  return s;
}

ParsedReply parse(std::string_view text, ToolCallFormat format) {
  return parse_tool_calls(text, {.format = format, .tools = &specs(), .id_prefix = "call_x_"});
}

// Feeds `text` in random pieces; the concatenated deltas must equal the whole-text result.
void check_stream(const std::string& text, ToolCallFormat format, std::mt19937& rng) {
  testing::check_tool_call_stream(text, {.format = format, .tools = &specs(), .id_prefix = "c"}, rng);
}

// The forcing grammar of `format` (tool_choice required), run by the grammar engine.
struct ForcedGrammar {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string text;
  bool accepts(std::string_view s) const {
    auto m = grammar::GrammarMatcher::create(grammar);
    return m->accept_bytes(s) && m->can_end();
  }
};

ForcedGrammar forced(ToolCallFormat format, bool parallel, ToolChoice choice = {.mode = ToolChoiceMode::kRequired}) {
  auto gbnf = build_tool_call_grammar({.format = format, .tools = &specs(), .choice = choice, .parallel_tool_calls = parallel});
  EXPECT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto g = grammar::Grammar::parse(**gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << **gbnf;
  return {std::make_shared<const grammar::Grammar>(std::move(g).value()), **gbnf};
}

// What a forced reply parses to must be the call(s) the grammar was asked for.
void expect_forced_round_trip(ToolCallFormat format, const std::string& reply, size_t n_calls) {
  const ParsedReply r = parse(reply, format);
  EXPECT_EQ(r.content, "") << reply;
  EXPECT_EQ(r.tool_calls.size(), n_calls) << reply;
}

TEST(ToolCallFormats, DetectsEachFamilyFromItsTemplateText) {
  const std::pair<const char*, ToolCallFormat> cases[] = {
      {"<|start_header_id|>{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}", ToolCallFormat::kLlama3Json},
      {"<|start_header_id|>{{ '>>>all\\n' + message['content'] }}", ToolCallFormat::kFunctionaryV32},
      {"{{ '<|python_tag|>' + x }}{{ '<function=' + name + '>' }}", ToolCallFormat::kFunctionaryV31},
      {"{{- \"[TOOL_CALLS][\" }}", ToolCallFormat::kMistralNemo},
      {"{{- '[TOOL_CALLS]' + name + '[ARGS]' + args }}", ToolCallFormat::kMistralArgs},
      {"{{- '[TOOL_CALLS]' + name + '[CALL_ID]' + id + '[ARGS]' + args }}", ToolCallFormat::kMistralCallId},
      {"<|START_ACTION|>[ {\"tool_call_id\": \"0\" }]<|END_ACTION|>", ToolCallFormat::kCommandR7B},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>' + name + '\\n```json\\n'", ToolCallFormat::kDeepSeekR1},
      {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + args", ToolCallFormat::kDeepSeekV31},
      // Hermes 2 Pro / 3 write Qwen3's JSON form; Qwen3.5's XML form keeps its own.
      {"<tool_call>\\n{\"name\": ...", ToolCallFormat::kQwen3Json},
      {"<tool_call>\\n<function=", ToolCallFormat::kQwen35Xml},
  };
  for (const auto& [text, format] : cases) {
    EXPECT_EQ(detect_tool_call_format(text), format) << text;
  }
  EXPECT_NE(known_tool_call_formats().find("Llama 3.x"), std::string::npos);
  EXPECT_EQ(tool_call_format_name(ToolCallFormat::kMistralNemo), "Mistral Nemo [TOOL_CALLS][{json}]");
}

// llama.cpp's template collection (models/templates), when MOETIER_LLAMA_CPP_DIR points at a
// checkout: the families its server tests use get the format its chat parsers read.
TEST(ToolCallFormats, DetectsLlamaCppTemplates) {
  const char* dir = std::getenv("MOETIER_LLAMA_CPP_DIR");
  if (!dir) GTEST_SKIP() << "set MOETIER_LLAMA_CPP_DIR to a llama.cpp checkout";
  const std::map<std::string, ToolCallFormat> expected = {
      {"meta-llama-Llama-3.1-8B-Instruct", ToolCallFormat::kLlama3Json},
      {"meta-llama-Llama-3.2-3B-Instruct", ToolCallFormat::kLlama3Json},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolCallFormat::kLlama3Json},
      {"meetkai-functionary-medium-v3.1", ToolCallFormat::kFunctionaryV31},
      {"meetkai-functionary-medium-v3.2", ToolCallFormat::kFunctionaryV32},
      {"mistralai-Mistral-Nemo-Instruct-2407", ToolCallFormat::kMistralNemo},
      {"Mistral-Small-3.2-24B-Instruct-2506", ToolCallFormat::kMistralCallId},
      {"unsloth-mistral-Devstral-Small-2507", ToolCallFormat::kMistralArgs},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", ToolCallFormat::kQwen3Json},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolCallFormat::kQwen3Json},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use", ToolCallFormat::kCommandR7B},
      {"llama-cpp-deepseek-r1", ToolCallFormat::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ToolCallFormat::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-V3.1", ToolCallFormat::kDeepSeekV31},
      {"Qwen-Qwen2.5-7B-Instruct", ToolCallFormat::kQwen3Json},
      {"Qwen3.5-4B", ToolCallFormat::kQwen35Xml},
      {"Qwen3-Coder", ToolCallFormat::kQwen35Xml},
      {"google-gemma-2-2b-it", ToolCallFormat::kNone},
      {"microsoft-Phi-3.5-mini-instruct", ToolCallFormat::kNone},
  };
  for (const auto& [name, format] : expected) {
    const std::filesystem::path path = std::filesystem::path(dir) / "models/templates" / (name + ".jinja");
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(tool_call_format_name(detect_tool_call_format(ss.str())), tool_call_format_name(format)) << name;
  }
}

// ---- Llama 3.x

TEST(ToolCallFormats, Llama3) {
  constexpr auto F = ToolCallFormat::kLlama3Json;
  ParsedReply r = parse("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}", F);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].id, "call_x_0");
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris","days":2})");

  r = parse("<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}", F);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.content, "");

  r = parse("Let me run it.\n<|python_tag|>print(6 * 7)", F);  // Llama 3.1's ipython: code for "python"
  EXPECT_EQ(r.content, "Let me run it.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "python");
  EXPECT_EQ(r.tool_calls[0].arguments, R"x({"code":"print(6 * 7)"})x");

  // JSON that is not a call of this request stays content: no arguments key, unknown name,
  // another "type", cut off.
  for (const char* text : {"Use {\"a\": {\"name\": \"get_time\", \"b\": 1}} here", "{\"name\": \"nope\", \"parameters\": {}}",
                           "{\"type\": \"x\", \"name\": \"get_time\", \"parameters\": {}}", "a { b } c {",
                           "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"U", "{ \"na"}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }

  std::mt19937 rng(7);
  for (const char* t : {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"a}b{\\\"c\"}}",
                        "x {\"a\": 1} {\"name\":\"get_time\",\"parameters\":{\"tz\":\"UTC\"}}  tail {",
                        "<|python_tag|>{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}",
                        "Run:\n<|python_tag|>import os\nprint(os.getcwd())\n", "{ \"type\": \"function\", \"name\": \"get_time\", \"parameters\": {}}"}) {
    check_stream(t, F, rng);
  }

  const ForcedGrammar g = forced(F, /*parallel=*/true);
  const std::string call = "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}";
  EXPECT_TRUE(g.accepts(call)) << g.text;
  EXPECT_FALSE(g.accepts(call + "\n" + call)) << "one call per reply";
  EXPECT_FALSE(g.accepts("{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}"));
  EXPECT_FALSE(g.accepts("{\"name\": \"get_time\", \"parameters\": {}}"));  // tz is required
  EXPECT_FALSE(g.accepts("Hello"));
  expect_forced_round_trip(F, call, 1);
}

// ---- Functionary v3.2 (the text starts after the prompt's ">>>")

TEST(ToolCallFormats, FunctionaryV32) {
  constexpr auto F = ToolCallFormat::kFunctionaryV32;
  ParsedReply r = parse("get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"tz\": \"UTC\"}", F);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"tz":"UTC"})");

  r = parse("all\nHello there.", F);
  EXPECT_EQ(r.content, "Hello there.");
  EXPECT_TRUE(r.tool_calls.empty());
  r = parse("all\nLet me check.\n>>>get_time\n{\"tz\": \"UTC\"}", F);
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 1u);

  // Not a recipient line, an unknown function, a cut-off call: content, without the
  // prompt's ">>>".
  for (const char* text : {"just some text", "nope\n{\"a\": 1}", "get_time\n{\"tz\": ", "", "get_time"}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }

  std::mt19937 rng(8);
  for (const char* t : {"get_weather\n{\"city\": \"Paris\"}>>>get_time\n{\"tz\": \"UTC\"}", "all\nHi >> there >>>get_time\n{\"tz\": \"x\"}\n",
                        "some text >>>all\nmore", "get_time\n{\"tz\": "}) {
    check_stream(t, F, rng);
  }

  const ForcedGrammar g = forced(F, /*parallel=*/true);
  const std::string two = "get_time\n{\"tz\": \"UTC\"}>>>get_weather\n{\"city\": \"Oslo\"}";
  EXPECT_TRUE(g.accepts("get_time\n{\"tz\": \"UTC\"}")) << g.text;
  EXPECT_TRUE(g.accepts(two));
  EXPECT_FALSE(g.accepts("all\nHello"));
  EXPECT_FALSE(g.accepts(">>>get_time\n{\"tz\": \"UTC\"}"));  // the prompt wrote the first ">>>"
  expect_forced_round_trip(F, two, 2);
  EXPECT_FALSE(build_tool_call_grammar({.format = F, .tools = &specs(), .choice = {.mode = ToolChoiceMode::kRequired},
                                        .allow_leading_text = true})
                   .is_ok());
}

// ---- Functionary v3.1

TEST(ToolCallFormats, FunctionaryV31) {
  constexpr auto F = ToolCallFormat::kFunctionaryV31;
  ParsedReply r = parse("<function=get_time>{\"tz\": \"UTC\"}</function>", F);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_time");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.content, "");
  r = parse("<|python_tag|>print(1)", F);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"x({"code":"print(1)"})x");
  for (const char* text : {"<function=get_time>{oops}</function>", "<function=a b>{}</function>", "<function=get_time>{\"tz\": 1"}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }
  std::mt19937 rng(9);
  for (const char* t : {"Sure. <function=get_time>{\"tz\": \"UTC\"}</function>\n<function=get_weather>{\"city\": \"Oslo\"}</function>",
                        "<func <function=get_time>{oops}</function> end"}) {
    check_stream(t, F, rng);
  }
  const ForcedGrammar g = forced(F, true, {.mode = ToolChoiceMode::kFunction, .function = "get_weather"});
  const std::string call = "<function=get_weather>{\"city\": \"Oslo\", \"days\": 3}</function>";
  EXPECT_TRUE(g.accepts(call)) << g.text;
  EXPECT_TRUE(g.accepts(call + call));
  EXPECT_FALSE(g.accepts("<function=get_time>{\"tz\": \"UTC\"}</function>"));  // not the named function
  EXPECT_FALSE(g.accepts("<function=get_weather>{\"city\": \"Oslo\", \"days\": 9}</function>"));
  expect_forced_round_trip(F, call + call, 2);
}

// ---- Mistral

TEST(ToolCallFormats, MistralNemo) {
  constexpr auto F = ToolCallFormat::kMistralNemo;
  ParsedReply r = parse(
      "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}, \"id\": \"abcDEF123\"}, "
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
      F);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].id, "abcDEF123");  // the model's id: the template checks it next turn
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.tool_calls[1].id.size(), 9u);  // made up, also 9 alphanumerics
  EXPECT_NE(r.tool_calls[1].id, parse_tool_calls("[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}]",
                                                 {.format = F, .tools = &specs(), .id_prefix = "call_y_"})
                                    .tool_calls.at(0).id);
  for (char c : r.tool_calls[1].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << r.tool_calls[1].id;

  for (const char* text : {"[TOOL_CALLS] oops", "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]", "[TOOL_CALLS][]",
                           "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\"", "[TOOL_CA"}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }
  std::mt19937 rng(10);
  for (const char* t : {"Checking.\n[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\": \"]\"}, \"id\": \"abcDEF123\"}]",
                        "[TOOL [TOOL_CALLS] oops [TOOL_CALLS][{\"name\":\"get_time\",\"arguments\":{}}] end"}) {
    check_stream(t, F, rng);
  }
  const ForcedGrammar g = forced(F, true);
  const std::string two =
      "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}, \"id\": \"abcDEF123\"}, "
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}, \"id\": \"zzzzzzzz9\"}]";
  EXPECT_TRUE(g.accepts(two)) << g.text;
  EXPECT_FALSE(g.accepts("[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}, \"id\": \"short\"}]"));
  EXPECT_FALSE(g.accepts("[TOOL_CALLS][]"));
  expect_forced_round_trip(F, two, 2);
}

TEST(ToolCallFormats, MistralArgs) {
  constexpr auto F = ToolCallFormat::kMistralArgs;
  const std::string two = "[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}";
  ParsedReply r = parse(two, F);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[1].name, "get_weather");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.tool_calls[0].id.size(), 9u);
  for (const char* text : {"[TOOL_CALLS]get_time", "[TOOL_CALLS]get_time[ARGS]nope", "[TOOL_CALLS]get time[ARGS]{}"}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }
  std::mt19937 rng(11);
  check_stream("Hi [TOOL_CALLS]get_time[AR [TOOL_CALLS]get_time[ARGS]{\"tz\": \"[ARGS]\"} bye", F, rng);
  check_stream(two, F, rng);
  const ForcedGrammar g = forced(F, true);
  EXPECT_TRUE(g.accepts(two)) << g.text;
  EXPECT_FALSE(g.accepts("get_time[ARGS]{\"tz\": \"UTC\"}"));
  expect_forced_round_trip(F, two, 2);
}

TEST(ToolCallFormats, MistralCallId) {
  constexpr auto F = ToolCallFormat::kMistralCallId;
  const std::string two =
      "[TOOL_CALLS]get_time[CALL_ID]abcDEF123[ARGS]{\"tz\": \"UTC\"}[TOOL_CALLS]get_weather[CALL_ID]000000002[ARGS]{\"city\": \"Oslo\"}";
  ParsedReply r = parse(two, F);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].id, "abcDEF123");
  EXPECT_EQ(r.tool_calls[1].id, "000000002");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"city":"Oslo"})");
  // Without [CALL_ID] (Devstral's form) the call still reads; a bad id does not.
  r = parse("[TOOL_CALLS]get_time[ARGS]{}", F);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].id.size(), 9u);
  for (const char* text : {"[TOOL_CALLS]get_time[CALL_ID]short[ARGS]{}", "[TOOL_CALLS]get_time[CALL_I", "[TOOL_CALLS]get_time[CALL_ID]abcDEF123"}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }
  std::mt19937 rng(14);
  check_stream(two, F, rng);
  check_stream("a [TOOL_CALLS]get_time[CALL_ID]x[ARGS]{} b [TOOL_CALLS]get_time[CALL_ID]abcDEF123[ARGS]{\"tz\": \"[\"}", F, rng);
  const ForcedGrammar g = forced(F, true);
  EXPECT_TRUE(g.accepts(two)) << g.text;
  EXPECT_FALSE(g.accepts("[TOOL_CALLS]get_time[ARGS]{\"tz\": \"UTC\"}"));
  EXPECT_FALSE(g.accepts("[TOOL_CALLS]get_time[CALL_ID]abc[ARGS]{\"tz\": \"UTC\"}"));
  expect_forced_round_trip(F, two, 2);
}

// ---- Command R7B

TEST(ToolCallFormats, CommandR7B) {
  constexpr auto F = ToolCallFormat::kCommandR7B;
  const std::string action =
      "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}},\n"
      "    {\"tool_call_id\": \"1\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n]<|END_ACTION|>";
  ParsedReply r = parse(action, F);
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.tool_calls[1].name, "get_weather");
  r = parse("<|START_RESPONSE|>Hello there.<|END_RESPONSE|>", F);
  EXPECT_EQ(r.content, "Hello there.");
  EXPECT_TRUE(r.tool_calls.empty());
  for (const char* text : {"<|START_ACTION|>[{\"tool_name\": \"get_time\"]<|END_ACTION|>", "<|START_ACTION|>[{\"tool_call_id\": \"0\","}) {
    r = parse(text, F);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }
  std::mt19937 rng(12);
  check_stream(action, F, rng);
  check_stream("<|START_RESPONSE|>Hi <|START_ACT <|END_RESPONSE|>", F, rng);
  const ForcedGrammar g = forced(F, true);
  EXPECT_TRUE(g.accepts(action)) << g.text;
  EXPECT_FALSE(g.accepts("<|START_RESPONSE|>Hi<|END_RESPONSE|>"));
  EXPECT_FALSE(forced(F, false).accepts(action));  // parallel_tool_calls false: one call
  expect_forced_round_trip(F, action, 2);
}

// ---- DeepSeek R1 / V3.1

TEST(ToolCallFormats, DeepSeek) {
  const std::string r1 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"UTC\"}\n```<｜tool▁call▁end｜>\n"
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ParsedReply r = parse("I will look.\n" + r1, ToolCallFormat::kDeepSeekR1);
  EXPECT_EQ(r.content, "I will look.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(r.tool_calls[1].name, "get_weather");
  const std::string v31 =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\": \"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  r = parse(v31, ToolCallFormat::kDeepSeekV31);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"tz":"UTC"})");
  for (const std::string& text : {std::string("<｜tool▁calls▁begin｜>junk<｜tool▁calls▁end｜>"), r1.substr(0, r1.size() - 10)}) {
    r = parse(text, ToolCallFormat::kDeepSeekR1);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.tool_calls.empty()) << text;
  }
  std::mt19937 rng(13);
  check_stream("I will look.\n" + r1 + " Done.", ToolCallFormat::kDeepSeekR1, rng);
  check_stream(v31, ToolCallFormat::kDeepSeekV31, rng);
  ForcedGrammar g = forced(ToolCallFormat::kDeepSeekR1, true);
  EXPECT_TRUE(g.accepts(r1)) << g.text;
  EXPECT_FALSE(g.accepts("<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>"));
  expect_forced_round_trip(ToolCallFormat::kDeepSeekR1, r1, 2);
  // R1's templates end the prompt inside "<think>\n": the thought and "</think>" come first.
  auto gbnf = build_tool_call_grammar({.format = ToolCallFormat::kDeepSeekR1, .tools = &specs(),
                                       .choice = {.mode = ToolChoiceMode::kRequired}, .inside_think = true});
  ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message();
  auto parsed = grammar::Grammar::parse(**gbnf);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  g = {std::make_shared<const grammar::Grammar>(std::move(parsed).value()), **gbnf};
  EXPECT_TRUE(g.accepts("Two calls.\n</think>\n\n" + r1)) << g.text;
  EXPECT_FALSE(g.accepts(r1));
  EXPECT_FALSE(g.accepts("Two calls.\n</think>\n\nNo calls."));
  g = forced(ToolCallFormat::kDeepSeekV31, false);
  EXPECT_TRUE(g.accepts(v31)) << g.text;
  EXPECT_FALSE(g.accepts(r1));
}

// ---- Hermes 2 Pro (Qwen3's JSON form) through the engine, as the other formats.

TEST(ToolCallFormats, QwenFormsThroughTheGrammarEngine) {
  ForcedGrammar g = forced(ToolCallFormat::kQwen3Json, true);
  const std::string call = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
  EXPECT_TRUE(g.accepts(call + "\n" + call)) << g.text;
  EXPECT_FALSE(g.accepts("<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>"));
  g = forced(ToolCallFormat::kQwen35Xml, false);
  EXPECT_TRUE(g.accepts("<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>")) << g.text;
  EXPECT_FALSE(g.accepts("<tool_call>\n<function=get_time>\n</function>\n</tool_call>"));
}

}  // namespace
}  // namespace moetier::server
