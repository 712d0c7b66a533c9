#include "server/generation_endpoint.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <memory>

#include <fmt/format.h>

#include "server/constraint_builder.h"
#include "server/http_util.h"
#include "server/infill.h"
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

bool native(Endpoint e) { return e == Endpoint::kNative || e == Endpoint::kInfill; }

// One choice of a request (OpenAI `n`): its task and what it produced so far.
struct Choice {
  std::shared_ptr<GenerationTask> task;
  ChoiceOutput out;
  std::vector<int32_t> tokens;           // native non-streamed: every token (return_tokens)
  std::unique_ptr<ChatOutputParser> parser;  // chat with tools: tool calls out of the text
  std::string prompt_text;  // /completion's `prompt` field; /v1/completions' echo (valid UTF-8)
  bool finished = false;
  TaskEvent final_event;
  std::string verbose_text;  // request.verbose: the reply as generated (reasoning and content), for __verbose
};

// Everything the response writer needs once the handler has returned.
struct Stream {
  ServerState* state = nullptr;
  std::vector<Choice> choices;
  ResponseMeta meta;
  GenerationRequest request;  // the parsed request (flags for the response's shape)
  ordered_json generation_settings;  // native: echoed in the final object
  bool truncated = false;     // /infill dropped context to fit
  bool several_prompts = false;  // one choice per prompt
  bool finished = false;      // the response is complete
  // X-Conversation-Id: every byte also goes here, and the reply outlives its connection.
  std::shared_ptr<StreamSession> resumable;

  ~Stream() {
    for (auto& c : choices) {
      if (!c.finished) c.task->cancel();  // the client went away or the connection broke
    }
    state->counters.generations_in_flight.fetch_sub(1);
  }
  bool all_finished() const {
    for (const auto& c : choices) {
      if (!c.finished) return false;
    }
    return true;
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

// Usage over all choices: completions summed; the prompt once when the choices share it (as
// OpenAI counts `n`), summed when each had its own.
TaskTimings summed_usage(const Stream& s) {
  TaskTimings u = s.choices.front().final_event.timings;
  u.n_generated = 0;
  if (s.several_prompts) u.n_prompt = u.n_cached = 0;
  for (const auto& c : s.choices) {
    u.n_generated += c.final_event.timings.n_generated;
    if (s.several_prompts) {
      u.n_prompt += c.final_event.timings.n_prompt;
      u.n_cached += c.final_event.timings.n_cached;
    }
  }
  return u;
}

// llama-server's native chunk / final object for /completion and /infill.
ordered_json native_object(const Stream& s, int index, const TaskEvent& e, const std::string& content,
                           const std::vector<int32_t>& tokens, const std::vector<PositionLogprobs>& lps, bool final) {
  const GenerationRequest& r = s.request;
  ordered_json j = {{"index", index},
                    {"content", content},
                    // Streamed chunks always carry their tokens (as llama-server); the final
                    // object only with return_tokens.
                    {"tokens", r.return_tokens || !final ? ordered_json(tokens) : ordered_json::array()},
                    {"id_slot", final ? e.slot : -1},
                    {"stop", final}};
  if (final) {
    j["model"] = s.meta.model;
    j["tokens_predicted"] = e.timings.n_generated;
    j["tokens_evaluated"] = e.timings.n_prompt;
    j["generation_settings"] = s.generation_settings;
    j["prompt"] = s.choices[static_cast<size_t>(index)].prompt_text;
    j["has_new_line"] = content.find('\n') != std::string::npos;
    j["truncated"] = s.truncated || e.truncated;
    j["stop_type"] = stop_type_name(e.stop_type);
    j["stopping_word"] = e.stopping_word;
    j["tokens_cached"] = e.timings.n_prompt + e.timings.n_generated;
    j["timings"] = timings_json(e.timings);
  } else {
    j["tokens_predicted"] = e.timings.n_generated;
    j["tokens_evaluated"] = e.timings.n_prompt;
    if (r.timings_per_token) j["timings"] = timings_json(e.timings);
  }
  if (r.n_logprobs > 0 && !lps.empty()) {
    j["completion_probabilities"] = completion_probabilities(*s.meta.tokenizer, lps, r.post_sampling_probs);
  }
  if (final && !r.response_fields.empty()) {
    // llama-server's response_fields: only these, each by its path ("generation_settings/n_predict").
    ordered_json picked = ordered_json::object();
    for (const std::string& path : r.response_fields) {
      const ordered_json* at = &j;
      for (size_t start = 0; at && start <= path.size();) {
        size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        const std::string key = path.substr(start, end - start);
        at = at->is_object() && at->contains(key) ? &(*at)[key] : nullptr;
        start = end + 1;
      }
      if (at) picked[path] = *at;
    }
    return picked;
  }
  return j;
}

ordered_json progress_json(const PromptProgress& p) {
  return {{"total", p.total}, {"cache", p.cache}, {"processed", p.processed}, {"time_ms", p.time_ms}};
}

bool write_error(Stream& s, httplib::DataSink& sink, const TaskEvent& e) {
  const ApiError err = s.state->shutting_down ? shutdown_error()
                                              : ApiError{.http_status = 500, .type = "server_error", .message = e.error};
  if (s.request.stream) {
    write_sse(sink, err.to_json());
  } else {
    const std::string body = dump_json(err.to_json());
    sink.write(body.data(), body.size());
  }
  sink.done();
  s.finished = true;
  return true;
}

// A streamed event of one choice.
bool write_stream_event(Stream& s, int index, TaskEvent& e, httplib::DataSink& sink) {
  Choice& c = s.choices[static_cast<size_t>(index)];
  const Endpoint ep = s.meta.endpoint;
  if (e.progress) {
    if (!s.request.return_progress) return true;
    if (native(ep)) {
      ordered_json j = {{"index", index}, {"content", ""}, {"tokens", ordered_json::array()}, {"stop", false},
                        {"id_slot", -1}, {"prompt_progress", progress_json(*e.progress)}};
      return write_sse(sink, j);
    }
    ordered_json j = first_chat_chunk(s.meta, index);
    if (ep != Endpoint::kChat) j = delta_chunk(s.meta, index, "", "", {});
    j["prompt_progress"] = progress_json(*e.progress);
    return write_sse(sink, j);
  }
  std::string content = std::move(e.content);
  ordered_json tool_deltas = nullptr;
  if (c.parser) {
    auto d = e.final ? c.parser->finish(content) : c.parser->push(content);
    content = std::move(d.content);
    tool_deltas = std::move(d.tool_call_deltas);
  }
  if (native(ep)) {
    if (e.final) return true;  // the final object is written by the caller
    if (content.empty() && e.tokens.empty() && e.logprobs.empty()) return true;
    return write_sse(sink, native_object(s, index, e, content, e.tokens, e.logprobs, false));
  }
  const bool has_text = !content.empty() || !e.reasoning.empty() || !tool_deltas.is_null();
  if (has_text || (s.meta.logprobs && !e.logprobs.empty())) {
    ordered_json j = delta_chunk(s.meta, index, content, e.reasoning, e.logprobs, tool_deltas);
    if (s.request.timings_per_token) j["timings"] = timings_json(e.timings);
    if (!write_sse(sink, j)) return false;
  }
  return true;
}

// Writes the events of one choice; returns false when the client is gone.
bool write_events(Stream& s, int index, std::vector<TaskEvent>& events, httplib::DataSink& sink) {
  Choice& c = s.choices[static_cast<size_t>(index)];
  for (TaskEvent& e : events) {
    if (e.final && e.finish == FinishReason::kError) return write_error(s, sink, e);
    if (s.request.verbose) c.verbose_text += e.reasoning + e.content;
    if (s.request.stream) {
      const std::string final_content = e.final && native(s.meta.endpoint) ? e.content : std::string();
      const std::vector<int32_t> final_tokens = e.final ? e.tokens : std::vector<int32_t>{};
      const std::vector<PositionLogprobs> final_lps = e.final ? e.logprobs : std::vector<PositionLogprobs>{};
      if (!write_stream_event(s, index, e, sink)) return false;
      if (e.final) {
        c.finished = true;
        c.final_event = e;
        if (native(s.meta.endpoint)) {
          if (!write_sse(sink, native_object(s, index, e, final_content, final_tokens, final_lps, true))) return false;
        } else {
          ordered_json chunk = finish_chunk(s.meta, index, e, c.parser && c.parser->saw_tool_calls());
          // llama-server's debug echo: the native result object (prompt, settings, timings).
          if (s.request.verbose) chunk["__verbose"] = native_object(s, index, e, c.verbose_text, final_tokens, {}, true);
          if (!write_sse(sink, chunk)) return false;
        }
      }
    } else {
      if (e.progress) continue;
      c.out.content += e.content;
      c.out.reasoning += e.reasoning;
      c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
      for (auto& lp : e.logprobs) c.out.logprobs.push_back(std::move(lp));
      if (e.final) {
        c.finished = true;
        c.final_event = std::move(e);
      }
    }
    if (c.finished) break;
  }
  if (!s.all_finished()) return true;
  // Every choice is done: close the response.
  s.finished = true;
  if (s.request.stream) {
    if (!native(s.meta.endpoint)) {
      if (s.request.include_usage && !write_sse(sink, usage_chunk(s.meta, summed_usage(s), s.choices[0].final_event.timings))) {
        return false;
      }
      static constexpr char kDone[] = "data: [DONE]\n\n";
      if (!sink.write(kDone, sizeof(kDone) - 1)) return false;
    }
  } else {
    ordered_json body;
    if (native(s.meta.endpoint)) {
      // One object for one choice, an array for several (as llama-server's n_cmpl).
      ordered_json items = ordered_json::array();
      for (size_t i = 0; i < s.choices.size(); ++i) {
        const Choice& ch = s.choices[i];
        items.push_back(native_object(s, static_cast<int>(i), ch.final_event, ch.out.content, ch.tokens,
                                      ch.out.logprobs, true));
      }
      body = items.size() == 1 ? items[0] : items;
    } else {
      ordered_json choices = ordered_json::array();
      for (size_t i = 0; i < s.choices.size(); ++i) {
        Choice& ch = s.choices[i];
        if (ch.parser) {
          ChatOutputParser::Parsed parsed = ch.parser->parse_full(ch.out.content);
          ch.out.content = std::move(parsed.content);
          ch.out.tool_calls = std::move(parsed.tool_calls);
        }
        if (s.request.echo) ch.out.content = ch.prompt_text + ch.out.content;
        choices.push_back(choice_json(s.meta, static_cast<int>(i), ch.out, ch.final_event));
      }
      body = full_response(s.meta, std::move(choices), summed_usage(s), s.choices[0].final_event.timings);
      if (s.request.verbose) {  // llama-server's debug echo: the native result object of the first choice
        const Choice& ch = s.choices[0];
        body["__verbose"] = native_object(s, 0, ch.final_event, ch.verbose_text, ch.tokens, ch.out.logprobs, true);
      }
    }
    const std::string text = dump_json(body);
    if (!sink.write(text.data(), text.size())) return false;
  }
  sink.done();
  return true;
}

bool provide(Stream& s, httplib::DataSink& sink) {
  if (s.request.stream && s.meta.endpoint == Endpoint::kChat) {
    for (size_t i = 0; i < s.choices.size(); ++i) {
      if (!write_sse(sink, first_chat_chunk(s.meta, static_cast<int>(i)))) return false;
    }
  }
  if (s.request.stream && s.request.echo && s.meta.endpoint == Endpoint::kCompletion) {
    for (size_t i = 0; i < s.choices.size(); ++i) {
      if (!write_sse(sink, delta_chunk(s.meta, static_cast<int>(i), s.choices[i].prompt_text, "", {}))) return false;
    }
  }
  std::vector<TaskEvent> events;
  auto last_write = std::chrono::steady_clock::now();
  while (!s.finished) {
    bool wrote = false;
    for (size_t i = 0; i < s.choices.size() && !s.finished; ++i) {
      if (s.choices[i].finished) continue;
      events.clear();
      // Several choices: poll each briefly; one: wait for it.
      const auto wait = s.choices.size() == 1 ? kPollInterval : std::chrono::milliseconds(5);
      const bool got = s.choices[i].task->wait(events, wait);
      if (!sink.is_writable()) return false;  // the client closed the connection
      if (got) {
        if (!write_events(s, static_cast<int>(i), events, sink)) return false;
        wrote = wrote || s.request.stream;
      }
    }
    if (s.finished) break;
    const auto now = std::chrono::steady_clock::now();
    if (wrote) last_write = now;
    if (now - last_write >= kHeartbeatInterval) {
      static constexpr char kSseComment[] = ":\n\n";
      const bool ok = s.request.stream ? sink.write(kSseComment, sizeof(kSseComment) - 1) : sink.write(" ", 1);
      if (!ok) return false;
      last_write = now;
    }
  }
  return true;
}

// provide() for a resumable stream: the bytes go to the session and, while it is there, the
// client; a client that leaves no longer ends the reply, the Stop (the session cancelled) does.
bool provide_resumable(Stream& s, httplib::DataSink& sink) {
  StreamSession& session = *s.resumable;
  bool client = true;
  httplib::DataSink tee;
  tee.write = [&](const char* data, size_t size) {
    session.append(std::string_view(data, size));
    if (client && !sink.write(data, size)) client = false;
    return !session.cancelled();
  };
  tee.is_writable = [&] {
    if (client && !sink.is_writable()) client = false;
    return !session.cancelled();
  };
  tee.done = [&] {
    session.finish(static_cast<int64_t>(std::time(nullptr)));
    if (client) sink.done();
  };
  const bool ok = provide(s, tee);
  session.finish(static_cast<int64_t>(std::time(nullptr)));
  return ok && client;
}

// llama-server's exceed_context_size_error, with OpenAI's code for clients that look for it.
ApiError context_error(const ServerState& st, size_t n_prompt, Endpoint endpoint) {
  return {.http_status = 400,
          .type = "exceed_context_size_error",
          .message = fmt::format("the request ({} prompt tokens) exceeds the available context size ({} tokens per "
                                 "slot: -c {} shared by -np {}); give a larger -c or a shorter prompt",
                                 n_prompt, st.scheduler.n_ctx_slot(), st.scheduler.n_ctx_slot() * st.scheduler.n_slots(),
                                 st.scheduler.n_slots()),
          .param = endpoint == Endpoint::kChat ? "messages" : "prompt",
          .code = "context_length_exceeded",
          .extra = {{"n_prompt_tokens", n_prompt}, {"n_ctx", st.scheduler.n_ctx_slot()}}};
}

// Token ids of a /completion prompt given as a mix of ids and strings.
std::optional<ApiError> mixed_prompt_tokens(const ServerState& st, const ordered_json& items, std::vector<int32_t>& out) {
  bool first = true;
  for (const auto& item : items) {
    if (item.is_string()) {
      auto ids = st.tokenizer.encode(item.get<std::string>(), {.parse_special = true, .add_special = first});
      out.insert(out.end(), ids.begin(), ids.end());
    } else {
      const int64_t id = item.get<int64_t>();
      if (id >= st.tokenizer.n_vocab()) {
        return ApiError::bad_request(
            fmt::format("'prompt' token id {} is out of range (vocabulary has {} tokens)", id, st.tokenizer.n_vocab()),
            "prompt");
      }
      out.push_back(static_cast<int32_t>(id));
    }
    first = false;
  }
  return std::nullopt;
}

std::optional<ApiError> resolve_logit_bias(const ServerState& st, const GenerationRequest& r, std::vector<LogitBias>& out) {
  for (const LogitBiasEntry& e : r.logit_bias) {
    if (e.token) {
      if (*e.token < 0 || *e.token >= st.tokenizer.n_vocab()) {
        return ApiError::bad_request(fmt::format("'logit_bias' token id {} is out of range (vocabulary has {} tokens)",
                                                 *e.token, st.tokenizer.n_vocab()),
                                     "logit_bias");
      }
      out.push_back({.token = static_cast<int32_t>(*e.token), .bias = e.bias});
    } else {
      for (int32_t id : st.tokenizer.encode(e.text, {.parse_special = false, .add_special = false})) {
        out.push_back({.token = id, .bias = e.bias});
      }
    }
  }
  return std::nullopt;
}

ordered_json generation_settings_json(const ServerState& st, const GenerationRequest& r,
                                      const std::vector<LogitBias>& logit_bias) {
  const SamplerParams& s = r.sampling;
  ordered_json stop = r.stop;
  // As llama-server: every bias applied, ignore_eos's bans included; -inf is null in JSON.
  ordered_json biases = ordered_json::array();
  auto add_bias = [&](int32_t token, float bias) {
    biases.push_back({{"token", token}, {"bias", std::isfinite(bias) ? ordered_json(bias) : ordered_json(nullptr)}});
  };
  for (const LogitBias& b : logit_bias) add_bias(b.token, b.bias);
  if (r.ignore_eos) {
    for (int32_t id : st.tokenizer.eog_ids()) add_bias(id, -INFINITY);
  }
  return {{"n_predict", r.max_tokens},
          {"seed", s.seed == kRandomSeed ? -1 : static_cast<int64_t>(s.seed)},
          {"temperature", s.temperature},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"repeat_last_n", s.repeat_last_n},
          {"repeat_penalty", s.repeat_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"stop", stop},
          {"max_tokens", r.max_tokens},
          {"ignore_eos", r.ignore_eos},
          {"logit_bias", biases},
          {"stream", r.stream},
          {"n_probs", std::max(r.n_logprobs, 0)},
          {"min_keep", s.min_keep},
          {"n_keep", r.n_keep},
          {"n_discard", r.n_discard},
          {"post_sampling_probs", r.post_sampling_probs},
          {"timings_per_token", r.timings_per_token},
          {"n_ctx", st.scheduler.n_ctx_slot()},
          {"model", st.config.model_name}};
}

}  // namespace

std::optional<ApiError> render_chat_prompt(const ServerState& st, const GenerationRequest& r, std::string& prompt) {
  // A built-in format (--no-jinja) has no place for tools: refused, as llama-server does.
  if (st.chat_prompt.builtin_only() && r.tools.is_array() && !r.tools.empty() && r.tool_choice != "none") {
    return ApiError::bad_request("tools need the model's Jinja chat template: the server was started with --no-jinja",
                                 "tools");
  }
  ChatRenderParams params{.messages = r.messages, .tools = r.tool_choice == "none" ? ordered_json(nullptr) : r.tools};
  params.add_generation_prompt = r.add_generation_prompt;
  // --reasoning auto: as llama-server, enable_thinking is set when the template knows it
  // (true unless the output is constrained, which a think block would break).
  if (st.chat_prompt.supports_thinking()) params.enable_thinking = !output_constrained(r);
  if (st.config.reasoning == "on") params.enable_thinking = true;
  if (st.config.reasoning == "off" || st.config.reasoning_budget == 0) params.enable_thinking = false;
  params.kwargs = st.config.chat_template_kwargs;
  for (const auto& [k, v] : r.chat_template_kwargs.items()) params.kwargs[k] = v;
  std::string continued;
  if (r.continue_final_message) {
    // Prefill: render the conversation before the assistant's unfinished message with the
    // generation prompt, then append that message's text; the model continues it.
    if (!r.messages.is_array() || r.messages.empty() || r.messages.back().value("role", "") != "assistant") {
      return ApiError::bad_request("'continue_final_message' needs a last message with role assistant", "messages");
    }
    const ordered_json& last = r.messages.back();
    if (auto c = last.find("content"); c != last.end()) {
      if (c->is_string()) {
        continued = c->get<std::string>();
      } else if (c->is_array()) {
        // Text parts joined by a blank line, as llama-server continues a multi-part message.
        for (const auto& part : *c) {
          auto type = part.is_object() ? part.find("type") : part.end();
          auto text = part.is_object() ? part.find("text") : part.end();
          if (type != part.end() && *type == "text" && text != part.end() && text->is_string()) {
            if (!continued.empty()) continued += "\n\n";
            continued += text->get<std::string>();
          }
        }
      }
    }
    params.messages = r.messages;
    params.messages.erase(params.messages.size() - 1);
    params.add_generation_prompt = true;
  }
  // OpenAI clients send a tool call's arguments as a JSON string; templates (Qwen3.5/3.6's
  // iterates over them) want the object, as llama-server passes it. A few templates
  // concatenate the arguments as text (Functionary v3.2: '>>>' + name + '\n' + arguments):
  // when the objects fail to render, the strings as sent are tried.
  const ordered_json messages_as_sent = params.messages;
  bool converted = false;
  for (auto& m : params.messages) {
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (auto& call : *calls) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      auto& fn = call["function"];
      if (auto args = fn.find("arguments"); args != fn.end() && args->is_string()) {
        auto parsed = ordered_json::parse(args->get<std::string>(), nullptr, false);
        if (!parsed.is_discarded() && parsed.is_object()) {
          *args = std::move(parsed);
          converted = true;
        }
      }
    }
  }
  auto rendered = st.chat_prompt.render(params);
  if (!rendered && converted) {
    params.messages = messages_as_sent;
    params.normalization.parse_tool_arguments = false;
    if (auto as_sent = st.chat_prompt.render(params)) rendered = std::move(as_sent);
  }
  if (!rendered) return ApiError::bad_request("chat template: " + rendered.status().message(), "messages");
  prompt = std::move(rendered).value() + continued;
  return std::nullopt;
}

void handle_generation(ServerState& st, Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  ordered_json body;
  if (auto e = parse_json_body(req.body, body)) return send_error(res, *e);
  GenerationRequest r;
  std::optional<ApiError> error;
  switch (endpoint) {
    case Endpoint::kChat: error = parse_chat_request(body, st.config.defaults, r); break;
    case Endpoint::kCompletion: error = parse_completion_request(body, st.config.defaults, r); break;
    case Endpoint::kNative: error = parse_native_completion_request(body, st.config.defaults, false, r); break;
    case Endpoint::kInfill: error = parse_native_completion_request(body, st.config.defaults, true, r); break;
  }
  if (error) return send_error(res, *error);
  // As llama-server serving one model: any "model" name is this model (clients send their
  // own defaults, e.g. "gpt-3.5-turbo"); responses name the served model.

  // The prompt(s) as tokens, and as text where the response shows it (/completion's
  // `prompt`, /v1/completions' echo). Several prompts (/v1/completions, /completion) get one
  // choice each; otherwise the n choices share the one prompt.
  GenerationSpec spec;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;
  bool truncated = false;
  const bool keep_text = native(endpoint) || r.echo || r.verbose;
  if (endpoint == Endpoint::kChat) {
    std::string text;
    if (auto e = render_chat_prompt(st, r, text)) return send_error(res, *e);
    prompts.push_back(st.tokenizer.encode(text, {.parse_special = true, .add_special = true}));
    if (keep_text) prompt_texts.push_back(text);
    spec.prompt_opens_reasoning = prompt_opens_reasoning(text);
    spec.split_reasoning = r.reasoning_format == ReasoningFormat::kAuto;
    spec.reasoning_budget = st.config.reasoning_budget;
  } else if (endpoint == Endpoint::kInfill) {
    const auto fim = find_fim_tokens(st.tokenizer);
    if (!fim) {
      return send_error(res, {.http_status = 501,
                              .type = "not_supported_error",
                              .message = "this model's vocabulary has no fill-in-the-middle tokens (<|fim_prefix|>, "
                                         "<|fim_suffix|>, <|fim_middle|>), so /infill cannot be served"});
    }
    InfillInput in{.prefix = r.input_prefix, .suffix = r.input_suffix, .prompt = r.prompt_text.value_or("")};
    if (r.input_extra.is_array()) {
      for (const auto& chunk : r.input_extra) in.extra.push_back({chunk.value("filename", ""), chunk.value("text", "")});
    }
    // Leave room to generate: a quarter of the slot, or what n_predict asks for.
    const int64_t n_ctx = st.scheduler.n_ctx_slot();
    const int64_t reserve = r.max_tokens > 0 ? std::min(r.max_tokens, n_ctx / 2) : n_ctx / 4;
    InfillPrompt built = build_infill_prompt(st.tokenizer, *fim, in, n_ctx - 1 - reserve);
    prompts.push_back(std::move(built.tokens));
    truncated = built.truncated;
    prompt_texts.push_back(st.tokenizer.detokenize(prompts.back(), true));
    spec.split_reasoning = false;
  } else {
    for (const ordered_json& p : r.prompts) {
      std::vector<int32_t> ids;
      if (p.is_string()) {
        ids = st.tokenizer.encode(p.get<std::string>(), {.parse_special = true, .add_special = true});
      } else if (auto e = mixed_prompt_tokens(st, p, ids)) {
        return send_error(res, *e);
      }
      if (keep_text) prompt_texts.push_back(p.is_string() ? p.get<std::string>() : st.tokenizer.detokenize(ids, false));
      prompts.push_back(std::move(ids));
    }
    spec.split_reasoning = false;
  }
  for (const auto& p : prompts) {
    if (p.empty()) return send_error(res, ApiError::bad_request("the prompt has no tokens", "prompt"));
    if (static_cast<int64_t>(p.size()) >= st.scheduler.n_ctx_slot()) {
      return send_error(res, context_error(st, p.size(), endpoint));
    }
  }
  if (auto e = resolve_logit_bias(st, r, spec.logit_bias)) return send_error(res, *e);
  spec.sampling = r.sampling;
  spec.max_tokens = r.max_tokens;
  spec.stop = r.stop;
  spec.ignore_eos = r.ignore_eos;
  spec.n_logprobs = r.n_logprobs;
  spec.post_sampling_probs = r.post_sampling_probs;
  spec.cache_prompt = r.cache_prompt;
  spec.id_slot = r.id_slot;
  spec.n_keep = r.n_keep;
  spec.n_discard = r.n_discard;
  spec.report_progress = r.return_progress;
  if (r.id_slot >= st.scheduler.n_slots()) {
    return send_error(res, ApiError::bad_request(fmt::format("'id_slot' {} does not exist: the server has {} slot(s)",
                                                             r.id_slot, st.scheduler.n_slots()),
                                                 "id_slot"));
  }
  // With id_slot and n > 1 the choices queue for that slot and run one after another.
  const size_t n_choices = std::max(prompts.size(), static_cast<size_t>(r.n_choices));

  // The output constraint (grammar, JSON schema, forced tool calls) is compiled once and
  // instantiated per choice.
  std::shared_ptr<const ConstraintFactory> constraint;
  if (auto e = build_constraint(st, r, constraint, spec.prompt_opens_reasoning)) return send_error(res, *e);

  auto stream = std::make_shared<Stream>();
  stream->state = &st;
  st.counters.generations_in_flight.fetch_add(1);  // the Stream's destructor takes it back
  stream->meta = {.endpoint = endpoint,
                  .id = new_response_id(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-"),
                  .created = static_cast<int64_t>(std::time(nullptr)),
                  .model = st.config.model_name,
                  .logprobs = r.n_logprobs >= 0,
                  .tokenizer = &st.tokenizer};
  stream->truncated = truncated;
  stream->several_prompts = prompts.size() > 1;
  if (native(endpoint) || r.verbose) stream->generation_settings = generation_settings_json(st, r, spec.logit_bias);
  if (st.shutting_down) return send_error(res, shutdown_error());
  for (size_t i = 0; i < n_choices; ++i) {
    GenerationSpec choice_spec = spec;
    const size_t which = prompts.size() > 1 ? i : 0;
    choice_spec.prompt = prompts[which];
    // Several choices with one seed would all be the same: choice i uses seed + i.
    if (i > 0 && spec.sampling.seed != kRandomSeed) choice_spec.sampling.seed = spec.sampling.seed + static_cast<uint32_t>(i);
    if (constraint) choice_spec.constraint = constraint->make();
    Choice c;
    if (which < prompt_texts.size()) text::append_utf8_sanitized(prompt_texts[which], c.prompt_text);
    c.task = std::make_shared<GenerationTask>(std::move(choice_spec));
    if (endpoint == Endpoint::kChat) c.parser = make_chat_output_parser(st, r);
    if (Status s = st.scheduler.submit(c.task); !s) {
      for (auto& earlier : stream->choices) earlier.task->cancel();
      stream->choices.clear();
      if (s.kind() == ErrorKind::kBadInput) return send_error(res, ApiError::bad_request(s.message()));
      return send_error(res, shutdown_error());
    }
    stream->choices.push_back(std::move(c));
  }
  stream->request = std::move(r);
  const bool streamed = stream->request.stream;
  res.status = 200;
  if (streamed) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    if (const std::string id = req.get_header_value("X-Conversation-Id"); !id.empty()) {
      stream->resumable = st.stream_sessions.start(id, static_cast<int64_t>(std::time(nullptr)));
    }
  }
  res.set_chunked_content_provider(streamed ? "text/event-stream" : "application/json; charset=utf-8",
                                   [stream](size_t, httplib::DataSink& sink) {
                                     return stream->resumable ? provide_resumable(*stream, sink) : provide(*stream, sink);
                                   },
                                   [stream](bool) {
                                     for (auto& c : stream->choices) {
                                       if (!c.finished) c.task->cancel();
                                     }
                                   });
}

}  // namespace moetier::server
