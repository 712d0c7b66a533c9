// llama-server's own API on `moetier serve`, over real HTTP against reference models: the
// native /completion (fields, streaming, probabilities), logit_bias in its three forms,
// n > 1, prefill of a final assistant message, /infill, slot save/restore/erase, the
// --cors-origins allowlist, the llama-server flags a command line carries, and a clean exit
// whatever moment of start-up a SIGINT arrives at.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/server_state.h"
#include "support/cli.h"
#include "support/http_client.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

using nlohmann::json;
using testing::get;
using testing::post_json;
using testing::post_raw;
using testing::post_sse;
using testing::ServerProcess;

const std::string kRef = testing::kRefDir;
std::string model_path(const std::string& name) { return testing::ref_model_path(name); }

class LlamaServerApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    save_dir_ = testing::temp_file("slots");
    server_ = new ServerProcess({"-m", model_path("qwen3moe-tiny-f32"), "-np", "2", "-t", "2", "-c", "1024",
                                 "--slot-save-path", save_dir_, "--offline", "--jinja", "--slots", "--cache-ram",
                                 "0", "--tags", "a,b", "--cors-origins", "localhost"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::filesystem::remove_all(save_dir_);
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->log(); }
  static ServerProcess* server_;
  static std::string save_dir_;
};
ServerProcess* LlamaServerApi::server_ = nullptr;
std::string LlamaServerApi::save_dir_;

TEST_F(LlamaServerApi, NativeCompletionHasLlamaServerFields) {
  auto c = server_->client();
  const json req = {{"prompt", "Once upon"}, {"n_predict", 6}, {"temperature", 0}, {"return_tokens", true},
                    {"n_probs", 3}, {"ignore_eos", true}};
  // /completions (no /v1/) is the native API too, as in llama-server.
  auto plural = post_json(c, "/completions", req);
  ASSERT_EQ(plural.status, 200) << plural.body;
  EXPECT_TRUE(plural.json.contains("content") && !plural.json.contains("choices")) << plural.body;
  auto r = post_json(c, "/completion", req);
  EXPECT_EQ(plural.json["content"], r.json["content"]);
  ASSERT_EQ(r.status, 200) << r.body;
  const json& j = r.json;
  for (const char* k : {"index", "content", "tokens", "id_slot", "stop", "model", "tokens_predicted", "tokens_evaluated",
                        "generation_settings", "prompt", "has_new_line", "truncated", "stop_type", "stopping_word",
                        "tokens_cached", "timings", "completion_probabilities"}) {
    EXPECT_TRUE(j.contains(k)) << k << ": " << r.body;
  }
  EXPECT_EQ(j["stop"], true);
  EXPECT_EQ(j["stop_type"], "limit");
  EXPECT_EQ(j["tokens_predicted"], 6);
  EXPECT_EQ(j["tokens"].size(), 6u);
  EXPECT_EQ(j["prompt"], "Once upon");
  EXPECT_EQ(j["generation_settings"]["n_predict"], 6);
  ASSERT_EQ(j["completion_probabilities"].size(), 6u);
  const json& p0 = j["completion_probabilities"][0];
  EXPECT_EQ(p0["id"], j["tokens"][0]);
  EXPECT_EQ(p0["top_logprobs"].size(), 3u);
  // Greedy: the chosen token is the most likely one.
  EXPECT_EQ(p0["top_logprobs"][0]["id"], p0["id"]);
  EXPECT_LE(p0["logprob"].get<double>(), 0.0);

  // The same greedy text as the OpenAI endpoint.
  auto oai = post_json(c, "/v1/completions", {{"prompt", "Once upon"}, {"max_tokens", 6}, {"temperature", 0},
                                              {"ignore_eos", true}});
  ASSERT_EQ(oai.status, 200);
  EXPECT_EQ(oai.json["choices"][0]["text"], j["content"]);

  // Streamed: chunks with stop false, then one final object with stop true; no [DONE].
  json sreq = req;
  sreq["stream"] = true;
  auto s = post_sse(c, "/completion", sreq);
  ASSERT_EQ(s.status, 200);
  ASSERT_GE(s.events.size(), 2u);
  EXPECT_FALSE(s.done);
  std::string text;
  json tokens = json::array();
  for (const auto& e : s.events) {
    text += e["content"].get<std::string>();
    for (const auto& t : e["tokens"]) tokens.push_back(t);
    EXPECT_EQ(e["stop"], &e == &s.events.back());
  }
  EXPECT_EQ(text, j["content"]);
  EXPECT_EQ(tokens, j["tokens"]);
  EXPECT_EQ(s.events.back()["stop_type"], "limit");

  // A stop string: stop_type word, the word reported, the text cut before it.
  const std::string full = j["content"].get<std::string>();
  const bool ascii = std::all_of(full.begin(), full.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
  if (full.size() >= 3 && ascii) {
    const std::string word = full.substr(1, 2);
    auto w = post_json(c, "/completion", {{"prompt", "Once upon"}, {"n_predict", 6}, {"temperature", 0},
                                          {"stop", {word}}, {"ignore_eos", true}});
    EXPECT_EQ(w.json["stop_type"], "word") << w.body;
    EXPECT_EQ(w.json["stopping_word"], word);
    EXPECT_EQ(w.json["content"], full.substr(0, full.find(word)));
  }

  // post_sampling_probs: probabilities of the distribution sampled from (they sum to <= 1).
  auto ps = post_json(c, "/completion", {{"prompt", "Once upon"}, {"n_predict", 2}, {"temperature", 1.0}, {"top_k", 5},
                                         {"n_probs", 10}, {"post_sampling_probs", true}, {"seed", 3}});
  ASSERT_EQ(ps.status, 200) << ps.body;
  const json& pp = ps.json["completion_probabilities"][0];
  ASSERT_TRUE(pp.contains("prob") && pp.contains("top_probs")) << ps.body;
  double sum = 0;
  for (const auto& t : pp["top_probs"]) sum += t["prob"].get<double>();
  EXPECT_LE(pp["top_probs"].size(), 5u);  // top_k 5 leaves at most 5 candidates
  EXPECT_NEAR(sum, 1.0, 1e-4);

  // Mixed prompts: strings and token ids.
  auto mixed = post_json(c, "/completion", {{"prompt", {"Once", 12, " upon"}}, {"n_predict", 1}});
  EXPECT_EQ(mixed.status, 200) << mixed.body;

  // Streamed chunks carry their tokens even without return_tokens (the final object does not).
  auto plain = post_sse(c, "/completion", {{"prompt", "Once upon"}, {"n_predict", 3}, {"stream", true},
                                           {"ignore_eos", true}});
  ASSERT_GE(plain.events.size(), 2u);
  EXPECT_FALSE(plain.events.front()["tokens"].empty());
  EXPECT_TRUE(plain.events.back()["tokens"].empty());

  // Several prompts: one result each, in order, each equal to its prompt alone.
  auto batch = post_json(c, "/completion", {{"prompt", {"Once upon", "Twice"}}, {"n_predict", 3}, {"temperature", 0},
                                            {"ignore_eos", true}});
  ASSERT_EQ(batch.status, 200) << batch.body;
  ASSERT_TRUE(batch.json.is_array() && batch.json.size() == 2) << batch.body;
  EXPECT_EQ(batch.json[0]["content"], post_json(c, "/completion", {{"prompt", "Once upon"}, {"n_predict", 3},
                                                                   {"temperature", 0}, {"ignore_eos", true}})
                                          .json["content"]);
  EXPECT_EQ(batch.json[1]["prompt"], "Twice");
  auto two = post_json(c, "/v1/completions",
                       {{"prompt", {"Once upon", "Twice"}}, {"max_tokens", 2}, {"echo", true}, {"ignore_eos", true}});
  ASSERT_EQ(two.json["choices"].size(), 2u) << two.body;
  EXPECT_EQ(two.json["choices"][1]["text"].get<std::string>().rfind("Twice", 0), 0u);  // echo of its own prompt
  EXPECT_EQ(two.json["usage"]["completion_tokens"], 4);

  // response_fields: only the fields asked for, by path.
  auto fields = post_json(c, "/completion", {{"prompt", "Once"}, {"n_predict", 2},
                                             {"response_fields", {"content", "generation_settings/n_predict"}}});
  ASSERT_EQ(fields.status, 200) << fields.body;
  EXPECT_EQ(fields.json.size(), 2u) << fields.body;
  EXPECT_EQ(fields.json["generation_settings/n_predict"], 2);
}

TEST_F(LlamaServerApi, LogitBiasInAllThreeFormsAndNChoices) {
  auto c = server_->client();
  const json base = {{"prompt", "Once upon"}, {"n_predict", 1}, {"temperature", 0}, {"return_tokens", true}};
  auto greedy = post_json(c, "/completion", base);
  ASSERT_EQ(greedy.status, 200);
  const int first = greedy.json["tokens"][0].get<int>();
  // OpenAI's object form, llama-server's array form with a number and with false.
  for (const json& bias : {json{{std::to_string(first), -100}}, json{{first, -1e9}}, json::array({json{first, false}})}) {
    json req = base;
    req["logit_bias"] = bias.is_array() && bias.size() == 2 && bias[0].is_number() ? json::array({bias}) : bias;
    auto r = post_json(c, "/completion", req);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.json["tokens"][0].get<int>(), first) << bias.dump();
  }
  // A string: each of its tokens gets the bias; a large positive one forces it.
  const std::string piece = greedy.json["content"].get<std::string>();
  json forced = base;
  forced["prompt"] = "Twice";
  forced["logit_bias"] = json::array({json{"Z", 1000}});
  auto z = post_json(c, "/completion", forced);
  EXPECT_EQ(z.json["content"], "Z") << z.body;

  // n = 3: three choices; with a seed, reproducible; streamed chunks carry each index.
  const json req = {{"prompt", "Once upon"}, {"max_tokens", 4}, {"n", 3}, {"seed", 11}, {"temperature", 1.0},
                    {"ignore_eos", true}};
  auto a = post_json(c, "/v1/completions", req);
  auto b = post_json(c, "/v1/completions", req);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(a.json["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.json["choices"][i]["index"], i);
    EXPECT_EQ(a.json["choices"][i]["text"], b.json["choices"][i]["text"]);
  }
  EXPECT_EQ(a.json["usage"]["completion_tokens"], 12);
  json sreq = req;
  sreq["stream"] = true;
  auto s = post_sse(c, "/v1/completions", sreq);
  std::string per[3];
  for (const auto& e : s.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    per[e["choices"][0]["index"].get<int>()] += e["choices"][0]["text"].get<std::string>();
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(per[i], a.json["choices"][i]["text"]) << i;
  EXPECT_TRUE(s.done);
}

TEST_F(LlamaServerApi, ChatPrefillTemplateAndStreamShape) {
  auto c = server_->client();
  const json msgs = {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "Hello, I am"}}};
  // A final assistant message is continued: the prompt ends with its text, not a new turn.
  auto t = post_json(c, "/apply-template", {{"messages", msgs}});
  ASSERT_EQ(t.status, 200) << t.body;
  const std::string prompt = t.json["prompt"].get<std::string>();
  EXPECT_EQ(prompt.substr(prompt.size() - 11), "Hello, I am") << prompt;
  // add_generation_prompt false: no assistant header at the end.
  const json user_only = {{{"role", "user"}, {"content", "Hi"}}};
  auto with = post_json(c, "/apply-template", {{"messages", user_only}});
  auto without = post_json(c, "/apply-template", {{"messages", user_only}, {"add_generation_prompt", false}});
  EXPECT_GT(with.json["prompt"].get<std::string>().size(), without.json["prompt"].get<std::string>().size());
  EXPECT_EQ(with.json["prompt"].get<std::string>().rfind(without.json["prompt"].get<std::string>(), 0), 0u);

  // The first streamed chunk is {"role": "assistant", "content": null}; the usage chunk has timings.
  auto s = post_sse(c, "/v1/chat/completions", {{"messages", user_only}, {"max_tokens", 3}, {"stream", true},
                                                 {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events[0]["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", nullptr}}));
  EXPECT_TRUE(s.events.back().contains("usage"));
  EXPECT_TRUE(s.events.back().contains("timings"));

  // Any model name is served; /v1/models carries the tags.
  auto any = post_json(c, "/v1/chat/completions", {{"model", "gpt-3.5-turbo"}, {"messages", user_only}, {"max_tokens", 1}});
  EXPECT_EQ(any.status, 200);
  auto models = get(c, "/v1/models");
  EXPECT_EQ(models.json["data"][0]["tags"], (json{"a", "b"}));
}

// Details llama.cpp's server suite checks: the `verbose` debug echo, the token-count endpoint,
// n > 1 pinned to one slot, two final assistant messages refused, prompt progress on the chat
// stream (a first report before any batch), and generation rates over the decode steps after
// the first token.
TEST_F(LlamaServerApi, VerboseTokenCountProgressAndRates) {
  auto c = server_->client();
  const json msgs = {{{"role", "system"}, {"content", "Book"}}, {{"role", "user"}, {"content", "What is the best book"}}};
  auto v = post_json(c, "/chat/completions", {{"messages", msgs}, {"max_tokens", 2}, {"verbose", true}});
  ASSERT_EQ(v.status, 200) << v.body;
  ASSERT_TRUE(v.json.contains("__verbose")) << v.body;
  EXPECT_NE(v.json["__verbose"]["prompt"].get<std::string>().find("Book"), std::string::npos);
  EXPECT_TRUE(v.json["__verbose"].contains("generation_settings"));
  auto quiet = post_json(c, "/chat/completions", {{"messages", msgs}, {"max_tokens", 2}});
  EXPECT_FALSE(quiet.json.contains("__verbose"));
  EXPECT_EQ(quiet.json["system_fingerprint"].get<std::string>().rfind("b", 0), 0u);  // llama-server's "b<build>-<commit>"

  auto count = post_json(c, "/v1/chat/completions/input_tokens", {{"messages", msgs}});
  ASSERT_EQ(count.status, 200) << count.body;
  EXPECT_EQ(count.json["input_tokens"], quiet.json["usage"]["prompt_tokens"]);
  EXPECT_EQ(post_json(c, "/chat/completions/input_tokens", {{"messages", 3}}).status, 400);

  auto pinned = post_json(c, "/chat/completions", {{"messages", msgs}, {"max_tokens", 3}, {"n", 2}, {"id_slot", 0}});
  ASSERT_EQ(pinned.status, 200) << pinned.body;
  EXPECT_EQ(pinned.json["choices"].size(), 2u);

  const json two_assistants = {{{"role", "user"}, {"content", "a"}},
                               {{"role", "assistant"}, {"content", "b"}},
                               {{"role", "assistant"}, {"content", "c"}}};
  EXPECT_EQ(post_json(c, "/chat/completions", {{"messages", two_assistants}}).status, 400);

  // A multi-part final assistant message is continued with its parts joined by a blank line.
  const json prefill = {msgs[1], {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "Wh"}}, {{"type", "text"}, {"text", "ill"}}}}}};
  auto pre = post_json(c, "/chat/completions", {{"messages", prefill}, {"max_tokens", 1}, {"verbose", true}});
  ASSERT_EQ(pre.status, 200) << pre.body;
  const std::string rendered = pre.json["__verbose"]["prompt"];
  EXPECT_EQ(rendered.substr(rendered.size() - 7), "Wh\n\nill") << rendered;

  auto progress = post_sse(c, "/chat/completions", {{"messages", msgs}, {"max_tokens", 2}, {"stream", true},
                                                    {"return_progress", true}, {"cache_prompt", false}});
  ASSERT_EQ(progress.status, 200);
  std::vector<json> reports;
  for (const auto& e : progress.events) {
    if (e.contains("prompt_progress")) reports.push_back(e["prompt_progress"]);
  }
  ASSERT_GE(reports.size(), 2u) << progress.raw;
  EXPECT_EQ(reports.front()["cache"], reports.front()["processed"]);
  EXPECT_EQ(reports.back()["processed"], reports.back()["total"]);

  auto one = post_json(c, "/completion", {{"prompt", "I believe"}, {"n_predict", 1}, {"ignore_eos", true}});
  EXPECT_EQ(one.json["timings"]["predicted_n"], 1);
  EXPECT_EQ(one.json["timings"]["predicted_per_second"], 0.0);
  auto many = post_json(c, "/completion", {{"prompt", "I believe"}, {"n_predict", 16}, {"ignore_eos", true}});
  const json& t = many.json["timings"];
  EXPECT_EQ(t["predicted_n"], 16);
  EXPECT_NEAR(t["predicted_per_second"].get<double>(), 1e3 / t["predicted_ms"].get<double>() * 15, 1e-6);
}

TEST_F(LlamaServerApi, SlotsSaveRestoreErase) {
  auto c = server_->client();
  auto r = post_json(c, "/completion", {{"prompt", "The slot keeps this"}, {"n_predict", 2}, {"id_slot", 1},
                                        {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["id_slot"], 1);
  auto save = post_json(c, "/slots/1?action=save", {{"filename", "one.bin"}});
  ASSERT_EQ(save.status, 200) << save.body;
  const int64_t n = save.json["n_saved"].get<int64_t>();
  EXPECT_GT(n, 3);
  EXPECT_TRUE(std::filesystem::exists(save_dir_ + "/one.bin"));
  auto erase = post_raw(c, "/slots/1?action=erase", "");
  ASSERT_EQ(erase.status, 200) << erase.body;
  EXPECT_EQ(erase.json["n_erased"], n);
  auto restore = post_json(c, "/slots/1?action=restore", {{"filename", "one.bin"}});
  ASSERT_EQ(restore.status, 200) << restore.body;
  EXPECT_EQ(restore.json["n_restored"], n);
  // The restored cache serves the same prompt again: its prefix is reused, the text is the same.
  auto again = post_json(c, "/completion", {{"prompt", "The slot keeps this"}, {"n_predict", 2}, {"id_slot", 1},
                                            {"temperature", 0}});
  EXPECT_EQ(again.json["content"], r.json["content"]);
  EXPECT_GT(again.json["timings"]["cache_n"].get<int64_t>(), 0) << again.body;
  // Bad requests.
  EXPECT_EQ(post_json(c, "/slots/1?action=save", {{"filename", "../escape"}}).status, 400);
  EXPECT_EQ(post_json(c, "/slots/1?action=restore", {{"filename", "missing.bin"}}).status, 400);
  EXPECT_EQ(post_json(c, "/slots/7?action=erase", json::object()).status, 400);
  EXPECT_EQ(post_json(c, "/slots/0?action=fly", json::object()).status, 400);
  // A damaged file is refused, not loaded.
  {
    std::FILE* f = std::fopen((save_dir_ + "/bad.bin").c_str(), "wb");
    std::fputs("MTSLOT01garbage", f);
    std::fclose(f);
  }
  EXPECT_EQ(post_json(c, "/slots/0?action=restore", {{"filename", "bad.bin"}}).status, 400);
}

TEST_F(LlamaServerApi, InfillNeedsFimTokensAndCorsFollowsTheAllowlist) {
  auto c = server_->client();
  // The tiny reference vocabulary has no FIM tokens: a clear 501, not a wrong prompt.
  auto r = post_json(c, "/infill", {{"input_prefix", "def f("}, {"input_suffix", "\n"}});
  EXPECT_EQ(r.status, 501) << r.body;
  EXPECT_EQ(post_json(c, "/infill", {{"n_predict", 3}}).status, 400);
  // --cors-origins localhost: a page on localhost may call, another origin gets no CORS grant.
  auto ok = get(c, "/v1/models", {{"Origin", "http://localhost:5173"}});
  EXPECT_EQ(ok.headers.count("Access-Control-Allow-Origin"), 1u);
  auto evil = get(c, "/v1/models", {{"Origin", "http://evil.example"}});
  EXPECT_EQ(evil.headers.count("Access-Control-Allow-Origin"), 0u);
  // A preflight from an allowed origin: 200 with the grant, as llama-server answers it.
  auto preflight = testing::to_reply(c.Options("/v1/chat/completions", {{"Origin", "http://localhost:5173"},
                                                               {"Access-Control-Request-Method", "POST"}}));
  EXPECT_EQ(preflight.status, 200);
  EXPECT_EQ(preflight.headers.count("Access-Control-Allow-Origin"), 1u);
  EXPECT_EQ(preflight.headers.count("Access-Control-Allow-Methods"), 1u);
  // From another origin: a 200 without any grant, which is what the browser refuses on.
  auto refused = testing::to_reply(c.Options("/v1/chat/completions", {{"Origin", "http://evil.example"},
                                                             {"Access-Control-Request-Method", "POST"}}));
  EXPECT_EQ(refused.status, 200);
  EXPECT_EQ(refused.headers.count("Access-Control-Allow-Origin"), 0u);
  EXPECT_EQ(refused.headers.count("Access-Control-Allow-Methods"), 0u);
}

// Resumable streams: a streamed reply with X-Conversation-Id goes on after its client leaves,
// and can be read again from any byte offset until the user's Stop. The id holds a model
// name with '/', so it travels in the query string.
TEST_F(LlamaServerApi, ResumableStreamOutlivesItsConnection) {
  auto c = server_->client();
  const std::string id = "conv-1::org/model-GGUF:Q8_0";
  const std::string query = "conv_id=conv-1%3A%3Aorg%2Fmodel-GGUF%3AQ8_0";
  const json req = {{"model", "org/model-GGUF:Q8_0"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                    {"stream", true}, {"stream_options", {{"include_usage", true}}}, {"max_tokens", 200},
                    {"ignore_eos", true}, {"temperature", 0}};
  int seen = 0;
  auto first = post_sse(c, "/v1/chat/completions", req, [&seen](const json&) { return ++seen < 3; },
                        {{"X-Conversation-Id", id}});
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_FALSE(first.done);
  // The reply ran to its end without a client: the replay holds all 200 tokens.
  std::string full;
  for (int i = 0; i < 100; ++i) {
    auto replay = get(c, "/v1/stream?" + query + "&from=0");
    ASSERT_EQ(replay.status, 200) << replay.body;
    full = replay.body;
    if (full.find("data: [DONE]") != std::string::npos) break;
  }
  ASSERT_NE(full.find("data: [DONE]"), std::string::npos) << full;
  EXPECT_EQ(full.compare(0, first.raw.size(), first.raw), 0) << "the replay does not start with what the client read";
  const size_t usage_at = full.rfind("data: {");
  const json usage = json::parse(full.substr(usage_at + 6, full.find("\n\n", usage_at) - usage_at - 6), nullptr, false);
  ASSERT_TRUE(usage.is_object()) << full;
  EXPECT_EQ(usage["usage"]["completion_tokens"], 200) << full;
  // From an offset: the rest.
  auto rest = get(c, "/v1/stream?" + query + "&from=100");
  ASSERT_EQ(rest.status, 200);
  EXPECT_EQ(rest.body, full.substr(100));
  // Lookup answers for the ids asked about (and their per-model keys) only.
  auto found = post_json(c, "/v1/streams/lookup", {{"conversation_ids", {"conv-1", "other"}}});
  ASSERT_EQ(found.status, 200) << found.body;
  ASSERT_EQ(found.json.size(), 1u) << found.body;
  EXPECT_EQ(found.json[0]["conversation_id"], id);
  EXPECT_EQ(found.json[0]["is_done"], true);
  EXPECT_EQ(found.json[0]["total_bytes"], full.size());
  EXPECT_EQ(post_json(c, "/v1/streams/lookup", json::object()).json, json::array());
  // The Stop forgets it; bad requests are 400s.
  EXPECT_EQ(testing::to_reply(c.Delete(("/v1/stream?" + query).c_str())).status, 204);
  EXPECT_EQ(get(c, "/v1/stream?" + query + "&from=0").status, 404);
  EXPECT_EQ(testing::to_reply(c.Delete(("/v1/stream?" + query).c_str())).status, 204);
  EXPECT_EQ(get(c, "/v1/stream").status, 400);
  // Without the header a stream is not kept.
  auto plain = post_sse(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                    {"stream", true}, {"max_tokens", 3}});
  EXPECT_TRUE(plain.done);
  EXPECT_EQ(post_json(c, "/v1/streams/lookup", {{"conversation_ids", {""}}}).json, json::array());
}

// Vertex AI's custom-container contract (AIP_MODE=PREDICTION): each instance of a predict
// request runs by the endpoint its @requestFormat names, at once, never streamed.
TEST(ServerVertex, PredictRunsEachInstance) {
  ::setenv("AIP_MODE", "PREDICTION", 1);
  ::setenv("AIP_HEALTH_ROUTE", "healthz", 1);
  ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "-t", "2", "-c", "1024", "-np", "2", "--api-key", "k"});
  ::unsetenv("AIP_MODE");
  ::unsetenv("AIP_HEALTH_ROUTE");
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  EXPECT_EQ(get(c, "/healthz").status, 200);  // open, as /health
  const httplib::Headers key = {{"Authorization", "Bearer k"}};
  const json chat = {{"@requestFormat", "chatCompletions"}, {"max_tokens", 4}, {"stream", true},
                     {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  const json body = {{"instances", {chat, {{"@requestFormat", "completion"}, {"prompt", "a"}, {"n_predict", 3}},
                                    {{"@requestFormat", "/tokenize"}, {"content", "ab"}}, {{"@requestFormat", "nope"}}}}};
  EXPECT_EQ(post_json(c, "/predict", body).status, 401);  // behind the key like every endpoint
  auto r = post_json(c, "/predict", body, key);
  ASSERT_EQ(r.status, 200) << r.body;
  const json& p = r.json["predictions"];
  ASSERT_EQ(p.size(), 4u) << r.body;
  EXPECT_EQ(p[0]["object"], "chat.completion") << r.body;
  EXPECT_EQ(p[0]["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(p[0]["usage"]["completion_tokens"], 4);
  EXPECT_EQ(p[1]["tokens_predicted"], 3) << r.body;
  EXPECT_EQ(p[2]["tokens"].size(), 2u) << r.body;
  EXPECT_EQ(p[3]["error"]["type"], "invalid_request_error") << r.body;
  EXPECT_EQ(post_json(c, "/predict", {{"instances", 1}}, key).status, 400);
}

TEST_F(LlamaServerApi, GenerationSettingsShowTheBiasesApplied) {
  auto c = server_->client();
  auto r = post_json(c, "/completion", {{"prompt", "x"}, {"n_predict", 2}, {"ignore_eos", true},
                                        {"logit_bias", json::array({json{5, 2.5}})}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json& lb = r.json["generation_settings"]["logit_bias"];
  ASSERT_GE(lb.size(), 2u) << r.body;
  EXPECT_EQ(lb[0], (json{{"token", 5}, {"bias", 2.5}}));
  for (size_t i = 1; i < lb.size(); ++i) EXPECT_TRUE(lb[i]["bias"].is_null()) << lb.dump();  // -inf: banned EOG
  auto plain = post_json(c, "/completion", {{"prompt", "x"}, {"n_predict", 1}});
  EXPECT_TRUE(plain.json["generation_settings"]["logit_bias"].empty());
  // Both continuing the last message and answering it: refused.
  auto both = post_json(c, "/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "He"}}}},
                         {"add_generation_prompt", true}, {"continue_final_message", true}});
  EXPECT_EQ(both.status, 400) << both.body;
}

// --chat-template NAME (llama-server's built-ins), several --alias names, and the metrics
// response header dashboards read.
TEST(ServerTemplates, NamedBuiltInsAliasesAndMetricsHeader) {
  struct Case {
    const char* name;
    const char* expected;
  };
  const json msgs = {{{"role", "system"}, {"content", "You are a test."}}, {{"role", "user"}, {"content", "Hi there"}}};
  for (const Case& k : {Case{"command-r",
                             "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|><|START_OF_TURN_"
                             "TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
                        Case{"llama3",
                             "<|start_header_id|>system<|end_header_id|>\n\nYou are a test.<|eot_id|><|start_header_id|>"
                             "user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
                        Case{"chatml",
                             "<|im_start|>system\nYou are a test.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                             "<|im_start|>assistant\n"}}) {
    ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "-t", "1", "--chat-template", k.name, "--alias",
                          "tiny,code,fim", "--metrics"});
    ASSERT_TRUE(server.ready()) << server.log();
    auto c = server.client();
    auto r = post_json(c, "/apply-template", {{"messages", msgs}});
    EXPECT_EQ(r.json["prompt"], k.expected) << k.name;
    auto models = get(c, "/v1/models");
    EXPECT_EQ(models.json["data"][0]["id"], "code");
    EXPECT_EQ(models.json["data"][0]["aliases"], (json{"code", "fim", "tiny"}));
    auto metrics = get(c, "/metrics");
    EXPECT_EQ(metrics.headers.count("Process-Start-Time-Unix"), 1u);
  }
  // Not a name: the text is the template's source, as in llama-server.
  ServerProcess literal({"-m", model_path("qwen3moe-tiny-f32"), "-t", "1", "--chat-template",
                         "{{ messages[0].content | upper }}"});
  ASSERT_TRUE(literal.ready()) << literal.log();
  auto c = literal.client();
  EXPECT_EQ(post_json(c, "/apply-template", {{"messages", msgs}}).json["prompt"], "YOU ARE A TEST.");
}

TEST(CorsOrigins, AllowlistForms) {
  using server::cors_origin_allowed;
  EXPECT_TRUE(cors_origin_allowed("*", "http://a.b"));
  EXPECT_FALSE(cors_origin_allowed("*", ""));
  EXPECT_TRUE(cors_origin_allowed("localhost", "http://localhost"));
  EXPECT_TRUE(cors_origin_allowed("localhost", "https://127.0.0.1:8080"));
  EXPECT_TRUE(cors_origin_allowed("localhost", "http://[::1]:3000"));
  EXPECT_FALSE(cors_origin_allowed("localhost", "http://localhost.evil.com"));
  EXPECT_FALSE(cors_origin_allowed("localhost", "http://evil.com/localhost"));
  EXPECT_FALSE(cors_origin_allowed("localhost", "file://localhost"));
  EXPECT_TRUE(cors_origin_allowed("https://a.com, https://b.com", "https://b.com"));
  EXPECT_FALSE(cors_origin_allowed("https://a.com,https://b.com", "https://c.com"));
  EXPECT_FALSE(cors_origin_allowed("https://a.com", "https://a.com.evil"));
}

// --no-jinja (llama.cpp's test presets pass it on every start): the built-in format the
// model's template writes, here ChatML for Qwen3's template, said in the start-up line;
// requests with tools are refused (a built-in format has no place for them).
TEST(ServerFlags, NoJinjaRendersTheBuiltInFormatOfTheModelsTemplate) {
  ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "--no-jinja"});
  ASSERT_TRUE(server.ready()) << server.log();
  EXPECT_NE(server.log().find("built-in chatml (--no-jinja"), std::string::npos) << server.log();
  auto c = server.client();
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  auto applied = post_json(c, "/apply-template", {{"messages", messages}});
  ASSERT_EQ(applied.status, 200) << applied.body;
  EXPECT_EQ(applied.json.value("prompt", ""),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  auto chat = post_json(c, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(chat.status, 200) << chat.body;
  const json tools = json::array({{{"type", "function"},
                                   {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
  auto with_tools = post_json(c, "/v1/chat/completions", {{"messages", messages}, {"tools", tools}, {"max_tokens", 4}});
  EXPECT_EQ(with_tools.status, 400) << with_tools.body;
  EXPECT_NE(with_tools.body.find("--no-jinja"), std::string::npos) << with_tools.body;
}

TEST(ServerFlags, ContextShiftIsAClearErrorOnRecurrentModels) {
  ServerProcess hybrid({"-m", model_path("qwen35moe-tiny-f32"), "--context-shift"});
  EXPECT_FALSE(hybrid.ready());
  EXPECT_NE(hybrid.log().find("DeltaNet"), std::string::npos) << hybrid.log();
  EXPECT_NE(hybrid.exit_status(), 0);
}

// --context-shift on an attention-only model: a reply longer than the slot goes on past the
// full slot (the older half after n_keep is dropped each time), as llama-server's
// test_ctx_shift_enabled; without the flag the same request ends at the full slot, truncated.
TEST(ServerFlags, ContextShiftGeneratesPastAFullSlot) {
  const json request = {{"prompt", "Lorem ipsum dolor sit amet, consectetur adipiscing elit"},
                        {"n_predict", 150},
                        {"ignore_eos", true},
                        {"temperature", 0},
                        {"n_keep", 4}};
  ServerProcess shifting({"-m", model_path("qwen3moe-tiny-f32"), "-c", "64", "-t", "2", "--context-shift"});
  ASSERT_TRUE(shifting.ready()) << shifting.log();
  auto c = shifting.client();
  auto r = post_json(c, "/completion", request);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["timings"]["predicted_n"], 150) << r.body;
  EXPECT_EQ(r.json["truncated"], true);
  EXPECT_EQ(r.json["stop_type"], "limit");
  EXPECT_EQ(r.json["generation_settings"]["n_keep"], 4);
  EXPECT_NE(shifting.log().find("context shift, n_keep = 4"), std::string::npos) << shifting.log();
  // Greedy decoding over a shifted cache is deterministic: the same request, the same text.
  auto again = post_json(c, "/completion", request);
  EXPECT_EQ(again.json["content"], r.json["content"]);
  // A bad n_keep / n_discard is a 400.
  EXPECT_EQ(post_json(c, "/completion", {{"prompt", "x"}, {"n_keep", -2}}).status, 400);
  EXPECT_EQ(post_json(c, "/completion", {{"prompt", "x"}, {"n_discard", "half"}}).status, 400);

  ServerProcess plain({"-m", model_path("qwen3moe-tiny-f32"), "-c", "64", "-t", "2"});
  ASSERT_TRUE(plain.ready()) << plain.log();
  auto c2 = plain.client();
  auto p = post_json(c2, "/completion", request);
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_LT(p.json["timings"]["predicted_n"].get<int>(), 64);
  EXPECT_EQ(p.json["truncated"], true);
  EXPECT_EQ(p.json["stop_type"], "limit");
  // Until the first shift both servers wrote the same text.
  const std::string a = r.json["content"], b = p.json["content"];
  EXPECT_EQ(a.substr(0, std::min(a.size(), b.size()) / 2), b.substr(0, std::min(a.size(), b.size()) / 2));

  // Speculative decoding keeps a drafter cache that would need the same shift: a clear error.
  ServerProcess spec({"-m", model_path("qwen3moe-tiny-f32"), "--context-shift", "--spec-type", "ngram-mod"});
  EXPECT_FALSE(spec.ready());
  EXPECT_NE(spec.log().find("speculative decoding"), std::string::npos) << spec.log();
}

// -b is llama.cpp's logical batch: a server step (and a micro-batch) holds at most -b tokens,
// so prompt progress comes in steps of at most 8 here.
TEST(ServerFlags, BatchSizeBoundsEachPromptStep) {
  ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "-b", "8", "-t", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  auto s = post_sse(c, "/completion", {{"prompt", "Lorem ipsum dolor sit amet, consectetur adipiscing elit"},
                                       {"n_predict", 1}, {"stream", true}, {"return_progress", true}});
  ASSERT_EQ(s.status, 200);
  std::vector<int64_t> processed;
  int64_t total = 0;
  for (const auto& e : s.events) {
    if (!e.contains("prompt_progress")) continue;
    processed.push_back(e["prompt_progress"]["processed"].get<int64_t>());
    total = e["prompt_progress"]["total"].get<int64_t>();
  }
  ASSERT_GT(total, 16);
  ASSERT_EQ(processed.size(), static_cast<size_t>(1 + (total + 7) / 8)) << s.raw;  // the first report, then one per step
  for (size_t i = 1; i < processed.size(); ++i) EXPECT_LE(processed[i] - processed[i - 1], 8);
  EXPECT_EQ(processed.back(), total);
}

// Start-up has many moments (argument parsing, loading, binding, the listener thread
// starting); a SIGINT at any of them must end the process promptly, and one after the
// "listening" line must end it cleanly (exit 0).
TEST(ServerShutdown, SigintAtAnyMomentOfStartupExits) {
  const std::string bin = MOETIER_BINARY;
  const std::string model = model_path("qwen35moe-tiny-f32");
  struct Point {
    bool after_listening;
    int delay_us;
  };
  std::vector<Point> points;
  for (int d : {0, 2000, 10000, 30000}) points.push_back({false, d});
  for (int d : {0, 0, 0, 50, 200, 1000, 5000}) points.push_back({true, d});
  for (const Point& p : points) {
    const std::string err = testing::temp_file("sigint.stderr");
    const pid_t pid = ::fork();
    if (pid == 0) {
      FILE* e = std::freopen(err.c_str(), "w", stderr);
      FILE* o = std::freopen("/dev/null", "w", stdout);
      (void)e;
      (void)o;
      ::execl(bin.c_str(), bin.c_str(), "serve", "-m", model.c_str(), "--port", "0", "-t", "1", nullptr);
      ::_exit(127);
    }
    if (p.after_listening) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (testing::slurp_file(err).find("listening on") == std::string::npos &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(p.delay_us));
    ::kill(pid, SIGINT);
    int status = 0;
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!exited) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    EXPECT_TRUE(exited) << "SIGINT " << (p.after_listening ? "after listening" : "during start-up") << " + "
                        << p.delay_us << " us: still running after 15 s\n"
                        << testing::slurp_file(err);
    if (exited && p.after_listening) {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::slurp_file(err);
    }
    std::filesystem::remove(err);
  }
}

}  // namespace
}  // namespace moetier

namespace moetier {
namespace {

// Constrained output through the grammar engine, on the Qwen3 chat template (its tool-call
// form is <tool_call>{json}</tool_call>): even a random-weight model's output follows the
// grammar, so forced tool calls parse and JSON-schema answers validate.
TEST(ServerConstrained, GrammarSchemaAndForcedToolCalls) {
  ServerProcess server({"-m", model_path("qwen3moe-small-q4_k_m"), "-t", "2", "-c", "4096", "--chat-template-file",
                        kRef + "/chat/qwen3-chat-template.jinja"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  // A GBNF grammar: the output is one of its strings.
  auto g = post_json(c, "/completion", {{"prompt", "x"}, {"n_predict", 20}, {"grammar", R"(root ::= "yes" | "no")"}});
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_TRUE(g.json["content"] == "yes" || g.json["content"] == "no") << g.body;
  EXPECT_EQ(g.json["stop_type"], "eos");
  // Invalid grammars and schemas are 400s naming the problem.
  auto bad = post_json(c, "/completion", {{"prompt", "x"}, {"grammar", "root ::= undefined-rule"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("undefined rule"), std::string::npos) << bad.body;
  auto bad_schema = post_json(c, "/completion", {{"prompt", "x"}, {"json_schema", {{"not", {{"type", "string"}}}}}});
  EXPECT_EQ(bad_schema.status, 400) << bad_schema.body;

  const json user = {{{"role", "user"}, {"content", "Answer in JSON."}}};
  const json schema = {{"type", "object"},
                       {"properties", {{"n", {{"type", "integer"}, {"minimum", 0}, {"maximum", 99}}},
                                       {"ok", {{"type", "boolean"}}}}},
                       {"required", {"n", "ok"}}};
  auto js = post_json(c, "/v1/chat/completions",
                      {{"messages", user}, {"max_tokens", 400}, {"temperature", 0},
                       {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}});
  ASSERT_EQ(js.status, 200) << js.body;
  ASSERT_EQ(js.json["choices"][0]["finish_reason"], "stop") << js.body;
  const json answer = json::parse(js.json["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << js.body;
  EXPECT_TRUE(answer["n"].is_number_integer() && answer["n"].get<int>() >= 0 && answer["n"].get<int>() <= 99);
  EXPECT_TRUE(answer["ok"].is_boolean());

  // tool_choice required: a well-formed call the client can parse, streamed or not.
  const json tools = {{{"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}, {"maxLength", 6}}}}},
                                                     {"required", {"city"}}}}}}}};
  const json req = {{"messages", user}, {"max_tokens", 400}, {"temperature", 0}, {"tools", tools},
                    {"tool_choice", "required"}, {"parallel_tool_calls", false}};
  auto t = post_json(c, "/v1/chat/completions", req);
  ASSERT_EQ(t.status, 200) << t.body;
  const json& msg = t.json["choices"][0]["message"];
  ASSERT_TRUE(msg.contains("tool_calls")) << t.body;
  EXPECT_EQ(t.json["choices"][0]["finish_reason"], "tool_calls");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object() && args["city"].is_string()) << t.body;
  EXPECT_LE(args["city"].get<std::string>().size(), 6u * 4);  // 6 characters, up to 4 bytes each
  json sreq = req;
  sreq["stream"] = true;
  auto s = post_sse(c, "/v1/chat/completions", sreq);
  std::string name, arguments;
  for (const auto& e : s.events) {
    if (!e.contains("choices") || e["choices"].empty()) continue;
    const json& d = e["choices"][0]["delta"];
    if (!d.contains("tool_calls")) continue;
    for (const auto& tc : d["tool_calls"]) {
      if (tc.contains("function") && tc["function"].contains("name")) name += tc["function"]["name"].get<std::string>();
      if (tc.contains("function") && tc["function"].contains("arguments")) {
        arguments += tc["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(name, "get_weather") << s.raw;
  EXPECT_EQ(arguments, msg["tool_calls"][0]["function"]["arguments"]) << s.raw;
  // The tool's result goes back through the template and the conversation continues.
  json history = user;
  history.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", msg["tool_calls"]}});
  history.push_back({{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "sunny"}});
  auto rendered = post_json(c, "/apply-template", {{"messages", history}, {"tools", tools}});
  ASSERT_EQ(rendered.status, 200) << rendered.body;
  EXPECT_NE(rendered.json["prompt"].get<std::string>().find("<tool_response>\nsunny"), std::string::npos)
      << rendered.body;
  // Unknown function in tool_choice: 400.
  json wrong = req;
  wrong["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(post_json(c, "/v1/chat/completions", wrong).status, 400);
}

// A required tool call completes on a random-weight model, greedy and sampled, and its raw
// output has no runs of whitespace: the grammar allows one space, or one newline and an
// indent of at most 20, between JSON tokens. (A random-weight model spells the call's fixed
// text one character per token, about 70 tokens for this one; the budget leaves room for
// that, not for blank lines.)
TEST(ServerConstrained, RequiredToolCallHasNoRunsOfWhitespace) {
  ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "-t", "2", "-c", "1024", "--chat-template-file",
                        kRef + "/chat/qwen3-chat-template.jinja"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const json tools = {{{"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}, {"maxLength", 8}}}}},
                                                     {"required", {"city"}}}}}}}};
  const json user = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
  for (const auto& [temperature, seed] : {std::pair{0.0, 1}, std::pair{1.0, 1}, std::pair{1.0, 2}, std::pair{1.0, 3}}) {
    SCOPED_TRACE(fmt::format("temperature {} seed {}", temperature, seed));
    const json req = {{"messages", user}, {"max_tokens", 160}, {"temperature", temperature}, {"seed", seed},
                      {"logprobs", true}, {"tools", tools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}};
    auto t = post_json(c, "/v1/chat/completions", req);
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(t.json["choices"][0]["finish_reason"], "tool_calls") << t.body;
    const json& msg = t.json["choices"][0]["message"];
    ASSERT_TRUE(msg.contains("tool_calls")) << t.body;
    const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
    EXPECT_TRUE(args.is_object() && args["city"].is_string()) << t.body;
    // The raw text, token by token: no blank line, no run of more than one newline and 20
    // spaces or tabs.
    std::string raw;
    for (const json& token : t.json["choices"][0]["logprobs"]["content"]) raw += token["token"].get<std::string>();
    EXPECT_EQ(raw.find("\n\n"), std::string::npos) << raw;
    size_t run = 0, longest = 0;
    for (char ch : raw) {
      run = (ch == ' ' || ch == '\t' || ch == '\n') ? run + 1 : 0;
      longest = std::max(longest, run);
    }
    EXPECT_LE(longest, 21u) << raw;
  }
}

// A Llama 3.x-style template: a tool call is bare {"name", "parameters"} JSON.
const std::string kLlama3ToolTemplate =
    "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{%- if m.tool_calls %}{{ '{\"name\": \"' + m.tool_calls[0].function.name + '\", \"parameters\": ' }}"
    "{{ m.tool_calls[0].function.arguments | tojson }}}{%- else %}{{ m.content }}{%- endif %}<|eot_id|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}";

// A required call with one string parameter closes within 64 tokens on a random-weight
// model, whatever the seed: the call's fixed text, up to 4 characters of argument (up to 16
// bytes: this vocabulary spells most text a byte a token), the closing braces and the end of
// text take at most 59 tokens, and the arguments' JSON allows at most one whitespace character
// between its tokens (4 places here). (Qwen3's <tool_call>...</tool_call> wrapper adds about
// 25 tokens of this vocabulary, so its calls need a larger budget: see
// RequiredToolCallHasNoRunsOfWhitespace.)
TEST(ServerConstrained, RequiredOneStringCallClosesWithin64Tokens) {
  const testing::TempPath file("llama3-tools.jinja");
  const std::string& path = file.path();
  std::ofstream(path) << kLlama3ToolTemplate;
  ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "-t", "2", "-c", "1024", "--chat-template-file", path});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const json tools = {{{"type", "function"},
                       {"function", {{"name", "search"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"q", {{"type", "string"}, {"maxLength", 4}}}}},
                                                     {"required", {"q"}}}}}}}};
  const json user = json::array({{{"role", "user"}, {"content", "Look up the weather in Paris."}}});
  for (const auto& [temperature, seed] : {std::pair{0.0, 1}, std::pair{1.0, 1}, std::pair{1.0, 2}, std::pair{1.0, 3},
                                          std::pair{0.8, 4}, std::pair{0.8, 5}, std::pair{1.0, 6}, std::pair{0.7, 7}}) {
    SCOPED_TRACE(fmt::format("temperature {} seed {}", temperature, seed));
    json req = {{"messages", user}, {"max_tokens", 64}, {"temperature", temperature}, {"seed", seed},
                {"tools", tools}, {"tool_choice", "required"}, {"parallel_tool_calls", false}};
    auto t = post_json(c, "/v1/chat/completions", req);
    ASSERT_EQ(t.status, 200) << t.body;
    EXPECT_EQ(t.json["choices"][0]["finish_reason"], "tool_calls") << t.body;
    EXPECT_LE(t.json["usage"]["completion_tokens"].get<int>(), 64) << t.body;
    const json& msg = t.json["choices"][0]["message"];
    ASSERT_TRUE(msg.contains("tool_calls") && msg["tool_calls"].size() == 1) << t.body;
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "search");
    const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(args.is_object() && args["q"].is_string()) << t.body;
    // Streamed, the same call arrives whole.
    req["stream"] = true;
    auto s = post_sse(c, "/v1/chat/completions", req);
    ASSERT_EQ(s.status, 200);
    EXPECT_TRUE(s.done) << s.raw;
    EXPECT_EQ(testing::stream_finish_reason(s), "tool_calls") << s.raw;
    std::string arguments;
    for (const auto& e : s.events) {
      if (!e.contains("choices") || e["choices"].empty() || !e["choices"][0]["delta"].contains("tool_calls")) continue;
      for (const auto& tc : e["choices"][0]["delta"]["tool_calls"]) {
        if (tc.contains("function") && tc["function"].contains("arguments")) {
          arguments += tc["function"]["arguments"].get<std::string>();
        }
      }
    }
    EXPECT_EQ(arguments, msg["tool_calls"][0]["function"]["arguments"]) << s.raw;
  }
}

// Forced calls in formats other than Qwen's, end to end: a Llama 3.x-style template (bare
// {"name", "parameters"} JSON) and a Functionary v3.2-style one (">>>name\n" + arguments,
// which concatenates the arguments as text: the request's string arguments must reach it).
TEST(ServerConstrained, ForcedToolCallsInOtherFormats) {
  const std::string llama3 = kLlama3ToolTemplate;
  const std::string functionary =
      "{%- for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
      "{%- if m.tool_calls %}{%- for tc in m.tool_calls %}{{ '>>>' + tc.function.name + '\n' + tc.function.arguments }}"
      "{%- endfor %}{%- else %}{{ '>>>all\n' + m.content if m.role == 'assistant' else m.content }}{%- endif %}<|eot_id|>"
      "{%- endfor %}{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n>>>{%- endif %}";
  const json tools = {{{"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}, {"enum", {"Oslo", "Paris"}}}}}},
                                                     {"required", {"city"}}}}}}}};
  const json user = json::array({{{"role", "user"}, {"content", "Weather?"}}});
  for (const auto& [name, source, marker] : {std::tuple{"llama3", llama3, std::string("\"parameters\": {\"city\"")},
                                             std::tuple{"functionary", functionary, std::string(">>>get_weather\n{\"city\"")}}) {
    SCOPED_TRACE(name);
    const testing::TempPath file(std::string(name) + ".jinja");
    const std::string& path = file.path();
    std::ofstream(path) << source;
    ServerProcess server({"-m", model_path("qwen3moe-tiny-f32"), "-t", "2", "-c", "2048", "--chat-template-file", path});
    ASSERT_TRUE(server.ready()) << server.log();
    auto c = server.client();
    const json req = {{"messages", user}, {"max_tokens", 400}, {"temperature", 0}, {"tools", tools}, {"tool_choice", "required"},
                      {"parallel_tool_calls", false}};
    auto t = post_json(c, "/v1/chat/completions", req);
    ASSERT_EQ(t.status, 200) << t.body;
    const json& msg = t.json["choices"][0]["message"];
    ASSERT_TRUE(msg.contains("tool_calls")) << t.body;
    EXPECT_TRUE(msg["content"].is_null()) << t.body;
    EXPECT_EQ(t.json["choices"][0]["finish_reason"], "tool_calls");
    ASSERT_GE(msg["tool_calls"].size(), 1u);
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
    const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(args.is_object()) << t.body;
    EXPECT_TRUE(args["city"] == "Oslo" || args["city"] == "Paris") << t.body;
    json sreq = req;
    sreq["stream"] = true;
    auto s = post_sse(c, "/v1/chat/completions", sreq);
    std::string streamed_name, content;
    for (const auto& e : s.events) {
      if (!e.contains("choices") || e["choices"].empty()) continue;
      const json& d = e["choices"][0]["delta"];
      if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
      if (!d.contains("tool_calls")) continue;
      for (const auto& tc : d["tool_calls"]) {
        if (tc.contains("function") && tc["function"].contains("name")) streamed_name += tc["function"]["name"].get<std::string>();
      }
    }
    EXPECT_EQ(streamed_name.substr(0, 11), "get_weather") << s.raw;
    EXPECT_EQ(content, "") << s.raw;
    // The call goes back through the template (arguments as the client sends them: a string).
    json history = user;
    json call = msg["tool_calls"][0];
    history.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    history.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "sunny"}});
    auto rendered = post_json(c, "/apply-template", {{"messages", history}, {"tools", tools}});
    ASSERT_EQ(rendered.status, 200) << rendered.body;
    EXPECT_NE(rendered.json["prompt"].get<std::string>().find(marker), std::string::npos) << rendered.body;
  }
  // tools with a template of no known format (ChatML): a 400 naming the formats.
  ServerProcess chatml({"-m", model_path("qwen3moe-tiny-f32"), "-t", "2", "-c", "2048", "--chat-template", "chatml"});
  ASSERT_TRUE(chatml.ready()) << chatml.log();
  auto c = chatml.client();
  auto bad = post_json(c, "/v1/chat/completions", {{"messages", user}, {"tools", tools}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("Llama 3.x"), std::string::npos) << bad.body;
}

}  // namespace
}  // namespace moetier
