// moetier serve: an OpenAI-compatible HTTP server (llama-server's command line) with -np
// parallel slots decoded together in one forward pass per step.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_report.h"
#include "core/args.h"
#include "core/utf8_path.h"
#include "engine/session.h"
#include "engine/summary.h"
#include "platform/signals.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "server/server_state.h"
#include "text/builtin_chat_templates.h"
#include "text/chat_prompt.h"

namespace moetier {

int cmd_serve(int argc, char** argv) {
  // First, before any thread starts: Ctrl+C and SIGTERM then reach no thread but wait for
  // this one's signals.wait() below, and a client that hangs up cannot kill the server.
  platform::ShutdownSignals signals;
  EngineOptions flags;
  SamplerParams sampling;
  server::ServerConfig config;
  int n_parallel = 1;
  int64_t n_predict = -1;
  std::string kwargs_text, template_file, template_name;
  bool no_slots = false, no_ui = false, ignored = false, no_jinja = false, slots_on = false, context_shift = false;
  int64_t cache_ram = -1;
  int64_t max_body = static_cast<int64_t>(config.max_body_bytes);
  ArgParser p("serve", "Serve a model over HTTP with an OpenAI-compatible API (llama-server's flags).");
  p.section("server");
  p.option({"--host"}, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 = every interface)", &config.host);
  p.option({"--port"}, "N", "port to listen on (default 8080; 0 = any free port)", &config.port);
  p.option({"-np", "--parallel"}, "N",
           "parallel slots (default 1). -c is shared among them: each slot gets -c / -np tokens, as llama-server",
           &n_parallel);
  p.option({"--api-key"}, "KEY", "require 'Authorization: Bearer KEY' (default: $MOETIER_API_KEY; /health is open)",
           &config.api_key);
  p.option({"-a", "--alias"}, "NAME[,NAME...]", "model name(s) in /v1/models and responses (default: the file name)",
           &config.model_name);
  p.option({"-to", "--timeout"}, "SECONDS", "socket read/write timeout (default 600)", &config.timeout_s);
  p.flag({"--metrics"}, &config.metrics, "serve Prometheus metrics at /metrics");
  p.flag({"--no-slots"}, &no_slots, "turn off the /slots endpoint");
  p.flag({"--no-ui"}, &no_ui, "turn off the chat page (web UI) at GET /");
  p.option({"--max-body-size"}, "BYTES", "largest request body accepted (default 16 MiB); larger gets 413",
           &max_body);
  p.option({"--threads-http"}, "N", "HTTP worker threads (default max(32, 8 x -np))", &config.http_threads);
  p.option({"--shutdown-grace"}, "SECONDS",
           "on SIGTERM/SIGINT, time in-flight requests get to finish before they are cancelled (default 5)",
           &config.shutdown_grace_s);
  p.flag({"-cb", "--cont-batching"}, &ignored, "accepted for compatibility: slots are always batched together");
  p.flag({"--jinja"}, &ignored, "accepted for compatibility: chat templates are always rendered as Jinja");
  p.flag({"--no-jinja"}, &no_jinja,
         "render chats with the built-in format the model's template writes (chatml, llama3, ...; ChatML when none "
         "matches) instead of the model's Jinja template; requests with tools are refused");
  p.flag({"--offline"}, &ignored, "accepted for compatibility: moetier never downloads anything");
  p.flag({"--swa-full"}, &ignored,
         "accepted for compatibility: no architecture moetier runs has sliding-window attention, so every cache is full-size");
  p.flag({"--no-cache-idle-slots"}, &ignored,
         "accepted for compatibility: moetier keeps no RAM copy of idle slots (their caches stay in the slots)");
  p.flag({"-bs", "--backend-sampling"}, &ignored, "accepted for compatibility: moetier samples on the CPU");
  p.flag({"--slots"}, &slots_on, "serve the /slots endpoint (the default)");
  p.option({"--slot-save-path"}, "DIR", "directory for POST /slots/N?action=save|restore (off without it)",
           &config.slot_save_path);
  p.option({"--cors-origins"}, "LIST",
           "browser origins allowed to call the API: * (default: any, as llama-server), localhost (pages on "
           "localhost/127.0.0.1/[::1] only), or a comma-separated list of origins",
           &config.cors_origins);
  p.option({"--tags"}, "TAGS", "comma-separated tags shown with the model in /v1/models", &config.model_tags);
  p.option({"--cache-ram", "-cram"}, "MiB",
           "accepted for compatibility: moetier keeps prompt caches in the slots only (no extra RAM cache), so "
           "any value uses 0 MiB",
           &cache_ram);
  p.flag({"--context-shift"}, &context_shift,
         "when a reply fills its slot, drop the older half of the tokens after the request's n_keep (n_discard "
         "sets how many) and go on generating, as llama-server; an error on models with recurrent (DeltaNet) "
         "state, which cannot drop tokens, and with --spec-type");
  p.flag({"--no-context-shift"}, &ignored, "the default: a full slot ends the reply");
  p.section("generation defaults (requests may override)");
  p.option({"-n", "--n-predict"}, "N",
           "the most tokens any reply gets, as llama-server: requests may ask for fewer (default -1: no limit)",
           &n_predict);
  p.option({"--reasoning"}, "on|off|auto",
           "thinking: sets the template's enable_thinking (default auto: the template's default)", &config.reasoning);
  p.option({"--reasoning-budget"}, "N",
           "tokens of thinking before '</think>' is forced (default -1: no limit; 0: thinking off)",
           &config.reasoning_budget);
  p.option({"--reasoning-format"}, "auto|none",
           "auto: <think> text goes to reasoning_content; none: left in content (default auto)",
           &config.defaults.reasoning_format);
  p.option({"--chat-template-kwargs"}, "JSON", "extra template variables, e.g. '{\"enable_thinking\":false}'",
           &kwargs_text);
  p.option({"--chat-template"}, "NAME|JINJA",
           "a built-in template by name (" + builtin_chat_template_list() + ") or, as llama-server, the template's Jinja source",
           &template_name);
  p.option({"--chat-template-file"}, "FILE",
           "use this Jinja template instead of the model's (without one, and without a template in the model: ChatML)",
           &template_file);
  add_engine_flags(p, flags);
  add_sampling_flags(p, sampling);
  SpecOptions spec_flags;  // --spec-type etc.: each slot drafts and verifies (server/scheduler.h)
  add_spec_flags(p, spec_flags);
  p.epilog(
      "Endpoints: POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize, /apply-template;\n"
      "GET /v1/models, /health, /metrics (--metrics), /slots, /props; a chat page at / (--no-ui: off);\n"
      "resumable streams (X-Conversation-Id): GET|DELETE /v1/stream?conv_id=ID, POST /v1/streams/lookup;\n"
      "Anthropic's POST /v1/messages and /v1/messages/count_tokens.\n"
      "example: moetier serve -m model.gguf -c 65536 -np 1 --host 0.0.0.0 --port 18080 --no-mmap");
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (flags.list_devices) return print_gpu_devices(flags.verbose);
  if (auto st = check_spec_options(spec_flags); !st) return report_error(st);
  if (config.api_key.empty()) {
    if (const char* env = std::getenv("MOETIER_API_KEY")) config.api_key = env;
  }
  // Vertex AI starts a custom container with these set (llama-server reads them too).
  if (const char* mode = std::getenv("AIP_MODE"); mode != nullptr && std::string_view(mode) == "PREDICTION") {
    auto route = [](const char* name, const char* fallback) {
      const char* v = std::getenv(name);
      std::string r = v != nullptr && *v != '\0' ? v : fallback;
      if (!r.empty() && r[0] != '/') r.insert(r.begin(), '/');
      return r;
    };
    config.vertex_predict_route = route("AIP_PREDICT_ROUTE", "/predict");
    config.vertex_health_route = route("AIP_HEALTH_ROUTE", "");
    if (const char* port = std::getenv("AIP_HTTP_PORT"); port != nullptr && *port != '\0') {
      auto p = parse_int(port, "AIP_HTTP_PORT");
      if (!p) return report_error(p.status());
      config.port = static_cast<int>(*p);
    }
  }
  if (n_parallel < 1 || n_parallel > 256) return report_error(Status::bad_input("-np must be in [1, 256]"));
  if (config.port < 0 || config.port > 65535) return report_error(Status::bad_input("--port must be in [0, 65535]"));
  if (config.timeout_s < 1) return report_error(Status::bad_input("--timeout must be at least 1 second"));
  if (max_body < 1024) return report_error(Status::bad_input("--max-body-size must be at least 1024 bytes"));
  if (config.shutdown_grace_s < 0) return report_error(Status::bad_input("--shutdown-grace must not be negative"));
  if (config.http_threads < 0) return report_error(Status::bad_input("--threads-http must not be negative"));
  config.max_body_bytes = static_cast<size_t>(max_body);
  config.slots_endpoint = !no_slots || slots_on;
  if (cache_ram >= 0) {
    std::fprintf(stderr, "moetier: note: --cache-ram %lld: moetier keeps prompt caches in the slots only, so no RAM "
                         "cache is used\n", static_cast<long long>(cache_ram));
  }
  if (!config.slot_save_path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(utf8_path(config.slot_save_path), ec);
    if (ec || !std::filesystem::is_directory(utf8_path(config.slot_save_path))) {
      return report_error(Status::bad_input(
          fmt::format("--slot-save-path {}: not a directory moetier can create ({})", config.slot_save_path, ec.message())));
    }
  }
  if (config.cors_origins.empty()) return report_error(Status::bad_input("--cors-origins: give *, localhost or a list"));
  config.webui = !no_ui;
  if (config.reasoning != "on" && config.reasoning != "off" && config.reasoning != "auto") {
    return report_error(Status::bad_input(fmt::format("--reasoning: '{}' is not one of on, off, auto", config.reasoning)));
  }
  if (config.reasoning_budget < -1) return report_error(Status::bad_input("--reasoning-budget must be -1, 0 or more"));
  const std::string& rf = config.defaults.reasoning_format;
  if (rf != "auto" && rf != "none" && rf != "deepseek") {
    return report_error(Status::bad_input(fmt::format("--reasoning-format: '{}' is not one of auto, none", rf)));
  }
  if (!kwargs_text.empty()) {
    config.chat_template_kwargs = nlohmann::ordered_json::parse(kwargs_text, nullptr, false);
    if (config.chat_template_kwargs.is_discarded() || !config.chat_template_kwargs.is_object()) {
      return report_error(Status::bad_input("--chat-template-kwargs: not a JSON object"));
    }
  }
  if (n_predict < -1) return report_error(Status::bad_input("-n must be -1 or more"));
  if (auto st = validate(sampling); !st) return report_error(st);

  StderrLoadReporter reporter;
  auto session = open_session(
      flags, spec_session_options(spec_flags, {.need_sequence = false, .n_seq = n_parallel, .reporter = &reporter}));
  if (!session) return report_error(session.status());
  const int64_t n_ctx_slot = session->n_ctx / n_parallel;
  if (n_ctx_slot < 2) {
    return report_error(Status::bad_input(
        fmt::format("-c {} shared by -np {} leaves {} tokens per slot; give a larger -c", session->n_ctx, n_parallel,
                    n_ctx_slot)));
  }
  auto chat_prompt = ChatPrompt::load(session->file->header(), *session->tokenizer,
                                      {.file = template_file, .name_or_source = template_name, .builtin_only = no_jinja});
  if (!chat_prompt) return report_error(chat_prompt.status());

  KvCacheOptions kv = session->kv;
  kv.n_ctx = n_ctx_slot;
  server::SchedulerOptions scheduler_options{
      .n_slots = n_parallel,
      .kv = kv,
      // A step is one llama_decode's worth: at most -b (the logical batch) and -ub tokens.
      .step_tokens = std::min(flags.n_batch, flags.n_ubatch),
      .context_shift = context_shift};
  if (spec_flags.params.type != SpecType::kNone) {  // one speculator per slot
    scheduler_options.make_speculator = [&spec_flags, &session, kv] {
      return make_speculator(spec_flags, *session, kv);
    };
  }
  auto scheduler = server::Scheduler::create(*session->model, *session->tokenizer, *session->pool, scheduler_options);
  if (!scheduler) return report_error(scheduler.status());

  config.model_path = flags.model_path;
  // --alias a,b,c: several names (as llama-server, the first in sorted order is the id).
  for (size_t start = 0; start < config.model_name.size();) {
    size_t end = config.model_name.find(',', start);
    if (end == std::string::npos) end = config.model_name.size();
    if (end > start) config.model_aliases.push_back(config.model_name.substr(start, end - start));
    start = end + 1;
  }
  std::sort(config.model_aliases.begin(), config.model_aliases.end());
  config.model_aliases.erase(std::unique(config.model_aliases.begin(), config.model_aliases.end()),
                             config.model_aliases.end());
  config.model_name = config.model_aliases.empty() ? path_utf8(utf8_path(flags.model_path).filename())
                                                   : config.model_aliases.front();
  config.defaults.sampling = sampling;
  config.defaults.n_predict = n_predict;
  config.defaults.n_ctx_slot = n_ctx_slot;
  config.defaults.verbose = flags.verbose;  // -v: responses carry __verbose, as llama-server
  server::ServerState state{.config = config,
                            .hparams = session->model->hparams(),
                            .tokenizer = *session->tokenizer,
                            .chat_prompt = *chat_prompt,
                            .scheduler = **scheduler};
  state.started_at = static_cast<int64_t>(std::time(nullptr));
  state.model_file_bytes = session->file->header().file_size;
  state.experts = session->experts.get();
  state.model_params = static_cast<uint64_t>(inspect::make_census(session->file->header()).n_params);

  server::HttpServer http(state);
  if (auto st = http.bind(); !st) return report_error(st);
  (*scheduler)->start();
  std::fprintf(stderr, "moetier: %d slot%s of %lld tokens (-c %lld shared by -np %d), chat template: %s%s\n",
               n_parallel, n_parallel == 1 ? "" : "s", static_cast<long long>(n_ctx_slot),
               static_cast<long long>(session->n_ctx), n_parallel, chat_prompt->origin().c_str(),
               config.api_key.empty() ? "" : ", API key required");
  std::fprintf(stderr, "moetier: listening on http://%s:%d\n", config.host.c_str(), http.port());
  std::fflush(stderr);

  std::thread server_thread([&http] { http.run(); });
  std::atomic<bool> served{false};
  std::thread shutdown_thread;
  for (;;) {
    const platform::ShutdownRequest request = signals.wait(std::chrono::milliseconds(100));
    if (request != platform::ShutdownRequest::kNone) {
      if (shutdown_thread.joinable()) {
        std::fprintf(stderr, "moetier: second signal: exiting now\n");
        std::fflush(stderr);
        std::_Exit(1);
      }
      std::fprintf(stderr, "moetier: %s: shutting down (in-flight requests get %d s to finish)\n",
                   std::string(platform::shutdown_request_name(request)).c_str(), config.shutdown_grace_s);
      std::fflush(stderr);
      shutdown_thread = std::thread([&] {
        http.shutdown();
        served = true;
      });
    }
    if (served) break;
  }
  shutdown_thread.join();
  server_thread.join();
  (*scheduler)->stop();
  std::fprintf(stderr, "moetier: server stopped\n");
  return 0;
}

}  // namespace moetier
