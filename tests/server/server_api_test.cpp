// `moetier serve` over real HTTP on loopback, against reference models: responses equal
// `moetier run` for the same greedy prompt, streaming equals non-streaming, llama.cpp's
// greedy tokens and probabilities come back through the API, and every kind of bad input
// gets a 4xx with an OpenAI-style error object while the server stays up.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/http_client.h"
#include "support/ref_data.h"
#include "support/server_process.h"
#include "text/utf8.h"

namespace moetier {
namespace {

using nlohmann::json;
using testing::get;
using testing::post_json;
using testing::post_raw;
using testing::post_sse;
using testing::ServerProcess;
using testing::stream_finish_reason;
using testing::stream_text;

const std::string kRef = testing::kRefDir;
std::string model_path(const std::string& name) { return testing::ref_model_path(name); }
std::string read_prompt(const std::string& id) { return testing::slurp_file(kRef + "/prompts/" + id + ".txt"); }

// The model most tests use: a small qwen35moe (DeltaNet + attention + shared expert) with a
// UD-Q4_K_XL-like quant mix.
const std::string kModel = "qwen35moe-small-ud_mix";

std::string message_content(const json& response) {
  return response["choices"][0]["message"]["content"].get<std::string>();
}

// Validates the error object of a 4xx/5xx reply: {"error": {"message": non-empty, "type": ...}}.
void expect_error(const testing::HttpReply& r, int status, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  ASSERT_TRUE(r.json.is_object()) << what << ": body is not JSON: " << r.body;
  ASSERT_TRUE(r.json.contains("error")) << what << ": " << r.body;
  EXPECT_TRUE(r.json["error"]["message"].is_string() && !r.json["error"]["message"].get<std::string>().empty())
      << what << ": " << r.body;
  EXPECT_TRUE(r.json["error"]["type"].is_string()) << what;
}

class ServerApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"-m", model_path(kModel), "-np", "2", "-t", "2", "--metrics", "--max-body-size",
                                 "65536", "-c", "1024"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->log(); }
  static ServerProcess* server_;
};
ServerProcess* ServerApi::server_ = nullptr;

TEST_F(ServerApi, HealthModelsPropsSlots) {
  auto c = server_->client();
  auto h = get(c, "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json["status"], "ok");
  auto m = get(c, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.json["object"], "list");
  EXPECT_EQ(m.json["data"][0]["id"], kModel + ".gguf");
  EXPECT_EQ(m.json["data"][0]["meta"]["n_ctx_slot"], 512);  // -c 1024 shared by -np 2
  auto p = get(c, "/props");
  ASSERT_EQ(p.status, 200);
  EXPECT_EQ(p.json["total_slots"], 2);
  EXPECT_EQ(p.json["default_generation_settings"]["n_ctx"], 512);
  // llama-server's clients read the special tokens' texts from /props.
  ASSERT_TRUE(p.json["bos_token"].is_string() && p.json["eos_token"].is_string()) << p.body;
  EXPECT_FALSE(p.json["eos_token"].get<std::string>().empty()) << p.body;
  auto s = get(c, "/slots");
  ASSERT_EQ(s.status, 200);
  ASSERT_EQ(s.json.size(), 2u);
  EXPECT_EQ(s.json[0]["n_ctx"], 512);
  auto nf = get(c, "/v1/nothing");
  expect_error(nf, 404, "unknown endpoint");
}

TEST_F(ServerApi, CompletionEqualsMoetierRunAndStreamEqualsNonStream) {
  const std::string prompt = read_prompt("p3_mixed");
  auto c = server_->client();
  const json req = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}};
  auto r = post_json(c, "/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = r.json["choices"][0]["text"];
  EXPECT_EQ(r.json["object"], "text_completion");
  EXPECT_EQ(r.json["usage"]["completion_tokens"].get<int>() + r.json["usage"]["prompt_tokens"].get<int>(),
            r.json["usage"]["total_tokens"].get<int>());

  // `moetier run` with the same prompt bytes, greedy, same -c per sequence and cache type.
  const auto run = testing::run_moetier("run -m '" + model_path(kModel) + "' -f '" + kRef +
                                        "/prompts/p3_mixed.txt' -n 24 --temp 0 -t 2");
  ASSERT_EQ(run.rc, 0) << run.err;
  std::string run_text = run.out.substr(0, run.out.size() - 1);  // run ends with a newline
  EXPECT_EQ(text, run_text);

  json sreq = req;
  sreq["stream"] = true;
  auto s = post_sse(c, "/v1/completions", sreq);
  ASSERT_EQ(s.status, 200);
  EXPECT_TRUE(s.done);
  EXPECT_TRUE(s.all_json);
  EXPECT_EQ(stream_text(s, "text"), text);
  EXPECT_EQ(stream_finish_reason(s), r.json["choices"][0]["finish_reason"].get<std::string>());
}

TEST_F(ServerApi, ChatEqualsRunOnTheRenderedPromptStreamedOrNot) {
  auto c = server_->client();
  const json messages = json::array({{{"role", "system"}, {"content", "You are terse."}},
                                     {{"role", "user"}, {"content", "Name three rivers of Europe. 欧洲的河流"}}});
  auto t = post_json(c, "/apply-template", {{"messages", messages}});
  ASSERT_EQ(t.status, 200) << t.body;
  const std::string prompt = t.json["prompt"];
  EXPECT_EQ(prompt,
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nName three rivers of Europe. "
            "欧洲的河流<|im_end|>\n<|im_start|>assistant\n");  // the built-in ChatML (the model has no template)

  const json req = {{"messages", messages}, {"max_tokens", 20}, {"temperature", 0}};
  auto r = post_json(c, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["object"], "chat.completion");
  EXPECT_EQ(r.json["choices"][0]["message"]["role"], "assistant");
  const std::string content = message_content(r.json);

  const std::string prompt_file = testing::temp_file("chat_prompt.txt");
  std::ofstream(prompt_file, std::ios::binary) << prompt;
  const auto run =
      testing::run_moetier("run -m '" + model_path(kModel) + "' -f '" + prompt_file + "' -n 20 --temp 0 -t 2");
  std::filesystem::remove(prompt_file);
  ASSERT_EQ(run.rc, 0) << run.err;
  EXPECT_EQ(content, run.out.substr(0, run.out.size() - 1));

  json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  auto s = post_sse(c, "/v1/chat/completions", sreq);
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(s.done);
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(s.events.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(stream_text(s, "content"), content);
  // include_usage: the last event has no choices and the usage.
  EXPECT_TRUE(s.events.back()["choices"].empty());
  EXPECT_EQ(s.events.back()["usage"], r.json["usage"]);
  for (const auto& e : s.events) EXPECT_EQ(e["id"], s.events.front()["id"]);
}

TEST_F(ServerApi, EveryResponseIsValidUtf8EvenWhenTheModelEmitsBrokenBytes) {
  // Random byte-level models emit bytes that are not UTF-8; the server holds incomplete
  // characters back and replaces impossible bytes with U+FFFD, in both modes.
  auto c = server_->client();
  bool saw_replacement = false;
  for (int seed = 1; seed <= 6; ++seed) {
    const json req = {{"prompt", "x"}, {"max_tokens", 40}, {"temperature", 1.5}, {"seed", seed}, {"top_k", 0},
                      {"min_p", 0}, {"top_p", 1}};
    auto r = post_json(c, "/v1/completions", req);  // strict JSON parse: fails on invalid UTF-8
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_FALSE(r.json.is_discarded());
    const std::string text = r.json["choices"][0]["text"];
    EXPECT_TRUE(text::is_valid_utf8(text));
    saw_replacement = saw_replacement || text.find("\xEF\xBF\xBD") != std::string::npos;
    json sreq = req;
    sreq["stream"] = true;
    auto s = post_sse(c, "/v1/completions", sreq);
    EXPECT_TRUE(s.all_json && s.done);
    EXPECT_EQ(stream_text(s, "text"), text) << "seed " << seed << ": same seed, same sampling";
  }
  EXPECT_TRUE(saw_replacement) << "expected at least one U+FFFD from a random byte-level model";
}

TEST_F(ServerApi, StopStringsCutTheOutput) {
  auto c = server_->client();
  const json req = {{"prompt", read_prompt("p2_short")}, {"max_tokens", 32}, {"temperature", 0}};
  auto full = post_json(c, "/v1/completions", req);
  ASSERT_EQ(full.status, 200);
  const std::string text = full.json["choices"][0]["text"];
  // A stop string from the middle of the greedy output: ASCII, so it is a clean cut.
  size_t at = std::string::npos;
  for (size_t i = 4; i + 2 < text.size(); ++i) {
    if (std::isalnum(static_cast<unsigned char>(text[i])) && std::isalnum(static_cast<unsigned char>(text[i + 1]))) {
      at = i;
      break;
    }
  }
  ASSERT_NE(at, std::string::npos) << "no ASCII pair in: " << text;
  const std::string stop = text.substr(at, 2);
  json sreq = req;
  sreq["stop"] = json::array({"\x01never", stop});
  auto r = post_json(c, "/v1/completions", sreq);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(r.json["choices"][0]["finish_reason"], "stop");
  sreq["stream"] = true;
  auto s = post_sse(c, "/v1/completions", sreq);
  EXPECT_EQ(stream_text(s, "text"), text.substr(0, text.find(stop)));
  EXPECT_EQ(stream_finish_reason(s), "stop");
}

TEST_F(ServerApi, TokenizeDetokenize) {
  auto c = server_->client();
  auto t = post_json(c, "/tokenize", {{"content", "hello <|im_start|> wörld"}, {"with_pieces", true}});
  ASSERT_EQ(t.status, 200) << t.body;
  std::vector<int> ids;
  for (const auto& p : t.json["tokens"]) ids.push_back(p["id"]);
  ASSERT_FALSE(ids.empty());
  auto d = post_json(c, "/detokenize", {{"tokens", ids}});
  ASSERT_EQ(d.status, 200);
  EXPECT_EQ(d.json["content"], "hello <|im_start|> wörld");
  auto plain = post_json(c, "/tokenize", {{"content", "hello <|im_start|>"}, {"parse_special", false}});
  ASSERT_EQ(plain.status, 200);
  EXPECT_GT(plain.json["tokens"].size(), 2u);
  expect_error(post_json(c, "/detokenize", {{"tokens", {1, 99999}}}), 400, "token out of range");
  expect_error(post_json(c, "/tokenize", {{"content", 5}}), 400, "content not a string");
}

TEST_F(ServerApi, BadInputGets4xxAndTheServerStaysUp) {
  auto c = server_->client();
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  struct Case {
    std::string what, path, body;
    int status;
    std::string param;
  };
  const std::string long_prompt(6000, 'a');  // far more than the 512-token slot context
  const std::vector<Case> cases = {
      {"invalid JSON", "/v1/chat/completions", "{\"messages\": [", 400, ""},
      {"not an object", "/v1/chat/completions", "[1,2]", 400, ""},
      {"empty body", "/v1/chat/completions", "", 400, ""},
      {"invalid UTF-8 in JSON", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", 400,
       ""},
      {"missing messages", "/v1/chat/completions", json{{"max_tokens", 4}}.dump(), 400, "messages"},
      {"messages not an array", "/v1/chat/completions", json{{"messages", "hi"}}.dump(), 400, "messages"},
      {"empty messages", "/v1/chat/completions", json{{"messages", json::array()}}.dump(), 400, "messages"},
      {"message without role", "/v1/chat/completions", json{{"messages", {{{"content", "x"}}}}}.dump(), 400, "messages"},
      {"unknown role", "/v1/chat/completions", json{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}.dump(), 400,
       "messages"},
      {"content a number", "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", 5}}}}}.dump(), 400,
       "messages"},
      {"image content", "/v1/chat/completions",
       json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}}.dump(),
       400, "messages"},
      {"temperature a string", "/v1/chat/completions", json{{"messages", msgs}, {"temperature", "hot"}}.dump(), 400,
       "temperature"},
      {"negative temperature", "/v1/chat/completions", json{{"messages", msgs}, {"temperature", -1}}.dump(), 400,
       "temperature"},
      {"top_p above 1", "/v1/chat/completions", json{{"messages", msgs}, {"top_p", 2}}.dump(), 400, "top_p"},
      {"negative max_tokens", "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", -5}}.dump(), 400,
       "max_tokens"},
      {"absurd max_tokens", "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", 1000000000000LL}}.dump(), 400,
       "max_tokens"},
      {"fractional max_tokens", "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", 1.5}}.dump(), 400,
       "max_tokens"},
      {"n = 17", "/v1/chat/completions", json{{"messages", msgs}, {"n", 17}}.dump(), 400, "n"},
      {"grammar not a string", "/v1/chat/completions", json{{"messages", msgs}, {"grammar", 5}}.dump(), 400, "grammar"},
      {"logit_bias a string", "/v1/chat/completions", json{{"messages", msgs}, {"logit_bias", "x"}}.dump(), 400,
       "logit_bias"},
      {"logit_bias token out of range", "/v1/chat/completions",
       json{{"messages", msgs}, {"logit_bias", {{"999999", 1}}}}.dump(), 400, "logit_bias"},
      {"mirostat", "/v1/chat/completions", json{{"messages", msgs}, {"mirostat", 2}}.dump(), 400, "mirostat"},
      {"samplers", "/completion", json{{"prompt", "x"}, {"samplers", {"top_k"}}}.dump(), 400, "samplers"},
      {"t_max_predict_ms", "/completion", json{{"prompt", "x"}, {"t_max_predict_ms", 100}}.dump(), 400,
       "t_max_predict_ms"},
      {"n_cmpl", "/completion", json{{"prompt", "x"}, {"n_cmpl", 3}}.dump(), 400, "n_cmpl"},
      {"unknown tool_choice", "/v1/chat/completions", json{{"messages", msgs}, {"tool_choice", "maybe"}}.dump(), 400,
       "tool_choice"},
      {"id_slot out of range", "/completion", json{{"prompt", "x"}, {"id_slot", 9}}.dump(), 400, "id_slot"},
      {"native prompt nested three deep", "/completion", json::parse(R"({"prompt": [[[1]], [[2]]]})").dump(), 400,
       "prompt"},
      {"stop a number", "/v1/chat/completions", json{{"messages", msgs}, {"stop", 5}}.dump(), 400, "stop"},
      {"stream not a bool", "/v1/chat/completions", json{{"messages", msgs}, {"stream", "yes"}}.dump(), 400, "stream"},
      {"negative seed", "/v1/chat/completions", json{{"messages", msgs}, {"seed", -5}}.dump(), 400, "seed"},
      {"top_logprobs too many", "/v1/chat/completions",
       json{{"messages", msgs}, {"logprobs", true}, {"top_logprobs", 50}}.dump(), 400, "top_logprobs"},
      {"json_schema output without a schema", "/v1/chat/completions",
       json{{"messages", msgs}, {"response_format", {{"type", "json_schema"}}}}.dump(), 400, "response_format"},
      {"prompt longer than the slot context", "/v1/chat/completions",
       json{{"messages", {{{"role", "user"}, {"content", long_prompt}}}}}.dump(), 400, "messages"},
      {"completion without prompt", "/v1/completions", json{{"max_tokens", 3}}.dump(), 400, "prompt"},
      {"completion prompt token out of range", "/v1/completions", json{{"prompt", {1, 2, 100000}}}.dump(), 400,
       "prompt"},
      {"several prompts with n > 1", "/v1/completions", json{{"prompt", {"a", "b"}}, {"n", 2}}.dump(), 400, "n"},
      {"completion prompt too long", "/v1/completions", json{{"prompt", long_prompt}}.dump(), 400, "prompt"},
  };
  for (const Case& k : cases) {
    auto r = post_raw(c, k.path, k.body);
    expect_error(r, k.status, k.what);
    if (!k.param.empty() && r.json.is_object() && r.json.contains("error")) {
      EXPECT_EQ(r.json["error"]["param"], k.param) << k.what << ": " << r.body;
    }
  }
  // llama-server's exceed_context_size_error, with OpenAI's code beside it.
  auto ctx = post_raw(c, "/v1/completions", json{{"prompt", long_prompt}}.dump());
  EXPECT_EQ(ctx.json["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(ctx.json["error"]["type"], "exceed_context_size_error");
  EXPECT_GT(ctx.json["error"]["n_prompt_tokens"].get<int64_t>(), ctx.json["error"]["n_ctx"].get<int64_t>() - 1);
  // As llama-server serving one model: any name (a client's default) is this model.
  for (const std::string& name : {kModel + ".gguf", kModel, std::string("gpt-3.5-turbo")}) {
    auto ok = post_json(c, "/v1/chat/completions", {{"model", name}, {"messages", msgs}, {"max_tokens", 2}});
    EXPECT_EQ(ok.status, 200) << name << ": " << ok.body;
  }
  // Body over --max-body-size 65536.
  auto big = post_raw(c, "/v1/chat/completions", std::string(70000, ' '));
  expect_error(big, 413, "oversized body");
  // Deeply nested JSON does not crash the parser.
  auto deep = post_raw(c, "/v1/chat/completions", std::string(20000, '[') + std::string(20000, ']'));
  EXPECT_EQ(deep.status / 100, 4) << deep.body;
  // Random bytes at every endpoint.
  std::mt19937 rng(7);
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize", "/apply-template"}) {
    for (int i = 0; i < 20; ++i) {
      std::string junk(static_cast<size_t>(rng() % 300), '\0');
      for (char& ch : junk) ch = static_cast<char>(rng());
      auto r = post_raw(c, path, junk);
      EXPECT_EQ(r.status / 100, 4) << path << " junk " << i << ": " << r.body;
    }
  }
  // Still serving, and max_tokens 0 is a valid request.
  EXPECT_EQ(get(c, "/health").status, 200);
  auto zero = post_json(c, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 0}});
  ASSERT_EQ(zero.status, 200) << zero.body;
  EXPECT_EQ(message_content(zero.json), "");
  EXPECT_EQ(zero.json["usage"]["completion_tokens"], 0);
  EXPECT_EQ(zero.json["choices"][0]["finish_reason"], "length");
}

TEST_F(ServerApi, MetricsCountWhatWasServed) {
  auto c = server_->client();
  auto before = get(c, "/metrics");
  ASSERT_EQ(before.status, 200);
  auto value = [](const std::string& text, const std::string& name) {
    // llama-server's metrics keep its names (llamacpp:), moetier's own are moetier:.
    size_t at = std::string::npos;
    std::string key;
    for (const char* prefix : {"\nllamacpp:", "\nmoetier:"}) {
      key = prefix + name + " ";
      if ((at = text.find(key)) != std::string::npos) break;
    }
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  const double gen0 = value(before.body, "tokens_predicted_total");
  ASSERT_GE(gen0, 0) << before.body;
  auto r = post_json(c, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 7}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200);
  auto after = get(c, "/metrics");
  EXPECT_EQ(value(after.body, "tokens_predicted_total") - gen0, 7.0) << after.body;
  EXPECT_NE(after.body.find("# TYPE llamacpp:requests_processing gauge"), std::string::npos);
  EXPECT_GE(value(after.body, "slots_total"), 2.0);
  EXPECT_GE(value(after.body, "requests_deferred"), 0.0);
}

// A model whose routed experts do not fit --ram-budget: /metrics reports the expert cache
// (the server's scheduler decodes through it while /metrics reads its counters), and the
// replies are the in-RAM server's.
TEST(ServerExperts, MetricsReportTheExpertCacheAndRepliesAreUnchanged) {
  const json body = {{"prompt", "The quick brown fox"}, {"max_tokens", 12}, {"ignore_eos", true}, {"temperature", 0}};
  std::string in_ram_text;
  {
    ServerProcess server({"-m", model_path("qwen35moe-small-q4_k_m"), "-t", "2", "--metrics"});
    ASSERT_TRUE(server.ready()) << server.log();
    auto c = server.client();
    auto r = post_json(c, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    in_ram_text = r.json["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(get(c, "/metrics").body.find("moetier:expert_"), std::string::npos);
  }
  ServerProcess server({"-m", model_path("qwen35moe-small-q4_k_m"), "-t", "2", "--metrics", "--ram-budget", "36"});
  ASSERT_TRUE(server.ready()) << server.log();
  EXPECT_NE(server.log().find("the rest read from the file on demand"), std::string::npos) << server.log();
  auto c = server.client();
  auto r = post_json(c, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["choices"][0]["text"].get<std::string>(), in_ram_text);
  const std::string metrics = get(c, "/metrics").body;
  auto value = [&](const std::string& name) {
    const std::string key = "\nmoetier:" + name + " ";
    const size_t at = metrics.find(key);
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + key.size()));
  };
  const double requests = value("expert_requests_total");
  EXPECT_GT(requests, 0) << metrics;
  EXPECT_EQ(requests, value("expert_hits_total") + value("expert_read_ahead_hits_total") + value("expert_misses_total"))
      << metrics;
  EXPECT_GT(value("expert_bytes_read_total"), 0) << metrics;
  const double ratio = value("expert_hit_ratio");
  EXPECT_GT(ratio, 0);
  EXPECT_LE(ratio, 1);
}

// llama.cpp's greedy tokens and top-5 probabilities (../shared/ref) come back through the
// API: on the F32 model every logit matches llama.cpp to 1e-4 (README section 6), so each
// log-probability (logit minus log-sum-exp) is within 2e-4.
TEST(ServerReference, GreedyTokensAndLogprobsMatchLlamaCpp) {
  ServerProcess server({"-m", model_path("qwen35moe-tiny-f32"), "-t", "2", "-ctk", "f32", "-ctv", "f32"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const auto cont = testing::read_json_file(kRef + "/expected/qwen35moe-tiny-f32/p3_mixed.continuation.json");
  const auto prompt = cont["prompt_tokens"].get<std::vector<int>>();
  auto r = post_json(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 32}, {"temperature", 0},
                                            {"ignore_eos", true}, {"logprobs", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::string expected;
  {
    // End-of-generation tokens are control tokens: they print as nothing.
    json ids = json::array();
    for (const auto& id : cont["greedy_tokens"]) {
      bool eog = false;
      for (const auto& e : cont["eog_token_ids"]) eog = eog || e == id;
      if (!eog) ids.push_back(id);
    }
    auto d = post_json(c, "/detokenize", {{"tokens", ids}});
    ASSERT_EQ(d.status, 200);
    expected = d.json["content"];
  }
  EXPECT_EQ(r.json["choices"][0]["text"], expected);
  const auto& lp = r.json["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), 32u);
  for (size_t step = 0; step < 32; ++step) {
    const auto& ref = cont["steps"][step];
    const double ref_lp = std::log(ref["top"][0]["prob"].get<double>());
    EXPECT_NEAR(lp["token_logprobs"][step].get<double>(), ref_lp, 2e-4) << "step " << step;
    // The legacy format maps piece text to logprob: pieces that are not UTF-8 on their own
    // all print as U+FFFD and share one key, so up to 5 entries.
    EXPECT_GE(lp["top_logprobs"][step].size(), 1u) << "step " << step;
    EXPECT_LE(lp["top_logprobs"][step].size(), 5u) << "step " << step;
  }
}

TEST(ServerReference, ChatLogprobsCarryTokenIdsAndTopAlternatives) {
  ServerProcess server({"-m", model_path("qwen35moe-tiny-f32"), "-t", "2", "-ctk", "f32", "-ctv", "f32"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  // The prompt tokens of p2_short rendered as a raw completion give llama.cpp's step-0
  // distribution; a chat request renders a template around it, so check the structure and
  // self-consistency here: the chosen token is the top-1 under greedy sampling and the
  // probabilities of the top alternatives are sorted and sum to at most 1.
  auto r = post_json(c, "/v1/chat/completions",
                     {{"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"max_tokens", 5}, {"temperature", 0},
                      {"logprobs", true}, {"top_logprobs", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  const auto& content = r.json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r.json["usage"]["completion_tokens"].get<size_t>());
  for (const auto& t : content) {
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_EQ(t["top_logprobs"][0]["id"], t["id"]);
    EXPECT_DOUBLE_EQ(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>());
    double mass = 0, prev = 0;
    for (size_t k = 0; k < 3; ++k) {
      const double l = t["top_logprobs"][k]["logprob"];
      if (k > 0) {
        EXPECT_LE(l, prev);
      }
      prev = l;
      mass += std::exp(l);
      EXPECT_TRUE(t["top_logprobs"][k]["bytes"].is_array());
    }
    EXPECT_LE(mass, 1.0 + 1e-6);
  }
}

// Reasoning: a template whose generation prompt opens <think> (as Qwen3.5/3.6's does when
// thinking is on). --reasoning-budget forces "</think>" after N thinking tokens, so even a
// random model produces both reasoning_content and content.
TEST(ServerReasoning, ThinkBlockGoesToReasoningContentAndTheBudgetClosesIt) {
  const std::string tmpl = testing::temp_file("think.jinja");
  std::ofstream(tmpl) << "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
                         "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
                         "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
                         "{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}";
  ServerProcess server({"-m", model_path(kModel), "-t", "2", "--chat-template-file", tmpl, "--reasoning-budget", "6"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const json msgs = json::array({{{"role", "user"}, {"content", "Think first."}}});
  const json req = {{"messages", msgs}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  auto r = post_json(c, "/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto& m = r.json["choices"][0]["message"];
  ASSERT_TRUE(m.contains("reasoning_content")) << r.body;
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(m["content"].get<std::string>().find("</think>"), std::string::npos);
  EXPECT_EQ(m["reasoning_content"].get<std::string>().find("</think>"), std::string::npos);

  json sreq = req;
  sreq["stream"] = true;
  auto s = post_sse(c, "/v1/chat/completions", sreq);
  EXPECT_EQ(stream_text(s, "reasoning_content"), m["reasoning_content"].get<std::string>());
  EXPECT_EQ(stream_text(s, "content"), m["content"].get<std::string>());

  // reasoning_format none: the raw text, tag included, stays in content.
  json raw = req;
  raw["reasoning_format"] = "none";
  auto n = post_json(c, "/v1/chat/completions", raw);
  ASSERT_EQ(n.status, 200);
  EXPECT_NE(message_content(n.json).find("</think>"), std::string::npos) << n.body;
  EXPECT_FALSE(n.json["choices"][0]["message"].contains("reasoning_content"));

  // enable_thinking false per request: no think block to fill.
  json off = req;
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  auto o = post_json(c, "/v1/chat/completions", off);
  ASSERT_EQ(o.status, 200);
  EXPECT_FALSE(o.json["choices"][0]["message"].contains("reasoning_content")) << o.body;
  auto t = post_json(c, "/apply-template", {{"messages", msgs}, {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_NE(t.json["prompt"].get<std::string>().find("<think>\n\n</think>"), std::string::npos);
  std::filesystem::remove(tmpl);
}

TEST(ServerAuth, ApiKeyIsRequiredExceptForHealth) {
  ServerProcess server({"-m", model_path("qwen35moe-tiny-f32"), "-t", "1", "--api-key", "s3cret"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  auto none = post_json(c, "/v1/chat/completions", req);
  expect_error(none, 401, "no key");
  EXPECT_EQ(none.json["error"]["type"], "authentication_error");
  expect_error(post_json(c, "/v1/chat/completions", req, {{"Authorization", "Bearer wrong"}}), 401, "wrong key");
  expect_error(post_json(c, "/v1/chat/completions", req, {{"Authorization", "Bearer s3cre"}}), 401, "prefix of the key");
  expect_error(get(c, "/v1/models"), 401, "models without key");
  EXPECT_EQ(post_json(c, "/v1/chat/completions", req, {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(get(c, "/v1/models", {{"Authorization", "Bearer s3cret"}}).status, 200);
  EXPECT_EQ(get(c, "/health").status, 200);
}

TEST(ServerCli, UsersCommandLineIsAcceptedAndBadFlagsFail) {
  // A user's command line. Without a hardware GPU (CI has only lavapipe, a software Vulkan
  // device) the GPU flags are accepted and the log says everything runs on the CPU; with one,
  // the plan table is printed and the dense layers go to the GPU.
  ServerProcess server({"-m", model_path("qwen35moe-tiny-f32"), "-c", "4096", "-ngl", "99", "-ncmoe", "40", "-ctk", "f16",
                        "-ctv", "f16", "-fa", "on", "--no-mmap", "-np", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string log = server.log();
  EXPECT_TRUE(log.find("everything runs on the CPU") != std::string::npos || log.find("memory plan") != std::string::npos)
      << log;
  EXPECT_EQ(server.stop(), 0) << server.log();

  auto bad = testing::run_moetier("serve -m '" + model_path("qwen35moe-tiny-f32") + "' --bogus");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--bogus"), std::string::npos);
  auto bad_np = testing::run_moetier("serve -m '" + model_path("qwen35moe-tiny-f32") + "' -np 0");
  EXPECT_EQ(bad_np.rc, 2);
  auto tiny_ctx = testing::run_moetier("serve -m '" + model_path("qwen35moe-tiny-f32") + "' -c 4 -np 4");
  EXPECT_EQ(tiny_ctx.rc, 2);
  EXPECT_NE(tiny_ctx.err.find("per slot"), std::string::npos) << tiny_ctx.err;
  auto no_model = testing::run_moetier("serve --port 0");
  EXPECT_EQ(no_model.rc, 2);
  auto help = testing::run_moetier("serve --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("--reasoning-budget"), std::string::npos);
}

}  // namespace
}  // namespace moetier
