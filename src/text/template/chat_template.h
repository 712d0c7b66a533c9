// Chat templates: the Jinja subset that Hugging Face chat templates (tokenizer.chat_template)
// are written in, rendered the way transformers' apply_chat_template renders them.
//
//   ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::parse(source));
//   ASSIGN_OR_RETURN(auto context, build_chat_context({.messages = msgs, .add_generation_prompt = true,
//                                                      .eos_token = "<|im_end|>"}));
//   ASSIGN_OR_RETURN(std::string prompt, tmpl.render(context));
//
// Supported: text with whitespace control (`{%- -%}`, `{{- -}}`, trim_blocks, lstrip_blocks,
// newlines normalized to \n), comments, {% if/elif/else %}, {% for %} (tuple targets, `if`
// filter, else, loop.*, break, continue), {% set %} (names, tuples, ns.attr, block form),
// {% macro %} with defaults and keyword arguments, {% filter %} blocks, {% raw %},
// {% generation %}; expressions with Python semantics (literals, lists, dicts, attribute/item
// access, slices, calls, arithmetic, ~, comparisons, in, and/or/not, conditional
// expressions); the filters, tests, methods and globals listed in builtins.h.
// Anything else (include, extends, block, call, with, unknown filters or tests)
// fails at parse time with the construct's name and line:col; runtime errors carry line:col too.
// `raise_exception(msg)` in a template fails the render with exactly `msg`.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace moetier::text {

namespace jinja {
struct Stmt;
}

struct ChatTemplateOptions {
  bool trim_blocks = true;    // as Hugging Face's environment
  bool lstrip_blocks = true;  // as Hugging Face's environment
  bool keep_trailing_newline = false;  // Jinja2's default: one final newline of the template is dropped
};

class ChatTemplate {
 public:
  // Parse errors are kBadInput with "chat template LINE:COL: ..." messages.
  static Result<ChatTemplate> parse(std::string_view source, const ChatTemplateOptions& options = {});

  // `context` must be a JSON object; each member becomes a template variable. Object key order
  // is kept (tojson reproduces it), which is why this takes ordered_json. A key that is absent
  // is undefined in the template (`x is defined` is false), unlike a key set to null (none).
  Result<std::string> render(const nlohmann::ordered_json& context) const;

 private:
  ChatTemplate() = default;  // only parse() makes one, so program_ is never null
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> program_;
};

// How to adapt OpenAI-style messages before rendering. All off = Hugging Face's behaviour
// (the template sees the messages as given); llamacpp_compatible() = what llama.cpp's server
// does, which OpenAI clients rely on (see shared/ref/chat/README.md, cases 17-19).
struct MessageNormalization {
  bool null_content_as_empty = false;  // "content": null -> ""
  bool join_text_parts = false;        // "content": [{type: text, text}, ...] -> texts joined by "\n"
  bool parse_tool_arguments = false;   // tool_calls[].function.arguments JSON string -> object
  static MessageNormalization llamacpp_compatible() {
    return {.null_content_as_empty = true, .join_text_parts = true, .parse_tool_arguments = true};
  }
};

struct ChatContextParams {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI chat messages
  nlohmann::ordered_json tools = nullptr;  // array of tool definitions; null or empty = not passed
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // --reasoning on|off; nullopt (auto) = not defined
  // Special-token strings as Hugging Face passes them; nullopt = the model has none (not defined).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> unk_token;
  // --chat-template-kwargs: a JSON object merged last (overrides enable_thinking and the tokens).
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  MessageNormalization normalization;
};

// Builds the render context. Fails (kBadInput) when messages is not an array of objects, tools
// is not an array, kwargs is not an object or tries to replace messages/tools/add_generation_prompt,
// or a normalization step meets content it cannot convert (e.g. an image part).
Result<nlohmann::ordered_json> build_chat_context(const ChatContextParams& params);

}  // namespace moetier::text
