#include "server/generation_endpoint.h"

#include <chrono>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "server/http_util.h"
#include "server/text_stream.h"
#include "text/utf8.h"

namespace moetier::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr auto kPollInterval = std::chrono::milliseconds(100);
// A connection the client closed still looks writable, and the first write after the close
// still succeeds; only the next one fails. So while the client waits (a non-streamed reply
// being generated, a long prompt being read) something harmless is written this often: a
// space before the JSON body, which JSON parsers skip, or an SSE comment line. A client
// that went away is then noticed within about two intervals.
constexpr auto kHeartbeatInterval = std::chrono::milliseconds(200);

// Everything the response writer needs once the handler has returned.
struct Stream {
  ServerState* state = nullptr;
  std::shared_ptr<GenerationTask> task;
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  std::string echo_prefix;  // /v1/completions with echo: the prompt text, sent first
  bool finished = false;    // the final event was written
  // Non-streamed: collected output.
  std::string content, reasoning;
  std::vector<PositionLogprobs> logprobs;

  ~Stream() {
    if (!finished) task->cancel();  // the client went away or the connection broke
    state->counters.generations_in_flight.fetch_sub(1);
  }
};

template <class Json>
bool write_sse(httplib::DataSink& sink, const Json& payload) {
  const std::string line = "data: " + dump_json(payload) + "\n\n";
  return sink.write(line.data(), line.size());
}

ApiError shutdown_error() {
  return {.http_status = 503, .type = "unavailable_error", .message = "the server is shutting down"};
}

// Writes the events to the client; returns false when the client is gone.
bool write_events(Stream& s, std::vector<TaskEvent>& events, httplib::DataSink& sink) {
  for (TaskEvent& e : events) {
    if (s.stream) {
      if (!e.content.empty() || !e.reasoning.empty() || (s.meta.logprobs && !e.logprobs.empty())) {
        if (!write_sse(sink, delta_chunk(s.meta, e.content, e.reasoning, e.logprobs))) return false;
      }
    } else {
      s.content += e.content;
      s.reasoning += e.reasoning;
      for (auto& lp : e.logprobs) s.logprobs.push_back(std::move(lp));
    }
    if (!e.final) continue;
    s.finished = true;
    if (e.finish == FinishReason::kError) {
      const ApiError err = s.state->shutting_down ? shutdown_error()
                                                  : ApiError{.http_status = 500, .type = "server_error", .message = e.error};
      if (s.stream) {
        write_sse(sink, err.to_json());
      } else {
        const std::string body = dump_json(err.to_json());
        sink.write(body.data(), body.size());
      }
      sink.done();
      return true;
    }
    if (s.stream) {
      if (!write_sse(sink, finish_chunk(s.meta, e))) return false;
      if (s.include_usage && !write_sse(sink, usage_chunk(s.meta, e.timings))) return false;
      static constexpr char kDone[] = "data: [DONE]\n\n";
      if (!sink.write(kDone, sizeof(kDone) - 1)) return false;
    } else {
      const std::string body = dump_json(full_response(s.meta, s.echo_prefix + s.content, s.reasoning, s.logprobs, e));
      if (!sink.write(body.data(), body.size())) return false;
    }
    sink.done();
    return true;
  }
  return true;
}

bool provide(Stream& s, httplib::DataSink& sink) {
  if (s.stream) {
    if (s.meta.endpoint == Endpoint::kChat && !write_sse(sink, first_chat_chunk(s.meta))) return false;
    if (!s.echo_prefix.empty() && !write_sse(sink, delta_chunk(s.meta, s.echo_prefix, "", {}))) return false;
  }
  std::vector<TaskEvent> events;
  auto last_write = std::chrono::steady_clock::now();
  while (!s.finished) {
    events.clear();
    const bool got = s.task->wait(events, kPollInterval);
    if (!sink.is_writable()) return false;  // the client closed the connection
    if (got) {
      if (!write_events(s, events, sink)) return false;
      if (s.stream && !events.empty()) last_write = std::chrono::steady_clock::now();
    }
    if (s.finished) break;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_write >= kHeartbeatInterval) {
      static constexpr char kSseComment[] = ":\n\n";
      const bool ok = s.stream ? sink.write(kSseComment, sizeof(kSseComment) - 1) : sink.write(" ", 1);
      if (!ok) return false;
      last_write = now;
    }
  }
  return true;
}

ApiError context_error(const ServerState& st, size_t n_prompt) {
  return {.http_status = 400,
          .message = fmt::format("the prompt has {} tokens, but a slot's context is {} tokens (-c {} shared by -np {})",
                                 n_prompt, st.scheduler.n_ctx_slot(), st.scheduler.n_ctx_slot() * st.scheduler.n_slots(),
                                 st.scheduler.n_slots()),
          .param = "messages",
          .code = "context_length_exceeded"};
}

}  // namespace

std::optional<ApiError> render_chat_prompt(const ServerState& st, const GenerationRequest& r, std::string& prompt) {
  ChatRenderParams params{.messages = r.messages, .tools = r.tools};
  if (st.config.reasoning == "on") params.enable_thinking = true;
  if (st.config.reasoning == "off" || st.config.reasoning_budget == 0) params.enable_thinking = false;
  params.kwargs = st.config.chat_template_kwargs;
  for (const auto& [k, v] : r.chat_template_kwargs.items()) params.kwargs[k] = v;
  auto rendered = st.chat_prompt.render(params);
  if (!rendered) return ApiError::bad_request("chat template: " + rendered.status().message(), "messages");
  prompt = std::move(rendered).value();
  return std::nullopt;
}

void handle_generation(ServerState& st, Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  ordered_json body;
  if (auto e = parse_json_body(req.body, body)) return send_error(res, *e);
  GenerationRequest r;
  auto error = endpoint == Endpoint::kChat ? parse_chat_request(body, st.config.defaults, r)
                                           : parse_completion_request(body, st.config.defaults, r);
  if (error) return send_error(res, *error);
  if (!st.accepts_model_name(r.model)) {
    return send_error(res, {.http_status = 404,
                            .message = fmt::format("the model '{}' does not exist; this server serves '{}'", r.model,
                                                   st.config.model_name),
                            .param = "model",
                            .code = "model_not_found"});
  }

  GenerationSpec spec;
  std::string prompt_text;
  if (endpoint == Endpoint::kChat) {
    if (auto e = render_chat_prompt(st, r, prompt_text)) return send_error(res, *e);
    spec.prompt = st.tokenizer.encode(prompt_text, {.parse_special = true, .add_special = true});
    spec.prompt_opens_reasoning = prompt_opens_reasoning(prompt_text);
    spec.split_reasoning = r.reasoning_format == ReasoningFormat::kAuto;
    spec.reasoning_budget = st.config.reasoning_budget;
  } else if (r.prompt_text) {
    prompt_text = *r.prompt_text;
    spec.prompt = st.tokenizer.encode(prompt_text, {.parse_special = true, .add_special = true});
    spec.split_reasoning = false;
  } else {
    for (int32_t t : r.prompt_tokens) {
      if (t >= st.tokenizer.n_vocab()) {
        return send_error(res, ApiError::bad_request(fmt::format("'prompt' token id {} is out of range (vocabulary "
                                                                 "has {} tokens)",
                                                                 t, st.tokenizer.n_vocab()),
                                                     "prompt"));
      }
    }
    spec.prompt = r.prompt_tokens;
    if (r.echo) prompt_text = st.tokenizer.detokenize(spec.prompt, false);
    spec.split_reasoning = false;
  }
  if (spec.prompt.empty()) return send_error(res, ApiError::bad_request("the prompt has no tokens", "prompt"));
  if (static_cast<int64_t>(spec.prompt.size()) >= st.scheduler.n_ctx_slot()) {
    return send_error(res, context_error(st, spec.prompt.size()));
  }
  spec.sampling = r.sampling;
  spec.max_tokens = r.max_tokens;
  spec.stop = r.stop;
  spec.ignore_eos = r.ignore_eos;
  spec.n_logprobs = r.n_logprobs;
  spec.cache_prompt = r.cache_prompt;

  auto task = std::make_shared<GenerationTask>(std::move(spec));
  if (st.shutting_down) return send_error(res, shutdown_error());
  if (Status s = st.scheduler.submit(task); !s) {
    if (s.kind() == ErrorKind::kBadInput) return send_error(res, ApiError::bad_request(s.message()));
    return send_error(res, shutdown_error());
  }
  st.counters.generations_in_flight.fetch_add(1);
  auto stream = std::make_shared<Stream>();
  stream->state = &st;
  stream->task = task;
  stream->meta = {.endpoint = endpoint,
                  .id = new_response_id(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-"),
                  .created = static_cast<int64_t>(std::time(nullptr)),
                  .model = st.config.model_name,
                  .logprobs = r.n_logprobs >= 0,
                  .tokenizer = &st.tokenizer};
  stream->stream = r.stream;
  stream->include_usage = r.include_usage;
  if (endpoint == Endpoint::kCompletion && r.echo) {
    std::string valid;
    text::append_utf8_sanitized(prompt_text, valid);
    stream->echo_prefix = std::move(valid);
  }
  res.status = 200;
  if (r.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
  }
  res.set_chunked_content_provider(r.stream ? "text/event-stream" : "application/json; charset=utf-8",
                                   [stream](size_t, httplib::DataSink& sink) { return provide(*stream, sink); },
                                   [stream](bool) { if (!stream->finished) stream->task->cancel(); });
}

}  // namespace moetier::server
