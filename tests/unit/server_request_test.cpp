// The server's pieces that need no model: OpenAI request parsing (every field's type and
// range, defaults from the command line) and the text stages after the detokenizer (stop
// strings and the <think> splitter), fed in every possible chunking.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/request.h"
#include "server/text_stream.h"

namespace moetier::server {
namespace {

using nlohmann::ordered_json;

ordered_json chat_body(ordered_json extra = ordered_json::object()) {
  ordered_json b = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

TEST(ServerRequest, DefaultsComeFromTheCommandLine) {
  RequestDefaults d{.sampling = {.temperature = 0.3f, .top_k = 7}, .n_predict = 99, .n_ctx_slot = 512};
  GenerationRequest r;
  ASSERT_FALSE(parse_chat_request(chat_body(), d, r));
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.3f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.max_tokens, 99);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.n_logprobs, -1);
  EXPECT_TRUE(r.cache_prompt);
  EXPECT_EQ(r.reasoning_format, ReasoningFormat::kAuto);
  // As llama-server, -n is a ceiling: a request asks for less, never for more.
  GenerationRequest fewer, more, unlimited;
  ASSERT_FALSE(parse_chat_request(chat_body({{"max_tokens", 10}}), d, fewer));
  EXPECT_EQ(fewer.max_tokens, 10);
  ASSERT_FALSE(parse_chat_request(chat_body({{"max_tokens", 5000}}), d, more));
  EXPECT_EQ(more.max_tokens, 99);
  ASSERT_FALSE(parse_chat_request(chat_body({{"max_tokens", -1}}), d, unlimited));
  EXPECT_EQ(unlimited.max_tokens, 99);
}

TEST(ServerRequest, FieldsAreReadWithTheirOpenAiAndLlamaCppNames) {
  RequestDefaults d{.n_ctx_slot = 512};
  GenerationRequest r;
  ASSERT_FALSE(parse_chat_request(chat_body({{"max_completion_tokens", 12},
                                             {"temperature", 0},
                                             {"top_p", 0.5},
                                             {"min_p", 0.1},
                                             {"seed", 42},
                                             {"stop", "END"},
                                             {"stream", true},
                                             {"stream_options", {{"include_usage", true}}},
                                             {"logprobs", true},
                                             {"top_logprobs", 4},
                                             {"presence_penalty", 1.5},
                                             {"temperature", nullptr},  // null = absent
                                             {"user", "ignored"},
                                             {"reasoning_format", "none"},
                                             {"chat_template_kwargs", {{"enable_thinking", false}}}}),
                                  d, r));
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.seed, 42u);
  ASSERT_EQ(r.stop.size(), 1u);
  EXPECT_EQ(r.stop[0], "END");
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.n_logprobs, 4);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.5f);
  EXPECT_EQ(r.reasoning_format, ReasoningFormat::kNone);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  GenerationRequest dev;
  ASSERT_FALSE(parse_chat_request({{"messages", {{{"role", "developer"}, {"content", "x"}}}}}, d, dev));
  EXPECT_EQ(dev.messages[0]["role"], "system");
  GenerationRequest unlimited;
  ASSERT_FALSE(parse_chat_request(chat_body({{"max_tokens", -1}, {"seed", -1}}), d, unlimited));
  EXPECT_EQ(unlimited.max_tokens, -1);
  EXPECT_EQ(unlimited.sampling.seed, kRandomSeed);
}

TEST(ServerRequest, BadFieldsNameTheField) {
  RequestDefaults d{.n_ctx_slot = 512};
  const std::vector<std::pair<ordered_json, std::string>> cases = {
      {{{"temperature", "x"}}, "temperature"},   {{{"max_tokens", 1LL << 31}}, "max_tokens"},
      {{{"max_tokens", -2}}, "max_tokens"},      {{{"top_k", 1.5}}, "top_k"},
      {{{"n", 17}}, "n"},                         {{{"stop", {1}}}, "stop"},
      {{{"stream_options", 3}}, "stream_options"}, {{{"reasoning_format", "x"}}, "reasoning_format"},
      {{{"frequency_penalty", 3}}, "frequency_penalty"}, {{{"logprobs", 1}}, "logprobs"},
      {{{"tools", "x"}}, "tools"},               {{{"chat_template_kwargs", 1}}, "chat_template_kwargs"},
      {{{"seed", 1e20}}, "seed"},                 {{{"repeat_penalty", 0}}, "repeat_penalty"},
  };
  for (const auto& [extra, param] : cases) {
    GenerationRequest r;
    auto e = parse_chat_request(chat_body(extra), d, r);
    ASSERT_TRUE(e) << extra.dump();
    EXPECT_EQ(e->http_status, 400);
    EXPECT_EQ(e->param, param) << extra.dump() << ": " << e->message;
    EXPECT_NE(e->message.find(param), std::string::npos) << e->message;
  }
}

TEST(ServerRequest, CompletionPromptsAsTextOrTokens) {
  RequestDefaults d;
  GenerationRequest a, b, c, m, n, e;
  ASSERT_FALSE(parse_completion_request({{"prompt", "hello"}}, d, a));
  EXPECT_EQ(a.prompts, (std::vector<ordered_json>{"hello"}));
  ASSERT_FALSE(parse_completion_request({{"prompt", {1, 2, 3}}, {"logprobs", 2}}, d, b));
  EXPECT_EQ(b.prompts, (std::vector<ordered_json>{{1, 2, 3}}));
  EXPECT_EQ(b.n_logprobs, 2);
  ASSERT_FALSE(parse_completion_request({{"prompt", {{4, 5}}}}, d, c));
  EXPECT_EQ(c.prompts, (std::vector<ordered_json>{{4, 5}}));
  // Several prompts: an array of strings or of token lists, one choice each.
  ASSERT_FALSE(parse_completion_request({{"prompt", {"a", "b"}}}, d, m));
  EXPECT_EQ(m.prompts.size(), 2u);
  ASSERT_FALSE(parse_completion_request({{"prompt", {{1}, {2, 3}}}}, d, n));
  EXPECT_EQ(n.prompts.size(), 2u);
  EXPECT_TRUE(parse_completion_request({{"prompt", {{1}, {2}}}, {"n", 2}}, d, e));  // n > 1 with several prompts
  EXPECT_TRUE(parse_completion_request({{"prompt", {-1}}}, d, e));
  EXPECT_TRUE(parse_completion_request({{"prompt", ""}}, d, e));
  EXPECT_TRUE(parse_completion_request({{"prompt", {1, "a"}}}, d, e));  // mixed: /completion only
  EXPECT_TRUE(parse_completion_request({{"prompt", "x"}, {"suffix", "y"}}, d, e));
  // /completion: ids and strings mixed are one prompt; prompt_string objects; no images.
  GenerationRequest x, y;
  ASSERT_FALSE(parse_native_completion_request({{"prompt", {"Once", 12, " upon"}}}, d, false, x));
  EXPECT_EQ(x.prompts.size(), 1u);
  ASSERT_FALSE(parse_native_completion_request({{"prompt", {{"prompt_string", "hi"}}}}, d, false, y));
  EXPECT_EQ(y.prompts, (std::vector<ordered_json>{"hi"}));
  EXPECT_TRUE(parse_native_completion_request({{"prompt", {{"prompt_string", "hi"}, {"multimodal_data", {"x"}}}}},
                                              d, false, e));
  // An array without a number at its top level is several prompts, each of any form (as llama-server).
  GenerationRequest z;
  const ordered_json several = ordered_json::array({ordered_json::array({1, 2}), "str", {{"prompt_string", "obj"}}});
  ASSERT_FALSE(parse_native_completion_request({{"prompt", several}}, d, false, z));
  ASSERT_EQ(z.prompts.size(), 3u);
  EXPECT_EQ(z.prompts[1], "str");
  EXPECT_EQ(z.prompts[2], "obj");
  EXPECT_TRUE(parse_native_completion_request({{"prompt", ordered_json::array({"ok", {{"prompt_string", ""}}})}}, d, false, e));
}

TEST(ServerRequest, JsonBodyErrors) {
  ordered_json j;
  EXPECT_TRUE(parse_json_body("", j));
  EXPECT_TRUE(parse_json_body("[]", j));
  auto e = parse_json_body("{\"a\": ", j);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("at byte"), std::string::npos);
  EXPECT_FALSE(parse_json_body("{\"a\": 1}", j));
  // Invalid UTF-8 inside a string is a parse error, not a crash.
  EXPECT_TRUE(parse_json_body("{\"a\": \"\xff\"}", j));
  // And the wire serialisation of arbitrary bytes never throws.
  EXPECT_EQ(dump_json(nlohmann::json{{"t", std::string("a\xff" "b")}}), "{\"t\":\"a\xEF\xBF\xBD" "b\"}");
}

// Feeds `text` in every split into two chunks and checks the result does not depend on it.
template <class F>
void for_each_split(const std::string& text, F&& f) {
  for (size_t cut = 0; cut <= text.size(); ++cut) f(std::vector<std::string>{text.substr(0, cut), text.substr(cut)});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  f(bytes);
}

TEST(ServerTextStream, StopStringsInEveryChunking) {
  for_each_split("Hello, world. STOP here", [](const std::vector<std::string>& chunks) {
    StopMatcher m({"STOP", "xyz"});
    std::string out;
    for (const auto& c : chunks) out += m.push(c);
    out += m.finish();
    EXPECT_EQ(out, "Hello, world. ");
    EXPECT_TRUE(m.stopped());
    EXPECT_EQ(*m.matched(), "STOP");
  });
  for_each_split("ab ST x STO", [](const std::vector<std::string>& chunks) {
    StopMatcher m({"STOP"});
    std::string out;
    for (const auto& c : chunks) out += m.push(c);
    EXPECT_EQ(out, "ab ST x ");  // "STO" could still become "STOP"
    out += m.finish();
    EXPECT_EQ(out, "ab ST x STO");
    EXPECT_FALSE(m.stopped());
  });
  StopMatcher earliest({"cd", "b"});
  EXPECT_EQ(earliest.push("abcd"), "a");
}

struct Split {
  std::string reasoning, content;
};

Split run_split(bool opened, const std::vector<std::string>& chunks) {
  ReasoningSplitter s(opened);
  Split out;
  for (const auto& c : chunks) {
    auto d = s.push(c);
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  auto d = s.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

TEST(ServerTextStream, ThinkBlocksInEveryChunking) {
  for_each_split("\n<think>\nplan: a < b\n</think>\n\nThe answer.", [](const auto& chunks) {
    auto r = run_split(false, chunks);
    EXPECT_EQ(r.reasoning, "plan: a < b");
    EXPECT_EQ(r.content, "The answer.");
  });
  // The prompt opened the block (Qwen3.5/3.6 with thinking on).
  for_each_split("I think <thin\n\n</think>\n\nDone </think> text", [](const auto& chunks) {
    auto r = run_split(true, chunks);
    EXPECT_EQ(r.reasoning, "I think <thin");
    EXPECT_EQ(r.content, "Done </think> text");
  });
  // No think block: everything is content, as written.
  for_each_split("  <thing> not a tag", [](const auto& chunks) {
    auto r = run_split(false, chunks);
    EXPECT_EQ(r.reasoning, "");
    EXPECT_EQ(r.content, "  <thing> not a tag");
  });
  // Cut off while thinking (max_tokens): the reasoning so far, no content.
  for_each_split("<think>still going  ", [](const auto& chunks) {
    auto r = run_split(false, chunks);
    EXPECT_EQ(r.reasoning, "still going");
    EXPECT_EQ(r.content, "");
  });
  ReasoningSplitter s(true);
  EXPECT_TRUE(s.in_reasoning());
  s.push("x</think>y");
  EXPECT_FALSE(s.in_reasoning());
  EXPECT_TRUE(s.reasoning_closed());
}

TEST(ServerTextStream, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(prompt_opens_reasoning("user typed <think> then more text"));
}

}  // namespace
}  // namespace moetier::server
