#include "runtime/chat_prompt.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace moetier {

const char* const kChatMlTemplate =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::bad_input(fmt::format("cannot open chat template file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::runtime(fmt::format("cannot read chat template file '{}'", path));
  return ss.str();
}

}  // namespace

Result<ChatPrompt> ChatPrompt::load(const gguf::GgufFile& header, const text::Tokenizer& tok,
                                    const std::string& template_file) {
  std::string source, origin;
  bool fallback = false;
  if (!template_file.empty()) {
    ASSIGN_OR_RETURN(source, read_file(template_file));
    origin = "file " + template_file;
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
    return template_file.empty() ? tmpl.status().with_context("the model's chat template")
                                 : tmpl.status().with_context(template_file);
  }
  ChatPrompt p(std::move(tmpl).value(), std::move(source), std::move(origin));
  p.fallback_ = fallback;
  auto text_of = [&](int32_t id) -> std::optional<std::string> {
    if (id < 0) return std::nullopt;
    return std::string(tok.token_text(id));
  };
  const auto& ids = tok.special_ids();
  // As `moetier chat` always has: eos and pad (Qwen's tokenizer_config has no bos_token,
  // although the GGUF names <|endoftext|> as BOS).
  p.eos_ = text_of(ids.eos);
  p.pad_ = text_of(ids.pad);
  return p;
}

Result<std::string> ChatPrompt::render(const ChatRenderParams& params) const {
  ASSIGN_OR_RETURN(auto context, text::build_chat_context({.messages = params.messages,
                                                           .tools = params.tools,
                                                           .add_generation_prompt = params.add_generation_prompt,
                                                           .enable_thinking = params.enable_thinking,
                                                           .eos_token = eos_,
                                                           .pad_token = pad_,
                                                           .kwargs = params.kwargs,
                                                           .normalization = params.normalization}));
  return template_.render(context);
}

}  // namespace moetier
