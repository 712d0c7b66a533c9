#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/args.h"
#include "core/utf8_path.h"
#include "platform/net.h"
#include "server/anthropic.h"
#include "server/generation_endpoint.h"
#include "server/http_util.h"
#include "server/metrics.h"
#include "server/webui.h"
#include "text/utf8.h"

namespace moetier::server {

using nlohmann::json;
using nlohmann::ordered_json;

bool cors_origin_allowed(const std::string& allowed, const std::string& origin) {
  if (origin.empty()) return false;
  if (allowed == "*") return true;
  if (allowed == "localhost") {
    // scheme://host[:port], host one of the loopback names.
    const size_t scheme_end = origin.find("://");
    if (scheme_end == std::string::npos) return false;
    const std::string scheme = origin.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https") return false;
    std::string host = origin.substr(scheme_end + 3);
    if (host.find('/') != std::string::npos) return false;
    if (!host.empty() && host[0] == '[') {
      const size_t close = host.find(']');
      if (close == std::string::npos) return false;
      const std::string rest = host.substr(close + 1);
      host = host.substr(1, close - 1);
      if (!rest.empty() && rest[0] != ':') return false;
    } else if (const size_t colon = host.find(':'); colon != std::string::npos) {
      host = host.substr(0, colon);
    }
    return host == "localhost" || host == "127.0.0.1" || host == "::1";
  }
  size_t start = 0;
  while (start <= allowed.size()) {
    size_t end = allowed.find(',', start);
    if (end == std::string::npos) end = allowed.size();
    std::string item = allowed.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item == origin) return true;
    start = end + 1;
  }
  return false;
}

namespace {

bool public_path(const std::string& path) { return path == "/health" || path == "/v1/health"; }

// Constant-time comparison, so the key cannot be guessed byte by byte from response times.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

ApiError error_for_status(int status, const httplib::Request& req, size_t max_body) {
  switch (status) {
    case 404:
      return {.http_status = 404, .type = "not_found_error", .message = fmt::format("no such endpoint: {} {}", req.method, req.path)};
    case 405:
      return {.http_status = 405, .type = "invalid_request_error", .message = fmt::format("{} is not allowed on {}", req.method, req.path)};
    case 413:
      return {.http_status = 413,
              .type = "invalid_request_error",
              .message = fmt::format("the request body is larger than the limit of {} bytes (--max-body-size)", max_body)};
    case 414:
      return {.http_status = 414, .type = "invalid_request_error", .message = "the request URI is too long"};
    case 408:
      return {.http_status = 408, .type = "invalid_request_error", .message = "the request was not received in time (--timeout)"};
    default:
      if (status >= 500) return {.http_status = status, .type = "server_error", .message = "internal server error"};
      return {.http_status = status, .type = "invalid_request_error", .message = "bad request"};
  }
}

// Reads an optional boolean field of a small JSON request (tokenize & co).
std::optional<ApiError> read_bool(const ordered_json& body, const char* name, bool& out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return ApiError::bad_request(fmt::format("'{}' must be true or false", name), name);
  out = it->get<bool>();
  return std::nullopt;
}

void handle_tokenize(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  ordered_json body;
  if (auto e = parse_json_body(req.body, body)) return send_error(res, *e);
  auto content = body.find("content");
  if (content == body.end() || !content->is_string()) {
    return send_error(res, ApiError::bad_request("'content' must be a string", "content"));
  }
  bool add_special = false, parse_special = true, with_pieces = false;
  for (auto [name, out] : {std::pair{"add_special", &add_special}, std::pair{"parse_special", &parse_special},
                           std::pair{"with_pieces", &with_pieces}}) {
    if (auto e = read_bool(body, name, *out)) return send_error(res, *e);
  }
  const auto ids = st.tokenizer.encode(content->get<std::string>(),
                                       {.parse_special = parse_special, .add_special = add_special});
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    // A piece that is not valid UTF-8 on its own (part of a character) is given as bytes.
    const std::string piece = st.tokenizer.token_to_piece(id, true);
    json p = {{"id", id}};
    if (text::is_valid_utf8(piece)) {
      p["piece"] = piece;
    } else {
      json bytes = json::array();
      for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
      p["piece"] = bytes;
    }
    tokens.push_back(p);
  }
  send_json(res, json{{"tokens", tokens}});
}

void handle_detokenize(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  ordered_json body;
  if (auto e = parse_json_body(req.body, body)) return send_error(res, *e);
  auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) {
    return send_error(res, ApiError::bad_request("'tokens' must be an array of token ids", "tokens"));
  }
  std::vector<int32_t> ids;
  for (const auto& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= st.tokenizer.n_vocab()) {
      return send_error(res, ApiError::bad_request(
                                 fmt::format("'tokens' must hold token ids in [0, {})", st.tokenizer.n_vocab()), "tokens"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  std::string content;
  text::append_utf8_sanitized(st.tokenizer.detokenize(ids, true), content);
  send_json(res, json{{"content", content}});
}

// A chat request's body parsed and rendered through the template (what the chat endpoint
// would tokenize), or the 4xx sent and nullopt.
std::optional<std::string> rendered_chat_prompt(const ServerState& st, const httplib::Request& req,
                                                httplib::Response& res) {
  ordered_json body;
  std::optional<ApiError> e = parse_json_body(req.body, body);
  GenerationRequest r;
  if (!e) e = parse_chat_request(body, st.config.defaults, r);
  std::string prompt;
  if (!e) e = render_chat_prompt(st, r, prompt);
  if (e) {
    send_error(res, *e);
    return std::nullopt;
  }
  return prompt;
}

void handle_apply_template(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const std::optional<std::string> prompt = rendered_chat_prompt(st, req, res);
  if (!prompt) return;
  std::string valid;
  text::append_utf8_sanitized(*prompt, valid);
  send_json(res, json{{"prompt", valid}});
}

// llama-server's POST /chat/completions/input_tokens: the prompt tokens a chat request would
// have (rendered through the template, tokenized as the generation endpoint does).
void handle_count_chat_tokens(const ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const std::optional<std::string> prompt = rendered_chat_prompt(st, req, res);
  if (!prompt) return;
  const auto tokens = st.tokenizer.encode(*prompt, {.parse_special = true, .add_special = true});
  send_json(res, json{{"input_tokens", tokens.size()}, {"object", "response.input_tokens"}});
}

json sampling_json(const SamplerParams& s) {
  return {{"temperature", s.temperature},         {"top_k", s.top_k},
          {"top_p", s.top_p},                     {"min_p", s.min_p},
          {"repeat_penalty", s.repeat_penalty},   {"repeat_last_n", s.repeat_last_n},
          {"presence_penalty", s.presence_penalty}, {"frequency_penalty", s.frequency_penalty},
          {"seed", s.seed == kRandomSeed ? -1 : static_cast<int64_t>(s.seed)}};
}

}  // namespace

HttpServer::HttpServer(ServerState& state) : state_(state), http_(std::make_unique<httplib::Server>()) {
  const ServerConfig& c = state_.config;
  // Every waiting or streaming client holds one thread; leave room for a queue of them
  // beyond the slots, plus the small endpoints.
  const int threads = c.http_threads > 0 ? c.http_threads : std::max(32, 8 * state_.scheduler.n_slots());
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_read_timeout(c.timeout_s, 0);
  http_->set_write_timeout(c.timeout_s, 0);
  http_->set_payload_max_length(c.max_body_bytes);
  // httplib's own options, and the listening socket's handle kept for its backlog (bind()).
  http_->set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = static_cast<int64_t>(sock);
  });
  routes();
}

HttpServer::~HttpServer() = default;

// httplib listens with a backlog of 5 connections; a burst of clients (more connecting at once
// than that while the accept thread waits for a core) then gets handshakes dropped or
// answered with SYN cookies, and now and then a connection reset (platform/net.h). Where the
// OS cannot widen it (Windows), the server works as before.
void HttpServer::widen_backlog() {
  constexpr int kListenBacklog = 512;
  if (listen_socket_ >= 0) (void)platform::set_listen_backlog(listen_socket_, kListenBacklog);
}

Status HttpServer::bind() {
  const ServerConfig& c = state_.config;
  if (c.port == 0) {
    port_ = http_->bind_to_any_port(c.host);
    if (port_ <= 0) return Status::runtime(fmt::format("cannot listen on {} (any port)", c.host));
    widen_backlog();
    return Status::ok();
  }
  if (!http_->bind_to_port(c.host, c.port)) {
    return Status::runtime(fmt::format("cannot listen on {}:{} (address in use, or not an address of this machine)",
                                       c.host, c.port));
  }
  port_ = c.port;
  widen_backlog();
  return Status::ok();
}

void HttpServer::run() {
  http_->listen_after_bind();
  listener_done_ = true;
}

void HttpServer::shutdown() {
  state_.shutting_down = true;
  state_.scheduler.close();
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(state_.config.shutdown_grace_s);
  while (state_.counters.generations_in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  if (state_.counters.generations_in_flight.load() > 0) {
    state_.scheduler.abort_all("the server is shutting down");
    const auto hard = std::chrono::steady_clock::now() + 2s;
    while (state_.counters.generations_in_flight.load() > 0 && std::chrono::steady_clock::now() < hard) {
      std::this_thread::sleep_for(20ms);
    }
  }
  // httplib's stop() only acts on a listener that is already running: one that has not
  // entered its accept loop yet (a signal right after "listening" was printed) would miss it
  // and then serve forever. So stop until run() has returned.
  while (!listener_done_.load()) {
    http_->stop();
    std::this_thread::sleep_for(5ms);
  }
}

namespace {

// The resumable-stream routes (server/stream_sessions.h).
void register_stream_routes(ServerState& st, httplib::Server& h) {
  auto now = [] { return static_cast<int64_t>(std::time(nullptr)); };
  h.Get("/v1/stream", [&st, now](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.get_param_value("conv_id");
    if (id.empty()) return send_error(res, ApiError::bad_request("give the stream's conv_id", "conv_id"));
    auto session = st.stream_sessions.find(id, now());
    if (!session) {
      return send_error(res, {.http_status = 404, .type = "not_found_error", .message = "stream not found or expired"});
    }
    size_t from = 0;
    if (req.has_param("from")) {
      const std::string text = req.get_param_value("from");
      auto value = parse_int(text, "from");
      if (!value || *value < 0) return send_error(res, ApiError::bad_request("'from' must be a byte offset", "from"));
      from = static_cast<size_t>(*value);
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto offset = std::make_shared<size_t>(from);
    res.set_chunked_content_provider("text/event-stream", [session, offset](size_t, httplib::DataSink& sink) {
      std::string chunk;
      while (true) {
        chunk.clear();
        switch (session->read(*offset, chunk, std::chrono::milliseconds(200))) {
          case StreamSession::Read::kData:
            *offset += chunk.size();
            if (!sink.write(chunk.data(), chunk.size())) return false;
            break;
          case StreamSession::Read::kFinished:
            sink.done();
            return true;
          case StreamSession::Read::kLost:
            return false;  // the bytes asked for were dropped (a reply larger than the buffer)
          case StreamSession::Read::kTimeout:
            if (!sink.is_writable()) return false;
            break;
        }
      }
    });
  });
  h.Delete("/v1/stream", [&st](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.get_param_value("conv_id");
    if (id.empty()) return send_error(res, ApiError::bad_request("give the stream's conv_id", "conv_id"));
    st.stream_sessions.stop(id);  // as llama-server: 204 whether or not it was still there
    res.status = 204;
  });
  h.Post("/v1/streams/lookup", [&st, now](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return send_error(res, ApiError::bad_request("the body is not a JSON object"));
    std::vector<std::string> ids;
    if (auto it = body.find("conversation_ids"); it != body.end() && it->is_array()) {
      for (const auto& v : *it) {
        if (v.is_string()) ids.push_back(v.get<std::string>());
      }
    }
    json out = json::array();
    for (const auto& session : st.stream_sessions.lookup(ids, now())) {
      const StreamSession::Info info = session->info();
      out.push_back({{"conversation_id", session->id()},
                     {"is_done", info.done},
                     {"total_bytes", info.total_bytes},
                     {"started_at", info.started_at},
                     {"completed_at", info.completed_at}});
    }
    send_json(res, out);
  });
}

// Vertex AI's predict route (ServerConfig::vertex_predict_route): the instances run at once,
// each by the endpoint its "@requestFormat" names, never streamed; an instance that fails
// gets its error object as its prediction.
void register_vertex_predict(ServerState& st, httplib::Server& h) {
  using Handler = httplib::Server::Handler;
  auto generation = [&st](Endpoint e) -> Handler {
    return [&st, e](const httplib::Request& req, httplib::Response& res) { handle_generation(st, e, req, res); };
  };
  // Vertex's camelCase names of the paths (the /v1/ prefix left out), and the paths themselves.
  const std::map<std::string, std::pair<std::string, Handler>> endpoints = {
      {"chatCompletions", {"/v1/chat/completions", generation(Endpoint::kChat)}},
      {"completions", {"/v1/completions", generation(Endpoint::kCompletion)}},
      {"completion", {"/completion", generation(Endpoint::kNative)}},
      {"infill", {"/infill", generation(Endpoint::kInfill)}},
      {"tokenize", {"/tokenize", [&st](const httplib::Request& q, httplib::Response& r) { handle_tokenize(st, q, r); }}},
      {"detokenize",
       {"/detokenize", [&st](const httplib::Request& q, httplib::Response& r) { handle_detokenize(st, q, r); }}},
      {"applyTemplate",
       {"/apply-template", [&st](const httplib::Request& q, httplib::Response& r) { handle_apply_template(st, q, r); }}},
  };
  auto find = [endpoints](const std::string& format) -> const std::pair<std::string, Handler>* {
    if (auto it = endpoints.find(format); it != endpoints.end()) return &it->second;
    for (const auto& [name, entry] : endpoints) {
      if (entry.first == format || (format.rfind("/v1/", 0) != 0 && "/v1" + format == entry.first)) return &entry;
    }
    return nullptr;
  };
  h.Post(st.config.vertex_predict_route, [find](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return send_error(res, ApiError::bad_request("the body is not a JSON object"));
    auto it = body.find("instances");
    if (it == body.end() || !it->is_array()) {
      return send_error(res, ApiError::bad_request("the body needs an array 'instances'", "instances"));
    }
    constexpr size_t kMaxInstances = 128;  // as llama-server
    if (it->size() > kMaxInstances) {
      return send_error(res, ApiError::bad_request(fmt::format("at most {} instances", kMaxInstances), "instances"));
    }
    std::vector<std::future<json>> runs;
    for (const json& instance : *it) {
      runs.push_back(std::async(std::launch::async, [&req, &find, instance]() -> json {
        if (!instance.is_object() || !instance.contains("@requestFormat") || !instance["@requestFormat"].is_string()) {
          return ApiError::bad_request("each instance is an object with a string '@requestFormat'").to_json();
        }
        const auto* endpoint = find(instance["@requestFormat"].get<std::string>());
        if (endpoint == nullptr) {
          return ApiError::bad_request("no endpoint for @requestFormat '" + instance["@requestFormat"].get<std::string>() + "'")
              .to_json();
        }
        json payload = instance;
        payload.erase("@requestFormat");
        if (payload.contains("stream")) payload["stream"] = false;  // one answer per instance
        httplib::Request inner;
        inner.method = "POST";
        inner.path = endpoint->first;
        inner.headers = req.headers;
        inner.body = payload.dump();
        auto [status, text] = run_inside(endpoint->second, inner);
        json out = json::parse(text, nullptr, false);
        if (out.is_discarded()) return ApiError{.http_status = 500, .type = "server_error", .message = text}.to_json();
        return out;
      }));
    }
    json predictions = json::array();
    for (auto& run : runs) predictions.push_back(run.get());
    send_json(res, json{{"predictions", predictions}});
  });
}

}  // namespace

void HttpServer::routes() {
  ServerState& st = state_;
  httplib::Server& h = *http_;

  h.set_pre_routing_handler([&st](const httplib::Request& req, httplib::Response& res) {
    // CORS, so browser chat UIs on other origins can call the API: as llama-server, an
    // allowed Origin is reflected with credentials allowed (the API key travels in a header);
    // a page on an origin --cors-origins does not allow gets no CORS headers, so the browser
    // keeps it from reading any answer (its preflight too is a 200 without a grant, as
    // llama-server answers it: the missing grant is what the browser acts on).
    const std::string origin = req.get_header_value("Origin");
    res.set_header("Vary", "Origin");
    const bool cors_ok = cors_origin_allowed(st.config.cors_origins, origin);
    if (cors_ok) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Access-Control-Allow-Credentials", "true");
    } else if (origin.empty() && st.config.cors_origins == "*") {
      res.set_header("Access-Control-Allow-Origin", "*");
    }
    if (req.method == "OPTIONS") {
      if (!cors_ok && !origin.empty()) {
        res.status = 200;
        return httplib::Server::HandlerResponse::Handled;
      }
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key");
      res.set_header("Access-Control-Max-Age", "86400");
      res.status = 200;  // as llama-server answers a preflight
      return httplib::Server::HandlerResponse::Handled;
    }
    if (st.config.api_key.empty() || public_path(req.path) || req.path == st.config.vertex_health_route ||
        is_webui_request(req)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    std::string key;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) key = auth.substr(7);
    if (key.empty()) key = req.get_header_value("X-Api-Key");
    if (!same_secret(key, st.config.api_key)) {
      send_error(res, {.http_status = 401,
                       .type = "authentication_error",
                       .message = key.empty() ? "missing API key: send 'Authorization: Bearer KEY'" : "invalid API key",
                       .code = "invalid_api_key"});
      res.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  const size_t max_body = st.config.max_body_bytes;
  h.set_error_handler(httplib::Server::HandlerWithResponse([max_body](const httplib::Request& req,
                                                                       httplib::Response& res) {
    if (!res.body.empty() || res.content_length_ > 0) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, error_for_status(res.status, req, max_body));
    return httplib::Server::HandlerResponse::Handled;
  }));
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal server error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal server error: ") + e.what();
    } catch (...) {
    }
    send_error(res, {.http_status = 500, .type = "server_error", .message = what});
  });
  h.set_logger([&st](const httplib::Request&, const httplib::Response& res) {
    st.counters.requests.fetch_add(1);
    if (res.status >= 500) {
      st.counters.server_errors.fetch_add(1);
    } else if (res.status >= 400) {
      st.counters.client_errors.fetch_add(1);
    }
  });

  auto health = [&st](const httplib::Request&, httplib::Response& res) {
    if (st.shutting_down) {
      return send_error(res, {.http_status = 503, .type = "unavailable_error", .message = "the server is shutting down"});
    }
    send_json(res, json{{"status", "ok"}});
  };
  h.Get("/health", health);
  h.Get("/v1/health", health);

  auto models = [&st](const httplib::Request&, httplib::Response& res) {
    const HParams& hp = st.hparams;
    json model = {{"id", st.config.model_name},
                  {"object", "model"},
                  {"created", st.started_at},
                  {"owned_by", "moetier"},
                  {"meta",
                   {{"arch", hp.arch},
                    {"n_vocab", hp.n_vocab},
                    {"n_ctx_train", hp.n_ctx_train},
                    {"n_ctx_slot", st.scheduler.n_ctx_slot()},
                    {"n_embd", hp.n_embd},
                    {"n_params", st.model_params},
                    {"size", st.model_file_bytes}}}};
    json tags = json::array();
    for (size_t start = 0; start < st.config.model_tags.size();) {
      size_t end = st.config.model_tags.find(',', start);
      if (end == std::string::npos) end = st.config.model_tags.size();
      if (end > start) tags.push_back(st.config.model_tags.substr(start, end - start));
      start = end + 1;
    }
    if (!tags.empty()) model["tags"] = tags;
    model["aliases"] = st.config.model_aliases;
    // llama-server also lists the model under "models" (its older shape).
    json legacy = {{"name", st.config.model_name}, {"model", st.config.model_name}, {"type", "model"},
                   {"description", ""}, {"tags", tags}, {"capabilities", json::array({"completion"})}};
    send_json(res, json{{"object", "list"}, {"data", json::array({model})}, {"models", json::array({legacy})}});
  };
  h.Get("/v1/models", models);
  h.Get("/models", models);

  auto chat = [&st](const httplib::Request& req, httplib::Response& res) {
    handle_generation(st, Endpoint::kChat, req, res);
  };
  auto completion = [&st](const httplib::Request& req, httplib::Response& res) {
    handle_generation(st, Endpoint::kCompletion, req, res);
  };
  h.Post("/v1/chat/completions", chat);
  h.Post("/chat/completions", chat);
  h.Post("/v1/completions", completion);
  // llama-server's native API, on both of its paths (/completions without /v1/ is native
  // there, not OpenAI's).
  auto native = [&st](const httplib::Request& req, httplib::Response& res) {
    handle_generation(st, Endpoint::kNative, req, res);
  };
  h.Post("/completion", native);
  h.Post("/completions", native);
  h.Post("/infill", [&st](const httplib::Request& req, httplib::Response& res) {
    handle_generation(st, Endpoint::kInfill, req, res);
  });

  h.Post("/tokenize", [&st](const httplib::Request& req, httplib::Response& res) { handle_tokenize(st, req, res); });
  h.Post("/detokenize", [&st](const httplib::Request& req, httplib::Response& res) { handle_detokenize(st, req, res); });
  h.Post("/chat/completions/input_tokens",
         [&st](const httplib::Request& req, httplib::Response& res) { handle_count_chat_tokens(st, req, res); });
  h.Post("/v1/chat/completions/input_tokens",
         [&st](const httplib::Request& req, httplib::Response& res) { handle_count_chat_tokens(st, req, res); });
  h.Post("/apply-template",
         [&st](const httplib::Request& req, httplib::Response& res) { handle_apply_template(st, req, res); });

  h.Get("/metrics", [&st](const httplib::Request&, httplib::Response& res) {
    if (!st.config.metrics) {
      return send_error(res, {.http_status = 501,
                              .type = "not_supported_error",
                              .message = "metrics are off; start the server with --metrics"});
    }
    res.set_header("Process-Start-Time-Unix", std::to_string(st.started_at));  // as llama-server
    res.set_content(render_metrics(st), "text/plain; version=0.0.4; charset=utf-8");
  });

  register_stream_routes(st, h);
  register_anthropic_routes(st, h, [&st](const httplib::Request& req, httplib::Response& res) {
    handle_count_chat_tokens(st, req, res);
  });
  if (!st.config.vertex_predict_route.empty()) register_vertex_predict(st, h);
  if (!st.config.vertex_health_route.empty()) h.Get(st.config.vertex_health_route, health);

  h.Get("/slots", [&st](const httplib::Request&, httplib::Response& res) {
    if (!st.config.slots_endpoint) {
      return send_error(res, {.http_status = 501, .type = "not_supported_error", .message = "the /slots endpoint is off (--no-slots)"});
    }
    json out = json::array();
    for (const SlotInfo& s : st.scheduler.slots()) {
      out.push_back({{"id", s.id},
                     {"n_ctx", s.n_ctx},
                     {"is_processing", s.busy},
                     {"n_cached", s.n_cached},
                     {"n_prompt_tokens", s.n_prompt},
                     {"n_decoded", s.n_generated}});
    }
    send_json(res, out);
  });

  // llama-server's slot actions: save / restore a slot's cache to a file under
  // --slot-save-path, or erase it.
  h.Post(R"(/slots/(\d+))", [&st](const httplib::Request& req, httplib::Response& res) {
    int id = -1;
    try {
      id = std::stoi(req.matches[1].str());
    } catch (const std::exception&) {
      return send_error(res, ApiError::bad_request("the slot id is not a number", "id_slot"));
    }
    const std::string action = req.get_param_value("action");
    SlotAction what;
    if (action == "save") {
      what = SlotAction::kSave;
    } else if (action == "restore") {
      what = SlotAction::kRestore;
    } else if (action == "erase") {
      what = SlotAction::kErase;
    } else {
      return send_error(res, ApiError::bad_request("'action' must be save, restore or erase", "action"));
    }
    std::string filename, path;
    if (what != SlotAction::kErase) {
      if (st.config.slot_save_path.empty()) {
        return send_error(res, {.http_status = 501,
                                .type = "not_supported_error",
                                .message = "slot save/restore is off: start the server with --slot-save-path DIR"});
      }
      ordered_json body;
      if (auto e = parse_json_body(req.body, body)) return send_error(res, *e);
      auto f = body.find("filename");
      if (f == body.end() || !f->is_string() || f->get_ref<const std::string&>().empty()) {
        return send_error(res, ApiError::bad_request("'filename' must be a non-empty string", "filename"));
      }
      filename = f->get<std::string>();
      // A plain file name inside --slot-save-path: no directories, no way out of it.
      if (filename.find('/') != std::string::npos || filename.find('\\') != std::string::npos || filename == "." ||
          filename == ".." || filename.size() > 255) {
        return send_error(res, ApiError::bad_request("'filename' must be a plain file name (no directories)", "filename"));
      }
      path = path_utf8(utf8_path(st.config.slot_save_path) / utf8_path(filename));
    }
    auto r = st.scheduler.slot_action(id, what, path);
    if (!r) {
      const bool bad = r.status().kind() == ErrorKind::kBadInput;
      return send_error(res, {.http_status = bad ? 400 : 500,
                              .type = bad ? "invalid_request_error" : "server_error",
                              .message = r.status().message()});
    }
    json out = {{"id_slot", id}};
    if (what == SlotAction::kSave) {
      out.update({{"filename", filename}, {"n_saved", r->n_tokens}, {"n_written", r->n_bytes},
                  {"timings", {{"save_ms", r->ms}}}});
    } else if (what == SlotAction::kRestore) {
      out.update({{"filename", filename}, {"n_restored", r->n_tokens}, {"n_read", r->n_bytes},
                  {"timings", {{"restore_ms", r->ms}}}});
    } else {
      out["n_erased"] = r->n_tokens;
    }
    send_json(res, out);
  });

  h.Get("/props", [&st](const httplib::Request&, httplib::Response& res) {
    json params = sampling_json(st.config.defaults.sampling);
    params["n_predict"] = st.config.defaults.n_predict;
    send_json(res, json{{"default_generation_settings", {{"n_ctx", st.scheduler.n_ctx_slot()}, {"params", params}}},
                        {"total_slots", st.scheduler.n_slots()},
                        {"model_path", st.config.model_path},
                        {"model_alias", st.config.model_name},
                        {"chat_template", st.chat_prompt.source()},
                        {"chat_template_origin", st.chat_prompt.origin()},
                        {"bos_token", st.chat_prompt.bos_token()},
                        {"eos_token", st.chat_prompt.eos_token()},
                        {"reasoning", st.config.reasoning},
                        {"reasoning_budget", st.config.reasoning_budget},
                        {"modalities", {{"vision", false}, {"audio", false}}},
                        {"build_info", "moetier " MOETIER_VERSION}});
  });

  register_webui(h, {.enabled = st.config.webui});
}

}  // namespace moetier::server
