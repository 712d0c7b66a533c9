#include "text/chat_prompt.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/utf8_path.h"
#include "text/builtin_chat_templates.h"

namespace moetier {

const char* const kChatMlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(utf8_path(path), std::ios::binary);
  if (!in) return Status::bad_input(fmt::format("cannot open chat template file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::runtime(fmt::format("cannot read chat template file '{}'", path));
  return ss.str();
}

}  // namespace

Result<ChatPrompt> ChatPrompt::load(const gguf::GgufFile& header, const text::Tokenizer& tok, const Choice& choice) {
  const std::string& template_file = choice.file;
  std::string source, origin;
  bool fallback = false;
  if (!template_file.empty()) {
    ASSIGN_OR_RETURN(source, read_file(template_file));
    origin = "file " + template_file;
  } else if (!choice.name_or_source.empty()) {
    if (const char* builtin = find_builtin_chat_template(choice.name_or_source)) {
      source = builtin;
      origin = "built-in " + choice.name_or_source;
    } else if (is_other_llama_server_template_name(choice.name_or_source)) {
      return Status::bad_input(fmt::format(
          "--chat-template {}: llama-server's built-in of that name is not available here; give the model's Jinja "
          "template with --chat-template-file, or one of: {}",
          choice.name_or_source, builtin_chat_template_list()));
    } else {
      source = choice.name_or_source;
      origin = "--chat-template (Jinja source)";
    }
  } else if (choice.builtin_only) {
    const std::string model_template = header.get_string_or("tokenizer.chat_template", "");
    std::string name = detect_builtin_chat_template(model_template);
    if (name.empty()) {
      name = "chatml";
      origin = model_template.empty() ? "built-in chatml (--no-jinja; the model has no chat template)"
                                      : "built-in chatml (--no-jinja; the model's template matches no built-in format)";
    } else {
      origin = "built-in " + name + " (--no-jinja; the format of the model's template)";
    }
    source = find_builtin_chat_template(name);
  } else {
    source = header.get_string_or("tokenizer.chat_template", "");
    origin = "model";
    if (source.empty()) {
      source = kChatMlTemplate;
      origin = "built-in ChatML (the model has no chat template)";
      fallback = true;
    }
  }
  auto tmpl = text::ChatTemplate::parse(source);
  if (!tmpl) {
    if (!template_file.empty()) return tmpl.status().with_context(template_file);
    if (!choice.name_or_source.empty()) return tmpl.status().with_context("--chat-template");
    return tmpl.status().with_context("the model's chat template");
  }
  ChatPrompt p(std::move(tmpl).value(), std::move(source), std::move(origin));
  p.fallback_ = fallback;
  p.builtin_only_ = choice.builtin_only && template_file.empty() && choice.name_or_source.empty();
  auto text_of = [&](int32_t id) -> std::optional<std::string> {
    if (id < 0) return std::nullopt;
    return std::string(tok.token_text(id));
  };
  const auto& ids = tok.special_ids();
  // As llama.cpp: the vocabulary's BOS, EOS and padding tokens (Qwen's templates use none of
  // them; other families' templates start with bos_token).
  p.bos_ = text_of(ids.bos);
  p.eos_ = text_of(ids.eos);
  p.pad_ = text_of(ids.pad);
  return p;
}

Result<std::string> ChatPrompt::render(const ChatRenderParams& params) const {
  // As llama.cpp: today's date for templates that print it (Llama 3.x's date_string),
  // unless the caller set it.
  nlohmann::ordered_json kwargs = params.kwargs;
  if (!kwargs.contains("date_string")) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char date[32];
    std::strftime(date, sizeof(date), "%d %b %Y", &local);
    kwargs["date_string"] = date;
  }
  ASSIGN_OR_RETURN(auto context, text::build_chat_context({.messages = params.messages,
                                                           .tools = params.tools,
                                                           .add_generation_prompt = params.add_generation_prompt,
                                                           .enable_thinking = params.enable_thinking,
                                                           .bos_token = bos_,
                                                           .eos_token = eos_,
                                                           .pad_token = pad_,
                                                           .kwargs = kwargs,
                                                           .normalization = params.normalization}));
  return template_.render(context);
}

}  // namespace moetier
