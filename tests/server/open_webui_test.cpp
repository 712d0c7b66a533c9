// The requests Open WebUI makes of an OpenAI-compatible connection, against `moetier serve`
// on a random-weight reference model: the model list (GET {base}/models; an OpenAI
// connection calls nothing under /api/), a streamed chat with stream_options.include_usage
// (which Open WebUI always sets), the title and tag tasks (non-streamed chats whose one user
// message is a prompt template asking for JSON, the title one capped by
// max_completion_tokens, both with a `metadata` object moetier must ignore), a `stop` list,
// and a stream the user cancels half-way, after which the server must go on serving.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/http_client.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

using nlohmann::json;
using testing::get;
using testing::post_json;
using testing::post_sse;
using testing::ServerProcess;

class OpenWebUi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"-m", testing::ref_model_path("qwen3moe-tiny-f32"), "-np", "2", "-t", "2", "-c", "2048",
                                 "--alias", "tiny/qwen3moe:f32"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->log(); }
  static ServerProcess* server_;
};
ServerProcess* OpenWebUi::server_ = nullptr;

const char* kModel = "tiny/qwen3moe:f32";  // a name with '/' and ':', as Hugging Face repos are named

json user_message(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

// Open WebUI's task prompts are a template around the chat so far; these follow their shape.
std::string task_prompt(const std::string& task, const std::string& output) {
  return "### Task:\n" + task + "\n### Output:\nJSON format: " + output +
         "\n### Chat History:\n<chat_history>\nUSER: Why is the sky blue?\nASSISTANT: Rayleigh scattering.\n"
         "</chat_history>";
}

TEST_F(OpenWebUi, ModelListHasTheIdOpenWebUiReads) {
  auto c = server_->client();
  // Open WebUI takes `data` (or a bare list) and each model's `id` (`name` when present).
  auto r = get(c, "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["object"], "list");
  ASSERT_TRUE(r.json["data"].is_array() && r.json["data"].size() == 1) << r.body;
  EXPECT_EQ(r.json["data"][0]["id"], kModel);
  EXPECT_EQ(r.json["data"][0]["object"], "model");
  EXPECT_FALSE(r.json["data"][0].contains("name") && r.json["data"][0]["name"].is_null()) << r.body;
}

TEST_F(OpenWebUi, StreamedChatEndsWithTheUsageChunk) {
  auto c = server_->client();
  const json req = {{"model", kModel}, {"messages", user_message("Hello!")}, {"stream", true},
                    {"stream_options", {{"include_usage", true}}}, {"max_tokens", 12}, {"temperature", 0.7},
                    {"seed", 3}};
  auto s = post_sse(c, "/v1/chat/completions", req);
  ASSERT_EQ(s.status, 200) << s.raw;
  EXPECT_TRUE(s.done) << s.raw;
  EXPECT_TRUE(s.all_json) << s.raw;
  ASSERT_GE(s.events.size(), 3u) << s.raw;
  // Every chunk but the last has choices and no usage; the last has no choices and the usage.
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    const json& e = s.events[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk") << e.dump();
    EXPECT_EQ(e["model"], kModel) << e.dump();
    EXPECT_EQ(e["choices"].size(), 1u) << e.dump();
    EXPECT_TRUE(!e.contains("usage") || e["usage"].is_null()) << e.dump();
  }
  const json& last = s.events.back();
  EXPECT_TRUE(last["choices"].is_array() && last["choices"].empty()) << last.dump();
  ASSERT_TRUE(last["usage"].is_object()) << last.dump();
  const int completion = last["usage"]["completion_tokens"].get<int>();
  EXPECT_GE(completion, 1);
  EXPECT_LE(completion, 12);
  EXPECT_GT(last["usage"]["prompt_tokens"].get<int>(), 0);
  EXPECT_EQ(last["usage"]["total_tokens"].get<int>(),
            completion + last["usage"]["prompt_tokens"].get<int>());
  // The finish reason comes on the chunk before the usage.
  const json& finish = s.events[s.events.size() - 2]["choices"][0];
  EXPECT_TRUE(finish["finish_reason"] == "length" || finish["finish_reason"] == "stop") << finish.dump();
}

TEST_F(OpenWebUi, TitleAndTagTasksAnswer) {
  auto c = server_->client();
  const json metadata = {{"task", "title_generation"}, {"chat_id", "c0ffee"}, {"task_body", {{"model", kModel}}}};
  const json title_req = {
      {"model", kModel},
      {"messages", user_message(task_prompt("Write a short title of 3 to 5 words for the chat.",
                                            "{ \"title\": \"the title\" }"))},
      {"stream", false},
      {"max_completion_tokens", 24},
      {"metadata", metadata}};
  auto title = post_json(c, "/v1/chat/completions", title_req);
  ASSERT_EQ(title.status, 200) << title.body;
  EXPECT_EQ(title.json["object"], "chat.completion");
  ASSERT_EQ(title.json["choices"].size(), 1u);
  EXPECT_TRUE(title.json["choices"][0]["message"]["content"].is_string()) << title.body;
  EXPECT_LE(title.json["usage"]["completion_tokens"].get<int>(), 24) << title.body;
  const json& reason = title.json["choices"][0]["finish_reason"];
  EXPECT_TRUE(reason == "length" || reason == "stop") << title.body;

  // The tag task sends no token limit: the reply ends at the end of text or a full slot.
  json tags_req = title_req;
  tags_req.erase("max_completion_tokens");
  tags_req["messages"] = user_message(task_prompt("Give 1 to 3 broad tags for the chat.", "{ \"tags\": [\"tag1\"] }"));
  tags_req["metadata"]["task"] = "tags_generation";
  auto tags = post_json(c, "/v1/chat/completions", tags_req);
  ASSERT_EQ(tags.status, 200) << tags.body;
  EXPECT_TRUE(tags.json["choices"][0]["message"]["content"].is_string()) << tags.body;
  EXPECT_GE(tags.json["usage"]["completion_tokens"].get<int>(), 1) << tags.body;

  // With a JSON response format (a task model that honours it), the title is JSON.
  json json_req = title_req;
  json_req["max_completion_tokens"] = 200;
  json_req["response_format"] = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "title"},
        {"schema", {{"type", "object"},
                    {"properties", {{"title", {{"type", "string"}, {"maxLength", 12}}}}},
                    {"required", {"title"}}}}}}};
  auto structured = post_json(c, "/v1/chat/completions", json_req);
  ASSERT_EQ(structured.status, 200) << structured.body;
  EXPECT_EQ(structured.json["choices"][0]["finish_reason"], "stop") << structured.body;
  const json parsed =
      json::parse(structured.json["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << structured.body;
  EXPECT_TRUE(parsed["title"].is_string()) << structured.body;
}

TEST_F(OpenWebUi, StopListCutsTheReply) {
  auto c = server_->client();
  const json base = {{"model", kModel}, {"messages", user_message("Count to ten.")}, {"max_tokens", 24},
                     {"temperature", 0}};
  auto free_run = post_json(c, "/v1/chat/completions", base);
  ASSERT_EQ(free_run.status, 200) << free_run.body;
  const std::string text = free_run.json["choices"][0]["message"]["content"].get<std::string>();
  ASSERT_GE(text.size(), 6u) << free_run.body;
  // A stop string from the middle of the greedy reply, and one that never comes.
  const std::string stop = text.substr(3, 2);
  json req = base;
  req["stop"] = json::array({"\x01never", stop});
  auto cut = post_json(c, "/v1/chat/completions", req);
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(cut.json["choices"][0]["finish_reason"], "stop") << cut.body;
  EXPECT_EQ(cut.json["choices"][0]["message"]["content"], text.substr(0, text.find(stop))) << cut.body;
  // Streamed, the same text and no stop string in any chunk.
  req["stream"] = true;
  auto s = post_sse(c, "/v1/chat/completions", req);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(testing::stream_text(s, "content"), text.substr(0, text.find(stop))) << s.raw;
  EXPECT_EQ(testing::stream_finish_reason(s), "stop") << s.raw;
}

// A server of its own: the slot's cache then holds this reply alone.
TEST(OpenWebUiCancel, CancelledStreamLeavesTheServerHealthy) {
  ServerProcess server({"-m", testing::ref_model_path("qwen3moe-tiny-f32"), "-np", "1", "-t", "2", "-c", "1024"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const json req = {{"model", kModel}, {"messages", user_message("Tell a long story.")}, {"stream", true},
                    {"stream_options", {{"include_usage", true}}}, {"max_tokens", 1500}, {"ignore_eos", true}};
  int seen = 0;
  auto s = post_sse(c, "/v1/chat/completions", req, [&seen](const json&) { return ++seen < 4; });
  EXPECT_EQ(s.status, 200);
  EXPECT_FALSE(s.done) << "the stream ran to the end: nothing was cancelled";
  // The slot stops soon after the client leaves: it holds the prompt and the few tokens
  // generated until then, not a full slot (1024 tokens).
  bool idle = false;
  int64_t cached = 0;
  for (int i = 0; i < 100 && !idle; ++i) {
    auto slots = get(c, "/slots");
    ASSERT_EQ(slots.status, 200) << slots.body;
    idle = true;
    cached = 0;
    for (const auto& slot : slots.json) {
      idle = idle && !slot["is_processing"].get<bool>();
      cached += slot["n_cached"].get<int64_t>();
    }
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(idle) << "a slot still generates for a client that left";
  EXPECT_LT(cached, 512) << "the reply ran on after its client left";
  EXPECT_EQ(get(c, "/health").status, 200);
  auto next = post_json(c, "/v1/chat/completions",
                        {{"model", kModel}, {"messages", user_message("Hi")}, {"max_tokens", 4}});
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json["usage"]["completion_tokens"].get<int>() > 0, true) << next.body;
}

}  // namespace
}  // namespace moetier
