// Anthropic's Messages API on `moetier serve` (server/anthropic.h), over real HTTP against the
// tiny reference model: the message shape, usage and stop reasons, streaming events with
// their block indices, tool results sent back, count_tokens, and errors in Anthropic's shape.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/anthropic.h"
#include "support/http_client.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

using nlohmann::json;
using testing::post_json;
using testing::ServerProcess;

// Anthropic streams "event: NAME\ndata: {...}\n\n"; the data payloads in order.
std::vector<json> stream_events(httplib::Client& c, const json& body) {
  std::vector<json> out;
  auto r = c.Post("/v1/messages", body.dump(), "application/json");
  if (!r) return out;
  size_t pos = 0;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    out.push_back(json::parse(r->body.substr(pos + 6, end - pos - 6), nullptr, false));
    pos = end;
  }
  return out;
}

TEST(AnthropicApi, MessagesStreamsAndCounts) {
  ServerProcess server({"-m", testing::ref_model_path("qwen3moe-tiny-f32"), "-t", "2", "-c", "1024"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const json user = json::array({{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Say"}}, {{"type", "text"}, {"text", " hi"}}}}}});
  auto r = post_json(c, "/v1/messages", {{"model", "m"}, {"max_tokens", 6}, {"system", "Be brief."}, {"messages", user},
                                         {"metadata", {{"user_id", "u"}}}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["type"], "message");
  EXPECT_EQ(r.json["role"], "assistant");
  EXPECT_EQ(r.json["id"].get<std::string>().rfind("msg_", 0), 0u) << r.body;
  ASSERT_EQ(r.json["content"].size(), 1u) << r.body;
  EXPECT_EQ(r.json["content"][0]["type"], "text");
  EXPECT_TRUE(r.json["stop_reason"] == "max_tokens" || r.json["stop_reason"] == "end_turn") << r.body;
  EXPECT_LE(r.json["usage"]["output_tokens"].get<int>(), 6);
  EXPECT_GT(r.json["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_TRUE(r.json["usage"]["cache_read_input_tokens"].is_number_integer());
  EXPECT_FALSE(r.json.contains("timings"));
  // The same greedy text as the chat endpoint gives for the same conversation.
  auto chat = post_json(c, "/v1/chat/completions",
                        {{"max_tokens", 6}, {"temperature", 0},
                         {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Say hi"}}}}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(r.json["content"][0]["text"], chat.json["choices"][0]["message"]["content"]);

  // Streamed: message_start, one text block at index 0, message_delta with the usage, message_stop.
  const auto events = stream_events(c, {{"max_tokens", 6}, {"stream", true}, {"temperature", 0}, {"messages", user},
                                        {"system", "Be brief."}});
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.front()["type"], "message_start");
  EXPECT_GT(events.front()["message"]["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(events.back()["type"], "message_stop");
  std::string text;
  std::vector<std::string> types;
  for (const json& e : events) {
    types.push_back(e["type"].get<std::string>());
    if (e["type"] == "content_block_delta") {
      EXPECT_EQ(e["index"], 0);
      text += e["delta"]["text"].get<std::string>();
    }
    if (e["type"] == "message_delta") {
      EXPECT_EQ(e["usage"]["output_tokens"], r.json["usage"]["output_tokens"]);
    }
  }
  EXPECT_EQ(text, r.json["content"][0]["text"]);
  EXPECT_EQ(types[1], "content_block_start");
  EXPECT_EQ(types[types.size() - 3], "content_block_stop");
  EXPECT_EQ(types[types.size() - 2], "message_delta");

  // A tool call and its result go back through the chat template (tool_result as a tool message).
  const json history = {{{"role", "user"}, {"content", "Weather?"}},
                        {{"role", "assistant"}, {"content", {{{"type", "tool_use"}, {"id", "t1"}, {"name", "w"}, {"input", {{"c", "Oslo"}}}}}}},
                        {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "sunny"}}}}}};
  std::string error;
  const auto translated = server::anthropic_to_chat({{"messages", history}, {"stop_sequences", {"x"}}}, error);
  ASSERT_TRUE(translated.has_value()) << error;
  EXPECT_EQ((*translated)["messages"][1]["tool_calls"][0]["function"]["arguments"], "{\"c\":\"Oslo\"}");
  EXPECT_EQ((*translated)["messages"][2]["role"], "tool");
  EXPECT_EQ((*translated)["messages"][2]["tool_call_id"], "t1");
  EXPECT_EQ((*translated)["stop"], json::array({"x"}));

  // count_tokens: the prompt's tokens, with and without a system prompt, no max_tokens needed.
  auto n1 = post_json(c, "/v1/messages/count_tokens", {{"messages", user}});
  auto n2 = post_json(c, "/v1/messages/count_tokens", {{"messages", user}, {"system", "Be brief."}});
  ASSERT_EQ(n1.status, 200) << n1.body;
  EXPECT_EQ(n1.json.size(), 1u) << n1.body;
  EXPECT_GT(n2.json["input_tokens"].get<int>(), n1.json["input_tokens"].get<int>());
  EXPECT_EQ(n2.json["input_tokens"], r.json["usage"]["input_tokens"]);

  // Errors are Anthropic's: {"type": "error", "error": {"type", "message"}}.
  auto bad = post_json(c, "/v1/messages", {{"max_tokens", 4}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json["type"], "error") << bad.body;
  EXPECT_EQ(bad.json["error"]["type"], "invalid_request_error") << bad.body;
}

}  // namespace
}  // namespace moetier
