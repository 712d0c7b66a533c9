// `moetier serve` under concurrency: parallel requests equal sequential ones bit for bit
// (continuous batching keeps each slot's arithmetic), cancelled requests free their slot
// within one step, the prompt cache reuses a slot's prefix without changing results, a
// bounded load test loses nothing, and SIGTERM shuts down cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
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
using testing::stream_finish_reason;
using testing::stream_text;
using Clock = std::chrono::steady_clock;

const std::string kRef = testing::kRefDir;
std::string model_path(const std::string& name) { return testing::ref_model_path(name); }

double metric(const std::string& text, const std::string& name) {
  // llama-server's metrics keep its names (llamacpp:), moetier's own are moetier:.
  size_t at = std::string::npos;
  std::string key;
  for (const char* prefix : {"\nllamacpp:", "\nmoetier:"}) {
    key = prefix + name + " ";
    if ((at = text.find(key)) != std::string::npos) break;
  }
  return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
}

// One request of the mixed workload and how to read its answer.
struct Job {
  std::string path;
  json body;
  bool stream = false;
};

std::vector<Job> mixed_jobs() {
  const char* prompts[] = {"The river", "fn main() {", "1 2 3 4", "Über den Wolken", "<html>", "东京"};
  std::vector<Job> jobs;
  for (int i = 0; i < 6; ++i) {
    Job j;
    const bool chat = i % 2 == 0;
    j.path = chat ? "/v1/chat/completions" : "/v1/completions";
    if (chat) {
      j.body = {{"messages", {{{"role", "user"}, {"content", prompts[i]}}}}};
    } else {
      j.body = {{"prompt", prompts[i]}};
    }
    j.body["max_tokens"] = 12 + i;
    if (i % 3 == 0) {
      j.body["temperature"] = 0;
    } else {
      j.body["temperature"] = 0.9;  // seeded sampling is as deterministic as greedy
      j.body["seed"] = 100 + i;
    }
    j.stream = i % 4 == 1;
    if (j.stream) j.body["stream"] = true;
    jobs.push_back(j);
  }
  return jobs;
}

// The text a job produced ("" with ok = false on any failure).
std::string run_job(httplib::Client& c, const Job& j, bool& ok) {
  const bool chat = j.path.find("chat") != std::string::npos;
  if (j.stream) {
    auto s = post_sse(c, j.path, j.body);
    ok = s.status == 200 && s.done && s.all_json && !stream_finish_reason(s).empty();
    return stream_text(s, chat ? "content" : "text");
  }
  auto r = post_json(c, j.path, j.body);
  ok = r.status == 200 && r.json.is_object() && r.json.contains("choices");
  if (!ok) return "";
  const auto& choice = r.json["choices"][0];
  ok = choice["finish_reason"].is_string();
  return chat ? choice["message"]["content"].get<std::string>() : choice["text"].get<std::string>();
}

TEST(ServerConcurrency, ParallelRequestsEqualSequentialOnes) {
  ServerProcess server({"-m", model_path("qwen35moe-small-ud_mix"), "-np", "4", "-c", "2048", "-t", "2", "--metrics"});
  ASSERT_TRUE(server.ready()) << server.log();
  const auto jobs = mixed_jobs();
  std::vector<std::string> sequential;
  {
    auto c = server.client();
    for (const Job& j : jobs) {
      bool ok = false;
      sequential.push_back(run_job(c, j, ok));
      ASSERT_TRUE(ok) << j.body.dump();
    }
  }
  // 4 clients × 3 requests at once; each request is one of the jobs above.
  std::vector<std::string> got(12);
  std::vector<char> oks(12, 0);  // not vector<bool>: its bits share words, and the clients write concurrently
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      auto c = server.client();
      for (int k = 0; k < 3; ++k) {
        const int idx = t * 3 + k;
        bool ok = false;
        got[idx] = run_job(c, jobs[(t + 2 * k) % jobs.size()], ok);
        oks[idx] = ok;
      }
    });
  }
  for (auto& th : clients) th.join();
  for (int t = 0; t < 4; ++t) {
    for (int k = 0; k < 3; ++k) {
      const int idx = t * 3 + k;
      EXPECT_TRUE(oks[idx]);
      EXPECT_EQ(got[idx], sequential[(t + 2 * k) % jobs.size()]) << "client " << t << " request " << k;
    }
  }
  auto c = server.client();
  auto m = get(c, "/metrics");
  // Batching happened: some forward passes held more than one slot.
  EXPECT_GT(metric(m.body, "n_busy_slots_per_decode"), 1.0) << m.body;
}

TEST(ServerConcurrency, PromptCacheReusesASlotPrefixWithoutChangingResults) {
  for (const std::string name : {"qwen35moe-small-ud_mix", "qwen3moe-small-q4_k_m"}) {
    ServerProcess server({"-m", model_path(name), "-np", "1", "-t", "2"});
    ASSERT_TRUE(server.ready()) << server.log();
    auto c = server.client();
    std::vector<int> first = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120};
    std::vector<int> longer = first;
    for (int i = 0; i < 8; ++i) longer.push_back(5 + 7 * i);
    // max_tokens 1: the sampled token is not fed, so the slot holds exactly `first`.
    auto r1 = post_json(c, "/v1/completions", {{"prompt", first}, {"max_tokens", 1}, {"temperature", 0}});
    ASSERT_EQ(r1.status, 200);
    const json req = {{"prompt", longer}, {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
    auto cached = post_json(c, "/v1/completions", req);
    ASSERT_EQ(cached.status, 200);
    EXPECT_EQ(cached.json["usage"]["prompt_tokens_details"]["cached_tokens"], first.size()) << name;
    json fresh_req = req;
    fresh_req["cache_prompt"] = false;
    auto fresh = post_json(c, "/v1/completions", fresh_req);
    ASSERT_EQ(fresh.status, 200);
    EXPECT_EQ(fresh.json["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(cached.json["choices"][0]["text"], fresh.json["choices"][0]["text"]) << name;
    if (name == "qwen3moe-small-q4_k_m") {
      // Attention-only: any common prefix is reusable, even of a different continuation.
      std::vector<int> branch(first.begin(), first.begin() + 6);
      branch.push_back(3);
      auto b = post_json(c, "/v1/completions", {{"prompt", branch}, {"max_tokens", 2}, {"temperature", 0}});
      EXPECT_EQ(b.json["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
    }
  }
}

TEST(ServerCancellation, ClientThatGoesAwayFreesItsSlotWithinOneStep) {
  ServerProcess server({"-m", model_path("qwen35moe-small-ud_mix"), "-np", "1", "-c", "4096", "-t", "2", "--metrics"});
  ASSERT_TRUE(server.ready()) << server.log();
  // Until the context is full (~4000 tokens, seconds of work) unless cancelled.
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", -1}, {"ignore_eos", true}, {"stream", true},
                    {"temperature", 0}};
  auto c = server.client();
  int seen = 0;
  post_sse(c, "/v1/completions", req, [&](const json&) { return ++seen < 3; });
  const auto closed = Clock::now();
  auto probe = server.client();
  bool freed = false;
  int64_t decoded = -1;
  while (Clock::now() - closed < std::chrono::seconds(10)) {
    auto s = get(probe, "/slots");
    if (s.status == 200 && !s.json[0]["is_processing"].get<bool>()) {
      freed = true;
      break;
    }
    decoded = s.json[0]["n_decoded"];
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - closed).count();
  ASSERT_TRUE(freed) << "slot still busy " << ms << " ms after the client left; decoded " << decoded;
  std::printf("[ cancel ] streamed request: slot free %.0f ms after the client closed\n", ms);
  auto m = get(probe, "/metrics");
  EXPECT_EQ(metric(m.body, "requests_cancelled_total"), 1.0) << m.body;
  EXPECT_LT(metric(m.body, "tokens_predicted_total"), 3500.0) << "the generation ran on";

  // A non-streamed request whose client gives up (closes the connection after 1 s) is
  // cancelled too.
  {
    auto impatient = server.client();
    json slow = req;
    slow.erase("stream");
    testing::HttpReply r;
    std::thread waiter([&] { r = post_json(impatient, "/v1/completions", slow); });
    std::this_thread::sleep_for(std::chrono::seconds(1));
    impatient.stop();
    waiter.join();
    EXPECT_EQ(r.status, 0) << "expected the client to give up";
  }
  const auto gave_up = Clock::now();
  freed = false;
  while (Clock::now() - gave_up < std::chrono::seconds(10)) {
    auto s = get(probe, "/slots");
    if (s.status == 200 && !s.json[0]["is_processing"].get<bool>()) {
      freed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(freed);
  std::printf("[ cancel ] non-streamed request: slot free %.0f ms after the client closed\n",
              std::chrono::duration<double, std::milli>(Clock::now() - gave_up).count());
  EXPECT_EQ(metric(get(probe, "/metrics").body, "requests_cancelled_total"), 2.0);
  // The slot serves the next request normally.
  auto next = post_json(probe, "/v1/completions", {{"prompt", "abc"}, {"max_tokens", 4}});
  EXPECT_EQ(next.status, 200) << next.body;
}

TEST(ServerLoad, HundredsOfRequestsNoneFailedOrLost) {
  ServerProcess server({"-m", model_path("qwen35moe-small-ud_mix"), "-np", "4", "-c", "4096", "-t", "2", "--metrics"});
  ASSERT_TRUE(server.ready()) << server.log();
  constexpr int kClients = 16, kPerClient = 25;  // 400 requests
  const auto jobs = mixed_jobs();
  std::vector<double> latency_ms;
  std::mutex mu;
  std::atomic<int> failed{0}, completed{0};
  std::atomic<int64_t> tokens{0};
  std::string first_failure;  // the request, for the failure message
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto c = server.client(60);
      for (int k = 0; k < kPerClient; ++k) {
        Job j = jobs[(t * 7 + k) % jobs.size()];
        j.body["max_tokens"] = 4 + (t + k) % 13;
        if (!j.stream) j.body["stream_options"] = nullptr;
        const auto start = Clock::now();
        bool ok = false;
        std::string got;  // what came back, for the failure message
        if (j.stream) {
          j.body["stream_options"] = {{"include_usage", true}};
          auto s = post_sse(c, j.path, j.body);
          ok = s.status == 200 && s.done && s.all_json && !s.events.empty() && s.events.back().contains("usage");
          if (ok) tokens += s.events.back()["usage"]["completion_tokens"].get<int64_t>();
          if (!ok) got = fmt::format("status {} ({}), done {}, all_json {}, {} events", s.status, s.error, s.done, s.all_json,
                                      s.events.size());
        } else {
          auto r = post_json(c, j.path, j.body);
          ok = r.status == 200 && r.json.is_object() && r.json.contains("usage") &&
               r.json["choices"][0]["finish_reason"].is_string();
          if (ok) tokens += r.json["usage"]["completion_tokens"].get<int64_t>();
          if (!ok) got = fmt::format("status {} ({}), body {}", r.status, r.error, r.body.substr(0, 300));
        }
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        (ok ? completed : failed)++;
        std::lock_guard<std::mutex> lk(mu);
        latency_ms.push_back(ms);
        if (!ok && first_failure.empty()) {
          first_failure = fmt::format("{} {} after {:.0f} ms: {}", j.path, j.body.dump(), ms, got);
        }
      }
    });
  }
  for (auto& th : clients) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(latency_ms.begin(), latency_ms.end());
  ASSERT_EQ(latency_ms.size(), static_cast<size_t>(kClients * kPerClient));
  const double p50 = latency_ms[latency_ms.size() / 2];
  const double p99 = latency_ms[latency_ms.size() * 99 / 100];
  auto c = server.client();
  auto m = get(c, "/metrics");
  std::printf(
      "[ load ] %d requests from %d clients (-np 4, qwen35moe-small-ud_mix): %d failed, %d completed in %.2f s; "
      "latency p50 %.1f ms, p99 %.1f ms; %lld tokens generated, %.0f tokens/s; %.2f slots per forward pass\n",
      kClients * kPerClient, kClients, failed.load(), completed.load(), wall, p50, p99,
      static_cast<long long>(tokens.load()), static_cast<double>(tokens.load()) / wall,
      metric(m.body, "n_busy_slots_per_decode"));
  EXPECT_EQ(failed.load(), 0) << "first failed request: " << first_failure << "\n" << server.log();
  EXPECT_EQ(completed.load(), kClients * kPerClient);
  EXPECT_EQ(metric(m.body, "requests_finished_total"), kClients * kPerClient);
  EXPECT_EQ(metric(m.body, "tokens_predicted_total"), static_cast<double>(tokens.load()));
  EXPECT_EQ(metric(m.body, "requests_processing"), 0.0);
  EXPECT_EQ(metric(m.body, "requests_deferred"), 0.0);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServerShutdown, SigtermEndsInFlightRequestsAndExitsCleanly) {
  ServerProcess server({"-m", model_path("qwen35moe-small-ud_mix"), "-np", "2", "-c", "4096", "-t", "2",
                        "--shutdown-grace", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  std::atomic<bool> started{false};
  testing::SseReply reply;
  std::thread client([&] {
    auto c = server.client(30);
    reply = post_sse(c, "/v1/completions",
                     {{"prompt", "Long story:"}, {"max_tokens", -1}, {"ignore_eos", true}, {"stream", true}},
                     [&](const json&) {
                       started = true;
                       return true;
                     });
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto t0 = Clock::now();
  const int status = server.stop(SIGTERM);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  client.join();
  EXPECT_EQ(status, 0) << server.log();
  std::printf("[ shutdown ] SIGTERM to exit: %.2f s (grace 1 s)\n", s);
  EXPECT_NE(server.log().find("shutting down"), std::string::npos);
  // The in-flight stream ended with an error event naming the shutdown (its grace ran out).
  ASSERT_FALSE(reply.events.empty());
  EXPECT_TRUE(reply.events.back().contains("error")) << reply.events.back().dump();
  EXPECT_TRUE(reply.all_json);

  // SIGINT on an idle server: immediate clean exit.
  ServerProcess idle({"-m", model_path("qwen35moe-tiny-f32"), "-t", "1"});
  ASSERT_TRUE(idle.ready()) << idle.log();
  EXPECT_EQ(idle.stop(SIGINT), 0) << idle.log();
}

}  // namespace
}  // namespace moetier
