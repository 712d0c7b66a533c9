// What every HTTP handler of `moetier serve` shares: the configuration from the command
// line, the tokenizer and chat template (read-only, thread-safe), the scheduler, and the
// HTTP-level counters. Passed explicitly to the handlers (no globals).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/token_vocabulary.h"
#include "model/arch.h"
#include "model/expert_source.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "server/stream_sessions.h"
#include "text/chat_prompt.h"
#include "text/tokenizer.h"

namespace moetier::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (printed at startup)
  std::string api_key;             // "": no authentication
  std::string model_name;          // the first --alias (alphabetically), else the file name
  std::vector<std::string> model_aliases;  // --alias a,b,c (sorted); any name is served anyway
  std::string model_path;
  RequestDefaults defaults;
  std::string reasoning = "auto";  // --reasoning on|off|auto: enable_thinking for the template
  int64_t reasoning_budget = -1;   // --reasoning-budget
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool metrics = false;            // --metrics: serve /metrics
  bool slots_endpoint = true;      // --no-slots turns /slots off
  bool webui = true;               // --no-ui: no chat page at GET /
  int timeout_s = 600;             // --timeout: socket read/write timeout
  size_t max_body_bytes = 16u << 20;  // --max-body-size
  int http_threads = 0;            // 0: enough for the slots and a queue of waiting clients
  int shutdown_grace_s = 5;        // after SIGTERM, in-flight requests get this long to finish
  // --cors-origins: which browser origins may call the API. "*" (llama-server's default):
  // any origin is reflected; "localhost": only http(s)://localhost|127.0.0.1|[::1][:port];
  // otherwise a comma-separated allowlist of exact origins ("https://app.example.com").
  std::string cors_origins = "*";
  std::string slot_save_path;      // --slot-save-path: where slots are saved ("": saving is off)
  std::string model_tags;          // --tags
  // Vertex AI's custom-container contract (AIP_MODE=PREDICTION in the environment, which
  // llama-server reads too): POST vertex_predict_route answers {"instances": [...]} with
  // {"predictions": [...]}, each instance run by the endpoint its "@requestFormat" names
  // ("chatCompletions", "completions", ... or a path). "": off.
  std::string vertex_predict_route;
  std::string vertex_health_route;  // AIP_HEALTH_ROUTE: one more path for /health ("": none)
};

// Whether a browser page at `origin` (the Origin header) may call the API under `allowed`
// (ServerConfig::cors_origins).
bool cors_origin_allowed(const std::string& allowed, const std::string& origin);

struct HttpCounters {
  std::atomic<uint64_t> requests{0};        // every request answered
  std::atomic<uint64_t> client_errors{0};   // 4xx
  std::atomic<uint64_t> server_errors{0};   // 5xx
  std::atomic<int64_t> generations_in_flight{0};  // chat/completion requests not yet answered
};

struct ServerState {
  ServerConfig config;
  const HParams& hparams;
  const text::Tokenizer& tokenizer;
  const ChatPrompt& chat_prompt;
  Scheduler& scheduler;
  HttpCounters counters;
  std::atomic<bool> shutting_down{false};
  int64_t started_at = 0;  // Unix seconds
  uint64_t model_file_bytes = 0;
  uint64_t model_params = 0;
  // The routed experts' cache when they do not fit in RAM (null otherwise): /metrics reports it.
  const ExpertSource* experts = nullptr;
  // Streamed replies a client can read again (X-Conversation-Id; server/stream_sessions.h).
  StreamSessions stream_sessions;

  // The vocabulary as the grammar engine reads it, built on the first constrained request
  // (a trie over every token's bytes) and shared by all requests after it.
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary() const {
    std::call_once(grammar_vocab_once_, [this] { grammar_vocab_ = std::make_shared<const grammar::TokenVocabulary>(tokenizer); });
    return grammar_vocab_;
  }
  mutable std::once_flag grammar_vocab_once_;
  mutable std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
};

}  // namespace moetier::server
