#include "server/responses.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/build_info.h"
#include "text/utf8.h"

namespace moetier::server {

using json = nlohmann::ordered_json;

namespace {

// JSON has no -inf; OpenAI reports impossible tokens as -9999.
double wire_logprob(float lp) { return std::max(static_cast<double>(lp), -9999.0); }

json token_bytes(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(static_cast<int>(c));
  return b;
}

std::string piece_text(const text::Tokenizer& tok, int32_t id) {
  std::string out;
  text::append_utf8_sanitized(tok.token_to_piece(id, true), out);
  return out;
}

json chat_logprobs(const ResponseMeta& meta, const std::vector<PositionLogprobs>& lps) {
  json content = json::array();
  for (const auto& p : lps) {
    const std::string raw = meta.tokenizer->token_to_piece(p.chosen.token, true);
    json top = json::array();
    for (const auto& t : p.top) {
      const std::string r = meta.tokenizer->token_to_piece(t.token, true);
      top.push_back({{"id", t.token}, {"token", piece_text(*meta.tokenizer, t.token)},
                     {"logprob", wire_logprob(t.logprob)}, {"bytes", token_bytes(r)}});
    }
    content.push_back({{"id", p.chosen.token},
                       {"token", piece_text(*meta.tokenizer, p.chosen.token)},
                       {"logprob", wire_logprob(p.chosen.logprob)},
                       {"bytes", token_bytes(raw)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json completion_logprobs(const ResponseMeta& meta, const std::vector<PositionLogprobs>& lps, size_t text_offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& p : lps) {
    const std::string piece = piece_text(*meta.tokenizer, p.chosen.token);
    tokens.push_back(piece);
    token_lps.push_back(wire_logprob(p.chosen.logprob));
    json top = json::object();
    for (const auto& t : p.top) top[piece_text(*meta.tokenizer, t.token)] = wire_logprob(t.logprob);
    tops.push_back(top);
    offsets.push_back(text_offset);
    text_offset += piece.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// llama-server's shape, "b<build>-<commit>": clients and its tests read the leading "b".
const std::string& system_fingerprint() {
  static const std::string fp = [] {
    const std::string commit = build_git_commit();
    return std::string("b" MOETIER_VERSION "-moetier") + (commit.empty() ? "" : "-" + commit);
  }();
  return fp;
}

json envelope(const ResponseMeta& meta, bool chunk) {
  const bool chat = meta.endpoint == Endpoint::kChat;
  return {{"id", meta.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", system_fingerprint()}};
}

json choice_logprobs(const ResponseMeta& meta, const std::vector<PositionLogprobs>& lps) {
  if (!meta.logprobs) return nullptr;
  return meta.endpoint == Endpoint::kChat ? chat_logprobs(meta, lps) : completion_logprobs(meta, lps, 0);
}

const char* wire_finish_reason(FinishReason r) {
  // OpenAI knows stop and length; a cancelled task has no client left to tell.
  return r == FinishReason::kLength ? "length" : "stop";
}

}  // namespace

std::string new_response_id(const char* prefix) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = prefix;
  std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

json usage_json(const TaskTimings& t) {
  return {{"prompt_tokens", t.n_prompt},
          {"completion_tokens", t.n_generated},
          {"total_tokens", t.n_prompt + t.n_generated},
          {"prompt_tokens_details", {{"cached_tokens", t.n_cached}}}};
}

json timings_json(const TaskTimings& t) {
  const int64_t computed = t.n_prompt - t.n_cached;
  auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
  auto per_second = [](double ms, int64_t n) { return ms > 0 ? 1000.0 * static_cast<double>(n) / ms : 0.0; };
  // As llama-server: the first token comes from the prompt's last logits, so the generation
  // rate is over the n − 1 decode steps that followed (generation_ms runs from that token).
  const int64_t decode_steps = std::max<int64_t>(0, t.n_generated - 1);
  json j = {{"cache_n", t.n_cached},
          {"prompt_n", computed},
          {"prompt_ms", t.prompt_ms},
          {"prompt_per_token_ms", per_token(t.prompt_ms, computed)},
          {"prompt_per_second", per_second(t.prompt_ms, computed)},
          {"predicted_n", t.n_generated},
          {"predicted_ms", t.generation_ms},
          {"predicted_per_token_ms", per_token(t.generation_ms, decode_steps)},
          {"predicted_per_second", per_second(t.generation_ms, decode_steps)},
          {"queue_ms", t.queue_ms}};
  if (t.draft_n > 0) {  // as llama-server: only when the slot drafted
    j["draft_n"] = t.draft_n;
    j["draft_n_accepted"] = t.draft_n_accepted;
  }
  return j;
}

json first_chat_chunk(const ResponseMeta& meta, int index) {
  json j = envelope(meta, true);
  j["choices"] = json::array({{{"index", index},
                               {"delta", {{"role", "assistant"}, {"content", nullptr}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}}});
  return j;
}

json delta_chunk(const ResponseMeta& meta, int index, const std::string& content, const std::string& reasoning,
                 const std::vector<PositionLogprobs>& logprobs, const json& tool_call_deltas) {
  json j = envelope(meta, true);
  json choice = {{"index", index}};
  if (meta.endpoint == Endpoint::kChat) {
    json delta = json::object();
    if (!content.empty()) delta["content"] = content;
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!tool_call_deltas.is_null()) delta["tool_calls"] = tool_call_deltas;
    choice["delta"] = delta;
  } else {
    choice["text"] = content;
  }
  choice["logprobs"] = choice_logprobs(meta, logprobs);
  choice["finish_reason"] = nullptr;
  j["choices"] = json::array({choice});
  return j;
}

json finish_chunk(const ResponseMeta& meta, int index, const TaskEvent& e, bool tool_calls) {
  json j = envelope(meta, true);
  json choice = {{"index", index}};
  if (meta.endpoint == Endpoint::kChat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = tool_calls && e.finish == FinishReason::kStop ? "tool_calls" : wire_finish_reason(e.finish);
  j["choices"] = json::array({choice});
  j["timings"] = timings_json(e.timings);
  return j;
}

json usage_chunk(const ResponseMeta& meta, const TaskTimings& usage, const TaskTimings& timings) {
  json j = envelope(meta, true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  j["timings"] = timings_json(timings);
  return j;
}

json choice_json(const ResponseMeta& meta, int index, const ChoiceOutput& out, const TaskEvent& e) {
  json choice = {{"index", index}};
  const bool calls = out.tool_calls.is_array() && !out.tool_calls.empty();
  if (meta.endpoint == Endpoint::kChat) {
    json message = {{"role", "assistant"}};
    // OpenAI: content is null when the reply is only tool calls.
    message["content"] = calls && out.content.empty() ? json(nullptr) : json(out.content);
    if (!out.reasoning.empty()) message["reasoning_content"] = out.reasoning;
    if (calls) message["tool_calls"] = out.tool_calls;
    choice["message"] = message;
  } else {
    choice["text"] = out.content;
  }
  choice["logprobs"] = choice_logprobs(meta, out.logprobs);
  choice["finish_reason"] = calls && e.finish == FinishReason::kStop ? "tool_calls" : wire_finish_reason(e.finish);
  return choice;
}

json full_response(const ResponseMeta& meta, json choices, const TaskTimings& usage, const TaskTimings& timings) {
  json j = envelope(meta, false);
  j["choices"] = std::move(choices);
  j["usage"] = usage_json(usage);
  j["timings"] = timings_json(timings);
  return j;
}

json completion_probabilities(const text::Tokenizer& tokenizer, const std::vector<PositionLogprobs>& lps,
                              bool post_sampling) {
  // JSON has no -inf: an impossible token's logprob is the lowest float, as llama-server.
  auto value = [post_sampling](float lp) -> double {
    if (post_sampling) return std::exp(static_cast<double>(lp));
    return std::isfinite(lp) ? static_cast<double>(lp) : static_cast<double>(std::numeric_limits<float>::lowest());
  };
  const char* key = post_sampling ? "prob" : "logprob";
  json out = json::array();
  for (const auto& p : lps) {
    json top = json::array();
    for (const auto& t : p.top) {
      top.push_back({{"id", t.token},
                     {"token", piece_text(tokenizer, t.token)},
                     {"bytes", token_bytes(tokenizer.token_to_piece(t.token, true))},
                     {key, value(t.logprob)}});
    }
    out.push_back({{"id", p.chosen.token},
                   {"token", piece_text(tokenizer, p.chosen.token)},
                   {"bytes", token_bytes(tokenizer.token_to_piece(p.chosen.token, true))},
                   {key, value(p.chosen.logprob)},
                   {post_sampling ? "top_probs" : "top_logprobs", top}});
  }
  return out;
}

}  // namespace moetier::server
