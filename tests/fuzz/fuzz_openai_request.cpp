// libFuzzer target for the HTTP/JSON layer of `moetier serve`: any request body must give
// either a 4xx ApiError with a message, or parameters within their documented ranges; and
// the text stages after the detokenizer (stop strings, <think> splitting) must keep valid
// UTF-8 valid whatever chunks they are fed.
// Build: CC=clang CXX=clang++ cmake -DMOETIER_FUZZ=ON -DMOETIER_SANITIZE=ON ...; target fuzz_openai_request.
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"
#include "server/request.h"
#include "server/text_stream.h"
#include "server/tool_call_formats.h"
#include "server/tool_calls.h"
#include "text/utf8.h"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

void check_error(const moetier::server::ApiError& e) {
  require(e.http_status >= 400 && e.http_status < 500);
  require(!e.message.empty());
  // The error body must serialise (the message may quote the client's bytes).
  require(!moetier::server::dump_json(e.to_json()).empty());
}

void check_request(const moetier::server::GenerationRequest& r, const moetier::server::RequestDefaults& d,
                   int max_logprobs = 20) {
  require(r.max_tokens >= -1 && r.max_tokens <= std::numeric_limits<int32_t>::max());
  require(d.n_predict < 0 || (r.max_tokens >= 0 && r.max_tokens <= d.n_predict));
  require(r.sampling.top_p >= 0 && r.sampling.top_p <= 1);
  require(r.sampling.temperature >= 0);
  require(r.n_logprobs >= -1 && r.n_logprobs <= max_logprobs);
  require(r.n_choices >= 1 && r.n_choices <= 16);
  require(static_cast<int>(r.grammar.has_value()) + static_cast<int>(r.json_schema.has_value()) +
              static_cast<int>(r.json_object) <= 1);
  for (const auto& s : r.stop) require(!s.empty());
}

// What the server does with a request's constraint, short of the vocabulary: a client's
// grammar parses or is an error; a grammar moetier writes (from a JSON schema or the tools)
// must always parse, and a matcher over it must survive some bytes.
void check_constraint(const moetier::server::GenerationRequest& r, const std::string& body) {
  using namespace moetier;
  std::optional<std::string> gbnf;
  bool ours = true;
  if (r.grammar) {
    gbnf = *r.grammar;
    ours = false;
  } else if (r.json_schema) {
    if (auto g = grammar::json_schema_to_gbnf(*r.json_schema, {.extra_properties_by_default = false})) gbnf = *g;
  } else if (r.json_object) {
    gbnf = grammar::json_any_gbnf();
  } else if (!r.tools.is_null()) {
    auto tools = server::parse_tools(r.tools);
    if (tools) {
      for (const auto mode : {server::ToolChoiceMode::kRequired, server::ToolChoiceMode::kAuto}) {
        for (const auto& def : server::tool_format::all()) {  // every family's parser and grammar
          const server::ToolCallFormat format = def.id;
          auto g = server::build_tool_call_grammar({.format = format, .tools = &*tools, .choice = {.mode = mode}});
          if (g && *g) require(grammar::Grammar::parse(**g).is_ok());
          // The parsers never fail on model output, however odd.
          server::parse_tool_calls(body, {.format = format, .tools = &*tools});
        }
      }
    }
  }
  if (!gbnf) return;
  auto parsed = grammar::Grammar::parse(*gbnf);
  if (ours) require(parsed.is_ok());
  if (!parsed) return;
  auto matcher = grammar::GrammarMatcher::create(std::make_shared<const grammar::Grammar>(std::move(parsed).value()));
  require(matcher.is_ok());
  for (size_t i = 0; i < body.size() && i < 256; ++i) matcher->accept_bytes(std::string_view(body).substr(i, 1));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace moetier::server;
  const std::string body(reinterpret_cast<const char*>(data), size);
  const RequestDefaults defaults{.n_predict = 2048, .n_ctx_slot = 4096};
  nlohmann::ordered_json j;
  if (auto e = parse_json_body(body, j)) {
    check_error(*e);
  } else {
    GenerationRequest chat, completion, native, infill;
    if (auto e = parse_chat_request(j, defaults, chat)) {
      check_error(*e);
    } else {
      check_request(chat, defaults);
      require(chat.messages.is_array() && !chat.messages.empty());
      check_constraint(chat, body);
    }
    if (auto e = parse_native_completion_request(j, defaults, false, native)) {
      check_error(*e);
    } else {
      check_request(native, defaults, 100);
      require(!native.prompts.empty() && native.prompts.size() <= 16);
    }
    if (auto e = parse_native_completion_request(j, defaults, true, infill)) {
      check_error(*e);
    } else {
      check_request(infill, defaults, 100);
    }
    if (auto e = parse_completion_request(j, defaults, completion)) {
      check_error(*e);
    } else {
      check_request(completion, defaults);
      require(!completion.prompts.empty() && completion.prompts.size() <= 16);
      for (const auto& p : completion.prompts) require(p.is_string() || (p.is_array() && !p.empty()));
    }
  }

  // Text stages: the input made valid UTF-8, cut into chunks at character boundaries.
  std::string text;
  moetier::text::append_utf8_sanitized(body, text);
  StopMatcher stop({"</s>", "\n\n", "é"});
  ReasoningSplitter split(size % 2 == 0);
  std::string out_stop, reasoning, content;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t n = 1 + (static_cast<unsigned char>(text[pos]) % 7);
    while (pos + n < text.size() && (static_cast<unsigned char>(text[pos + n]) & 0xC0) == 0x80) ++n;
    const std::string piece = stop.push(std::string_view(text).substr(pos, n));
    out_stop += piece;
    auto d = split.push(piece);
    reasoning += d.reasoning;
    content += d.content;
    pos += n;
  }
  const std::string tail = stop.finish();
  out_stop += tail;
  auto d1 = split.push(tail);
  auto d2 = split.finish();
  reasoning += d1.reasoning + d2.reasoning;
  content += d1.content + d2.content;
  require(moetier::text::is_valid_utf8(out_stop));
  require(moetier::text::is_valid_utf8(reasoning));
  require(moetier::text::is_valid_utf8(content));
  require(text.compare(0, out_stop.size(), out_stop) == 0);  // the stop stage only ever cuts
  return 0;
}
