#include "text/template/chat_template.h"

#include "text/template/eval.h"
#include "text/template/lexer.h"
#include "text/template/parser.h"

namespace moetier::text {

using nlohmann::ordered_json;

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, const ChatTemplateOptions& options) {
  ASSIGN_OR_RETURN(std::vector<jinja::Segment> segments,
                   jinja::lex_template(source, {.trim_blocks = options.trim_blocks,
                                                .lstrip_blocks = options.lstrip_blocks,
                                                .keep_trailing_newline = options.keep_trailing_newline}));
  ASSIGN_OR_RETURN(jinja::StmtList program, jinja::parse_template(segments));
  ChatTemplate tmpl;
  tmpl.program_ = std::make_shared<const jinja::StmtList>(std::move(program));
  return tmpl;
}

Result<std::string> ChatTemplate::render(const ordered_json& context) const {
  if (!context.is_object()) return Status::bad_input("chat template context must be a JSON object");
  jinja::ValueDict globals;
  globals.reserve(context.size());
  for (const auto& [key, value] : context.items()) globals.emplace_back(key, jinja::value_from_json(value));
  return jinja::render_program(*program_, globals, jinja::RenderLimits{});
}

namespace {

Status normalize_message(ordered_json& message, size_t index, const MessageNormalization& norm) {
  if (!message.is_object()) return Status::bad_input(fmt::format("messages[{}] is not an object", index));
  auto content = message.find("content");
  if (content != message.end()) {
    if (norm.null_content_as_empty && content->is_null()) *content = "";
    if (norm.join_text_parts && content->is_array()) {
      std::string joined;
      for (size_t i = 0; i < content->size(); ++i) {
        const ordered_json& part = (*content)[i];
        const bool is_text = part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
                             part["text"].is_string();
        if (!is_text) {
          const std::string type = part.is_object() && part.contains("type") ? part["type"].dump() : part.dump();
          return Status::bad_input(
              fmt::format("messages[{}].content[{}]: only text parts are supported, got {}", index, i, type));
        }
        if (i) joined += "\n";
        joined += part["text"].get<std::string>();
      }
      *content = joined;
    }
  }
  auto calls = message.find("tool_calls");
  if (norm.parse_tool_arguments && calls != message.end() && calls->is_array()) {
    for (ordered_json& call : *calls) {
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      ordered_json& function = call["function"];
      auto args = function.find("arguments");
      if (args == function.end() || !args->is_string()) continue;
      // Unparseable arguments stay a string: the template then prints them verbatim.
      ordered_json parsed = ordered_json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded()) *args = std::move(parsed);
    }
  }
  return Status::ok();
}

}  // namespace

Result<ordered_json> build_chat_context(const ChatContextParams& params) {
  if (!params.messages.is_array()) return Status::bad_input("chat messages must be a JSON array");
  if (!params.tools.is_null() && !params.tools.is_array()) return Status::bad_input("tools must be a JSON array");
  if (!params.kwargs.is_object()) return Status::bad_input("chat template kwargs must be a JSON object");
  ordered_json context = ordered_json::object();
  ordered_json messages = params.messages;
  for (size_t i = 0; i < messages.size(); ++i) RETURN_IF_ERROR(normalize_message(messages[i], i, params.normalization));
  context["messages"] = std::move(messages);
  if (params.tools.is_array() && !params.tools.empty()) context["tools"] = params.tools;
  context["add_generation_prompt"] = params.add_generation_prompt;
  if (params.bos_token) context["bos_token"] = *params.bos_token;
  if (params.eos_token) context["eos_token"] = *params.eos_token;
  if (params.pad_token) context["pad_token"] = *params.pad_token;
  if (params.unk_token) context["unk_token"] = *params.unk_token;
  if (params.enable_thinking) context["enable_thinking"] = *params.enable_thinking;
  for (const auto& [key, value] : params.kwargs.items()) {
    if (key == "messages" || key == "tools" || key == "add_generation_prompt") {
      return Status::bad_input(fmt::format("chat template kwargs must not set '{}'", key));
    }
    context[key] = value;
  }
  return context;
}

}  // namespace moetier::text
