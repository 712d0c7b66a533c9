// Finding tool calls in generated text (whole and streamed). Grammar and request
// validation: tool_call_grammar.cpp.
#include "server/tool_calls.h"

#include <utility>

namespace moetier::server {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Length of the longest proper prefix of `tag` that `s` ends with.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k) {
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

// {"name": "...", "arguments": {...}} (also "parameters", and arguments given as a string
// holding a JSON object).
std::optional<ToolCall> parse_json_call(std::string_view inner) {
  const ordered_json j = ordered_json::parse(trim(inner), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
  ToolCall call{.name = name->get<std::string>(), .arguments = "{}"};
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args != j.end() && !args->is_null()) {
    ordered_json obj = *args;
    if (obj.is_string()) obj = ordered_json::parse(obj.get<std::string>(), nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) return std::nullopt;
    call.arguments = dump(obj);
  }
  return call;
}

// The schema of `param` of function `fn`, or null.
const ordered_json* param_schema(const std::vector<ToolSpec>* tools, const std::string& fn, const std::string& param) {
  if (!tools) return nullptr;
  for (const ToolSpec& t : *tools) {
    if (t.name != fn) continue;
    auto props = t.parameters.find("properties");
    if (props == t.parameters.end() || !props->is_object()) return nullptr;
    auto it = props->find(param);
    return it == props->end() ? nullptr : &*it;
  }
  return nullptr;
}

bool schema_has_type(const ordered_json& schema, const char* type) {
  auto t = schema.find("type");
  if (t == schema.end()) return false;
  if (t->is_string()) return *t == type;
  if (t->is_array()) {
    for (auto& x : *t) if (x == type) return true;
  }
  return false;
}

// A raw <parameter> value as JSON, by the parameter's schema: a string schema (or no schema)
// keeps the text; other types parse it as JSON, keeping the text when that fails.
ordered_json convert_value(std::string value, const ordered_json* schema) {
  if (!schema || !schema->is_object()) return value;
  auto t = schema->find("type");
  const bool plain_string = t != schema->end() && (*t == "string" || (t->is_array() && t->size() == 1 && (*t)[0] == "string"));
  if (plain_string) return value;
  if (t == schema->end() && schema->contains("enum")) {  // enums of strings stay strings
    bool strings = true;
    for (auto& e : (*schema)["enum"]) strings &= e.is_string();
    if (strings) return value;
  }
  ordered_json parsed = ordered_json::parse(value, nullptr, false);
  if (!parsed.is_discarded()) {
    // A string-or-something-else parameter keeps text that only parses as a string.
    return parsed;
  }
  if (schema_has_type(*schema, "boolean") && (value == "True" || value == "False")) return value == "True";  // Python str()
  return value;
}

// <function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>
std::optional<ToolCall> parse_xml_call(std::string_view inner, const std::vector<ToolSpec>* tools) {
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kParam = "<parameter=", kParamEnd = "</parameter>";
  std::string_view s = trim(inner);
  if (s.substr(0, kFn.size()) != kFn) return std::nullopt;
  s.remove_prefix(kFn.size());
  const size_t gt = s.find('>');
  if (gt == std::string_view::npos || gt == 0) return std::nullopt;
  ToolCall call{.name = std::string(trim(s.substr(0, gt)))};
  if (call.name.empty() || call.name.find_first_of("<\n") != std::string::npos) return std::nullopt;
  s.remove_prefix(gt + 1);
  ordered_json args = ordered_json::object();
  for (;;) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    if (s.substr(0, kFnEnd.size()) == kFnEnd) {
      s.remove_prefix(kFnEnd.size());
      break;
    }
    if (s.substr(0, kParam.size()) != kParam) return std::nullopt;
    s.remove_prefix(kParam.size());
    const size_t pgt = s.find('>');
    if (pgt == std::string_view::npos || pgt == 0) return std::nullopt;
    const std::string pname(trim(s.substr(0, pgt)));
    if (pname.empty() || pname.find_first_of("<\n") != std::string::npos) return std::nullopt;
    s.remove_prefix(pgt + 1);
    const size_t end = s.find(kParamEnd);
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view value = s.substr(0, end);
    // The template writes "\n" after the opening tag and before the closing one.
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    args[pname] = convert_value(std::string(value), param_schema(tools, call.name, pname));
    s.remove_prefix(end + kParamEnd.size());
  }
  if (!trim(s).empty()) return std::nullopt;
  call.arguments = dump(args);
  return call;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view chat_template_source) {
  if (chat_template_source.find("<function=") != std::string_view::npos) return ToolCallFormat::kQwen35Xml;
  if (chat_template_source.find(kOpen) != std::string_view::npos) return ToolCallFormat::kQwen3Json;
  return ToolCallFormat::kNone;
}

ordered_json ToolCallDelta::to_json() const {
  ordered_json j = {{"index", index}};
  if (!id.empty()) {
    j["id"] = id;
    j["type"] = "function";
  }
  ordered_json fn = ordered_json::object();
  if (!name.empty()) fn["name"] = name;
  fn["arguments"] = arguments;
  j["function"] = std::move(fn);
  return j;
}

ToolCallStream::ToolCallStream(ToolCallParseOptions options) : options_(std::move(options)) {}

void ToolCallStream::emit_content(std::string_view text, ToolStreamDelta& out) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
  }
  size_t body_end = text.size();
  while (body_end > 0 && is_space(text[body_end - 1])) --body_end;
  if (body_end > 0) {
    if (after_call_) {
      if (content_emitted_) out.content += '\n';
      after_call_ = false;
    }
    out.content += held_space_;
    out.content += text.substr(0, body_end);
    held_space_.clear();
    content_emitted_ = true;
  }
  held_space_ += text.substr(body_end);
}

void ToolCallStream::drain(ToolStreamDelta& out) {
  for (;;) {
    if (!in_block_) {
      const size_t p = buf_.find(kOpen);
      if (p == std::string::npos) {
        const size_t keep = partial_suffix(buf_, kOpen);
        emit_content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      emit_content(std::string_view(buf_).substr(0, p), out);
      buf_.erase(0, p);
      in_block_ = true;
    }
    const size_t e = buf_.find(kClose, kOpen.size());
    if (e == std::string::npos) return;  // wait for the end of the block
    const size_t block_end = e + kClose.size();
    const std::string_view inner = std::string_view(buf_).substr(kOpen.size(), e - kOpen.size());
    std::optional<ToolCall> call;
    if (options_.format == ToolCallFormat::kQwen3Json) call = parse_json_call(inner);
    if (options_.format == ToolCallFormat::kQwen35Xml) call = parse_xml_call(inner, options_.tools);
    if (call) {
      const size_t index = n_calls_++;
      out.tool_calls.push_back({.index = index, .id = options_.id_prefix + std::to_string(index), .name = call->name});
      out.tool_calls.push_back({.index = index, .arguments = call->arguments});
      held_space_.clear();
      after_call_ = true;
    } else {
      emit_content(std::string_view(buf_).substr(0, block_end), out);
    }
    buf_.erase(0, block_end);
    in_block_ = false;
  }
}

ToolStreamDelta ToolCallStream::push(std::string_view text) {
  ToolStreamDelta out;
  if (options_.format == ToolCallFormat::kNone) {
    out.content = std::string(text);
    return out;
  }
  buf_ += text;
  drain(out);
  return out;
}

ToolStreamDelta ToolCallStream::finish() {
  ToolStreamDelta out;
  drain(out);
  // What is left is a partial "<tool_call>" or a block that never closed: content.
  emit_content(buf_, out);
  buf_.clear();
  in_block_ = false;
  if (!after_call_) out.content += held_space_;
  held_space_.clear();
  return out;
}

ParsedReply parse_tool_calls(std::string_view text, const ToolCallParseOptions& options) {
  ToolCallStream stream(options);
  ParsedReply reply;
  auto take = [&](ToolStreamDelta d) {
    reply.content += d.content;
    for (ToolCallDelta& c : d.tool_calls) {
      if (!c.id.empty()) {
        reply.tool_calls.push_back({.id = c.id, .name = c.name});
      } else {
        reply.tool_calls[c.index].arguments += c.arguments;
      }
    }
  };
  take(stream.push(text));
  take(stream.finish());
  return reply;
}

}  // namespace moetier::server
