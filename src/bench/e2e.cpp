#include "bench/e2e.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/utc_time.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"

namespace moetier::bench {

namespace {

using Clock = std::chrono::steady_clock;

int64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

}  // namespace

std::string e2e_message(int64_t turn) {
  return fmt::format(
      "({}) I am choosing a laptop to run a large mixture-of-experts language model at home. It has a small "
      "graphics card with eight gigabytes of memory and thirty-two gigabytes of system memory. Which parts of "
      "the model should stay on the graphics card, which on the processor, and why does that make generation "
      "faster? Please answer in a few short paragraphs.",
      turn);
}

Result<std::vector<int32_t>> e2e_prompt_tokens(const ChatPrompt& chat, const text::Tokenizer& tokenizer, int64_t turn) {
  ChatRenderParams params;
  params.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", e2e_message(turn)}}});
  ASSIGN_OR_RETURN(std::string prompt, chat.render(params));
  // As the server tokenizes a rendered chat: special tokens parsed, BOS as the model asks.
  return tokenizer.encode(prompt, {.parse_special = true, .add_special = true});
}

Result<E2eTurn> run_e2e_turn(const E2eTurnParams& p) {
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(std::vector<int32_t> prompt, e2e_prompt_tokens(p.chat, p.tokenizer, p.turn));
  SamplerParams sp;
  sp.seed = p.seed;
  ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(sp));
  std::optional<Clock::time_point> first;
  std::string text;  // the detokenized answer (kept so the work is not optimised away)
  ASSIGN_OR_RETURN(GenerationStats stats,
                   generate(p.model, p.seq, p.tokenizer, sampler, prompt, {.n_predict = p.n_gen, .stop_at_eog = false},
                            p.pool, [&text](std::string_view piece) { text.append(piece); },
                            [&first](int32_t) {
                              if (!first) first = Clock::now();
                            }));
  const auto t1 = Clock::now();
  return E2eTurn{.total_ns = ns_between(t0, t1),
                 .ttft_ns = ns_between(t0, first.value_or(t1)),
                 .n_prompt = static_cast<int64_t>(prompt.size()),
                 .n_gen = stats.n_generated};
}

Result<E2eServer> connect_e2e_server(const std::string& url) {
  auto address = eval::parse_server_url(url);
  if (!address) return Status::bad_input(fmt::format("--url {}: {}", url, address.status().message()));
  httplib::Client cli(address->host, address->port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(30, 0);
  auto res = cli.Get(address->base + "/v1/models");
  if (!res) {
    return Status::bad_input(fmt::format("--url {}: no server answers there ({})", url, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Status::bad_input(fmt::format("--url {}: GET /v1/models answered HTTP {} (is it an OpenAI-compatible server?)",
                                         url, res->status));
  }
  E2eServer server{.url = url, .address = *address};
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string()) {
    return Status::bad_input(fmt::format("--url {}: GET /v1/models did not list a model (not an OpenAI-compatible server?)", url));
  }
  server.model_id = j["data"][0]["id"].get<std::string>();
  return server;
}

Result<E2eTurn> http_e2e_turn(const E2eServer& server, int64_t n_gen, uint32_t seed, int64_t turn) {
  httplib::Client cli(server.address.host, server.address.port);
  cli.set_connection_timeout(10, 0);
  cli.set_read_timeout(3600, 0);
  cli.set_write_timeout(60, 0);
  const nlohmann::json body = {{"model", server.model_id},
                               {"messages", nlohmann::json::array({{{"role", "user"}, {"content", e2e_message(turn)}}})},
                               {"max_tokens", n_gen},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}},
                               {"ignore_eos", true},
                               {"cache_prompt", false},
                               {"seed", seed}};
  E2eTurn turn_out{.n_gen = n_gen};
  std::optional<Clock::time_point> first;
  std::string buffer, error_body;
  int status = 0;
  bool parse_error = false;
  httplib::Request req;
  req.method = "POST";
  req.path = server.address.base + "/v1/chat/completions";
  req.headers.emplace("Content-Type", "application/json");
  req.body = body.dump();
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, len);
      return true;
    }
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;  // SSE comments (heartbeats)
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") continue;
      const auto j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        parse_error = true;
        continue;
      }
      if (!first && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        const auto& delta = j["choices"][0].value("delta", nlohmann::json::object());
        for (const char* field : {"content", "reasoning_content"}) {
          if (delta.contains(field) && delta[field].is_string() && !delta[field].get<std::string>().empty()) {
            first = Clock::now();
          }
        }
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        turn_out.n_prompt = j["usage"].value("prompt_tokens", turn_out.n_prompt);
        turn_out.n_gen = j["usage"].value("completion_tokens", turn_out.n_gen);
      } else if (j.contains("timings") && j["timings"].is_object() && turn_out.n_prompt == 0) {
        turn_out.n_prompt = j["timings"].value("prompt_n", int64_t{0});
      }
    }
    return true;
  };
  const auto t0 = Clock::now();
  auto res = cli.send(req);
  const auto t1 = Clock::now();
  if (!res) {
    return Status::runtime(fmt::format("--url {}: the request failed ({})", server.url, httplib::to_string(res.error())));
  }
  if (status == 0) status = res->status;
  if (status != 200) {
    return Status::runtime(fmt::format("--url {}: POST /v1/chat/completions answered HTTP {}: {}", server.url, status,
                                       (error_body.empty() ? res->body : error_body).substr(0, 300)));
  }
  if (parse_error) return Status::runtime(fmt::format("--url {}: the stream held an event that is not JSON", server.url));
  turn_out.total_ns = ns_between(t0, t1);
  turn_out.ttft_ns = ns_between(t0, first.value_or(t1));
  return turn_out;
}

Result<TestResult> run_http_e2e_test(const E2eServer& server, const TestSpec& test, const HttpE2eOptions& options) {
  TestResult r;
  r.spec = test;
  r.model.filename = server.url;
  r.model.type = fmt::format("{} (HTTP)", server.model_id);
  r.backend = "HTTP";
  r.test_time = utc_now_iso8601();
  if (options.warmup) RETURN_IF_ERROR(http_e2e_turn(server, test.n_gen, options.seed, 0).status());
  for (int64_t rep = 0; rep < options.repetitions; ++rep) {
    ASSIGN_OR_RETURN(E2eTurn turn, http_e2e_turn(server, test.n_gen, options.seed + static_cast<uint32_t>(rep), rep % 9 + 1));
    r.samples_ns.push_back(turn.total_ns);
    r.ttft_ns.push_back(turn.ttft_ns);
    r.spec.n_prompt = turn.n_prompt;
    if (turn.n_gen != test.n_gen) {
      return Status::runtime(fmt::format("--url {}: the server generated {} tokens where {} were asked with ignore_eos "
                                         "(it does not honour ignore_eos; the speed would not be comparable)",
                                         server.url, turn.n_gen, test.n_gen));
    }
  }
  return r;
}

}  // namespace moetier::bench
