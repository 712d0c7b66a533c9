// The model's chat template, ready to render OpenAI-style messages into a prompt: the
// template from --chat-template-file, else the GGUF's tokenizer.chat_template, else ChatML
// (what llama-server falls back to), with the special-token strings Hugging Face passes.
// Shared by `moetier chat` and `moetier serve`. Immutable after load(); render() is const
// and may run on any number of threads at once.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "gguf/gguf.h"
#include "text/template/chat_template.h"
#include "text/tokenizer.h"

namespace moetier {

// ChatML: <|im_start|>role\ncontent<|im_end|>\n per message, then <|im_start|>assistant\n.
extern const char* const kChatMlTemplate;

struct ChatRenderParams {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nullptr;
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // nullopt: not defined for the template
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // merged last
  // OpenAI clients send content parts and null content; llama-server accepts them.
  text::MessageNormalization normalization = text::MessageNormalization::llamacpp_compatible();
};

class ChatPrompt {
 public:
  // Where the template comes from, first match wins: `file` (--chat-template-file), then
  // `name_or_source` (--chat-template: a built-in's name such as llama3, or, as in
  // llama-server, the Jinja source itself), else the model's own (ChatML when it has none).
  // `builtin_only` (--no-jinja): no Jinja of the model's; the built-in whose format the
  // model's template writes (detect_builtin_chat_template), ChatML when none matches.
  struct Choice {
    std::string file;
    std::string name_or_source;
    bool builtin_only = false;
  };
  static Result<ChatPrompt> load(const gguf::GgufFile& header, const text::Tokenizer& tokenizer, const Choice& choice);

  Result<std::string> render(const ChatRenderParams& params) const;

  const std::string& source() const { return source_; }
  // Where the template came from: "file PATH", "model", or "built-in ChatML (...)".
  const std::string& origin() const { return origin_; }
  // True when neither a file nor the model gave a template (ChatML is used).
  bool is_fallback() const { return fallback_; }
  // The vocabulary's BOS and EOS token texts as templates see them (empty when the
  // vocabulary has none); llama-server's /props reports them.
  std::string bos_token() const { return bos_.value_or(""); }
  std::string eos_token() const { return eos_.value_or(""); }
  // A built-in format rendered in place of the model's template (--no-jinja): it has no
  // place for tools, as llama-server's formatters have none.
  bool builtin_only() const { return builtin_only_; }
  // The template reads `enable_thinking` (Qwen3's and Qwen3.5/3.6's do): llama-server then
  // always defines it, so the thinking switch works in either direction.
  bool supports_thinking() const { return source_.find("enable_thinking") != std::string::npos; }

 private:
  ChatPrompt(text::ChatTemplate tmpl, std::string source, std::string origin)
      : template_(std::move(tmpl)), source_(std::move(source)), origin_(std::move(origin)) {}
  text::ChatTemplate template_;
  std::string source_, origin_;
  bool fallback_ = false;
  bool builtin_only_ = false;
  std::optional<std::string> bos_, eos_, pad_;
};

}  // namespace moetier
