#include "server/constraint_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "grammar/token_vocabulary.h"
#include "server/responses.h"
#include "server/server_state.h"
#include "server/tool_calls.h"

namespace moetier::server {

namespace {

using nlohmann::ordered_json;

ordered_json tool_calls_json(const std::vector<ToolCall>& calls) {
  ordered_json out = ordered_json::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

// The model's tool-call markup (any format of tool_calls.h) → OpenAI tool_calls;
// with parallel_tool_calls false only the first call of a reply is kept (tool_choice auto
// has no grammar to stop a second one from being written).
class ToolCallOutputParser final : public ChatOutputParser {
 public:
  ToolCallOutputParser(std::vector<ToolSpec> tools, ToolCallFormat format, std::string id_prefix, size_t max_calls)
      : tools_(std::move(tools)),
        options_{.format = format, .tools = &tools_, .id_prefix = std::move(id_prefix)},
        stream_(options_),
        max_calls_(max_calls) {}

  Delta push(const std::string& text) override { return convert(stream_.push(text), max_calls_); }
  Delta finish(const std::string& text) override {
    Delta d = convert(stream_.push(text), max_calls_);
    Delta tail = convert(stream_.finish(), max_calls_);
    d.content += tail.content;
    if (!tail.tool_call_deltas.is_null()) {
      if (d.tool_call_deltas.is_null()) d.tool_call_deltas = ordered_json::array();
      for (auto& t : tail.tool_call_deltas) d.tool_call_deltas.push_back(std::move(t));
    }
    return d;
  }
  bool saw_tool_calls() const override { return stream_.calls() > 0; }
  Parsed parse_full(const std::string& text) const override {
    ParsedReply r = parse_tool_calls(text, options_);
    if (r.tool_calls.size() > max_calls_) r.tool_calls.resize(max_calls_);
    Parsed p{.content = std::move(r.content)};
    if (!r.tool_calls.empty()) p.tool_calls = tool_calls_json(r.tool_calls);
    return p;
  }

 private:
  static Delta convert(ToolStreamDelta d, size_t max_calls) {
    Delta out{.content = std::move(d.content)};
    for (const auto& t : d.tool_calls) {
      if (t.index >= max_calls) continue;
      if (out.tool_call_deltas.is_null()) out.tool_call_deltas = ordered_json::array();
      out.tool_call_deltas.push_back(t.to_json());
    }
    return out;
  }
  std::vector<ToolSpec> tools_;
  ToolCallParseOptions options_;
  ToolCallStream stream_;
  size_t max_calls_;
};

// One choice's grammar state: masks the logits before each sample, advances on the token.
class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(grammar::GrammarMatcher matcher, std::shared_ptr<const grammar::TokenVocabulary> vocab)
      : matcher_(std::move(matcher)), vocab_(std::move(vocab)) {}
  void mask(float* logits, int32_t n_vocab) override {
    const int32_t n = std::min(n_vocab, vocab_->size());
    matcher_.mask_logits({logits, static_cast<size_t>(n)}, *vocab_);
    for (int32_t i = n; i < n_vocab; ++i) logits[i] = -INFINITY;  // padding rows of the output layer
  }
  bool accept(int32_t token) override { return matcher_.accept_token(token, *vocab_); }

 private:
  grammar::GrammarMatcher matcher_;
  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
};

class GrammarFactory final : public ConstraintFactory {
 public:
  GrammarFactory(std::shared_ptr<const grammar::Grammar> g, std::shared_ptr<const grammar::TokenVocabulary> vocab)
      : grammar_(std::move(g)), vocab_(std::move(vocab)) {}
  std::shared_ptr<TokenConstraint> make() const override {
    auto m = grammar::GrammarMatcher::create(grammar_);
    if (!m) return nullptr;  // cannot happen: the grammar is not null
    return std::make_shared<GrammarConstraint>(std::move(m).value(), vocab_);
  }

 private:
  std::shared_ptr<const grammar::Grammar> grammar_;
  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
};

// GBNF text → a factory of per-choice grammar states over the model's vocabulary.
std::optional<ApiError> compile_grammar(const ServerState& st, const std::string& gbnf, const char* param,
                                        std::shared_ptr<const ConstraintFactory>& out) {
  auto g = grammar::Grammar::parse(gbnf);
  if (!g) return ApiError::bad_request(fmt::format("{}: invalid grammar: {}", param, g.status().message()), param);
  auto shared = std::make_shared<const grammar::Grammar>(std::move(g).value());
  out = std::make_shared<GrammarFactory>(std::move(shared), st.grammar_vocabulary());
  return std::nullopt;
}

}  // namespace

bool output_constrained(const GenerationRequest& r) {
  const bool forced_tools = !r.tools.is_null() && (r.tool_choice == "required" || r.tool_choice == "function");
  return r.grammar || r.json_schema || r.json_object || forced_tools;
}

std::optional<ApiError> build_constraint(const ServerState& st, const GenerationRequest& r,
                                         std::shared_ptr<const ConstraintFactory>& out, bool prompt_opens_reasoning) {
  out = nullptr;
  if (r.grammar) return compile_grammar(st, *r.grammar, "grammar", out);
  if (r.json_schema) {
    // As llama.cpp's grammars: an object without additionalProperties takes no extra keys.
    auto gbnf = grammar::json_schema_to_gbnf(*r.json_schema, {.extra_properties_by_default = false});
    if (!gbnf) return ApiError::bad_request("json_schema: " + gbnf.status().message(), "json_schema");
    return compile_grammar(st, *gbnf, "json_schema", out);
  }
  if (r.json_object) return compile_grammar(st, grammar::json_any_gbnf(), "response_format", out);
  if (!r.tools.is_null() && r.tool_choice != "none") {
    auto tools = parse_tools(r.tools);
    if (!tools) return ApiError::bad_request(tools.status().message(), "tools");
    ordered_json choice = r.tool_choice == "function"
                              ? ordered_json{{"type", "function"}, {"function", {{"name", r.tool_choice_function}}}}
                              : ordered_json(r.tool_choice);
    auto parsed_choice = parse_tool_choice(choice, *tools);
    if (!parsed_choice) return ApiError::bad_request(parsed_choice.status().message(), "tool_choice");
    const ToolCallFormat format = detect_tool_call_format(st.chat_prompt.source());
    if (format == ToolCallFormat::kNone) {
      return ApiError::bad_request("this model's chat template has no tool-call format moetier knows (" +
                                       known_tool_call_formats() + "); use one that does with --chat-template-file",
                                   "tools");
    }
    auto gbnf = build_tool_call_grammar({.format = format,
                                         .tools = &*tools,
                                         .choice = *parsed_choice,
                                         .parallel_tool_calls = r.parallel_tool_calls,
                                         .inside_think = prompt_opens_reasoning});
    if (!gbnf) return ApiError::bad_request(gbnf.status().message(), "tools");
    if (*gbnf) return compile_grammar(st, **gbnf, "tool_choice", out);
  }
  return std::nullopt;
}

std::unique_ptr<ChatOutputParser> make_chat_output_parser(const ServerState& st, const GenerationRequest& r) {
  if (r.tools.is_null() || r.tool_choice == "none") return nullptr;
  const ToolCallFormat format = detect_tool_call_format(st.chat_prompt.source());
  if (format == ToolCallFormat::kNone) return nullptr;
  auto tools = parse_tools(r.tools);
  if (!tools) return nullptr;  // build_constraint has answered 400 already
  return std::make_unique<ToolCallOutputParser>(std::move(tools).value(), format, new_response_id("call_") + "_",
                                                r.parallel_tool_calls ? SIZE_MAX : 1);
}

}  // namespace moetier::server
