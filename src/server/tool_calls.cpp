// Finding tool calls in generated text (whole and streamed), for any format of the table in
// tool_call_formats.h. Grammar and request validation: tool_call_grammar.cpp.
#include "server/tool_calls.h"

#include <algorithm>
#include <utility>

#include "server/tool_call_formats.h"

namespace moetier::server {

using nlohmann::ordered_json;

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Where an opener starts in `s`: the earliest complete one (`full`), and the earliest
// position from which the rest of `s` is a proper prefix of some opener (`partial`).
struct OpenerMatch {
  size_t full = std::string::npos, partial = std::string::npos;
};

OpenerMatch find_opener(std::string_view s, const std::vector<std::string_view>& openers) {
  OpenerMatch m;
  for (std::string_view o : openers) {
    m.full = std::min(m.full, s.find(o));
    for (size_t k = std::min(o.size() - 1, s.size()); k > 0; --k) {
      if (s.substr(s.size() - k) == o.substr(0, k)) {
        m.partial = std::min(m.partial, s.size() - k);
        break;
      }
    }
  }
  return m;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view chat_template_source) {
  for (const tool_format::FormatDef& f : tool_format::all()) {
    if (f.detect(chat_template_source)) return f.id;
  }
  return ToolCallFormat::kNone;
}

std::string_view tool_call_format_name(ToolCallFormat format) {
  return format == ToolCallFormat::kNone ? "none" : tool_format::get(format).name;
}

std::string known_tool_call_formats() {
  std::string out;
  for (const tool_format::FormatDef& f : tool_format::all()) {
    if (!out.empty()) out += "; ";
    out += f.name;
  }
  return out;
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

ToolCallStream::ToolCallStream(ToolCallParseOptions options) : options_(std::move(options)) {
  if (options_.format == ToolCallFormat::kNone) return;
  format_ = &tool_format::get(options_.format);
  buf_ = std::string(format_->implicit_prefix);
  hidden_ = buf_.size();
}

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

void ToolCallStream::take_content(size_t n, ToolStreamDelta& out) {
  const size_t hidden = std::min(hidden_, n);
  emit_content(std::string_view(buf_).substr(hidden, n - hidden), out);
  buf_.erase(0, n);
  hidden_ -= hidden;
}

void ToolCallStream::drain(ToolStreamDelta& out, bool final) {
  const tool_format::FormatDef& f = *format_;
  while (!buf_.empty()) {
    if (!in_block_) {
      const OpenerMatch m = find_opener(buf_, f.openers);
      if (!final && m.partial < m.full) {  // an opener may be arriving: wait for it
        take_content(m.partial, out);
        return;
      }
      if (m.full == std::string::npos) {
        take_content(buf_.size(), out);
        return;
      }
      take_content(m.full, out);
      in_block_ = true;
    }
    const size_t end = f.block_end(buf_, final);
    if (end == tool_format::kNeedMore) return;  // wait for the end of the block
    std::optional<std::vector<ToolCall>> calls = f.parse(std::string_view(buf_).substr(0, end), options_.tools);
    if (calls) {
      for (ToolCall& call : *calls) {
        const size_t index = n_calls_++;
        std::string id = !call.id.empty() ? std::move(call.id)
                         : f.make_id      ? f.make_id(options_.id_prefix, index)
                                          : options_.id_prefix + std::to_string(index);
        out.tool_calls.push_back({.index = index, .id = std::move(id), .name = std::move(call.name)});
        out.tool_calls.push_back({.index = index, .arguments = std::move(call.arguments)});
      }
      if (!calls->empty()) {
        held_space_.clear();
        after_call_ = true;
      }
      buf_.erase(0, end);
      hidden_ -= std::min(hidden_, end);
    } else {
      take_content(end, out);
    }
    in_block_ = false;
  }
}

ToolStreamDelta ToolCallStream::push(std::string_view text) {
  ToolStreamDelta out;
  if (!format_) {
    out.content = std::string(text);
    return out;
  }
  buf_ += text;
  drain(out, false);
  return out;
}

ToolStreamDelta ToolCallStream::finish() {
  ToolStreamDelta out;
  if (!format_) return out;
  // Every block ends now: one cut off stays content.
  drain(out, true);
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
