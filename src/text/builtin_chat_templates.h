// Chat templates by name, for `--chat-template NAME` (llama-server's named built-ins), written
// as Jinja for moetier's template engine. Each renders `messages` (system/user/assistant)
// and, with add_generation_prompt, the header of the assistant's turn; the BOS token is left
// to the tokenizer, as llama.cpp does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moetier {

// The Jinja source of a built-in template, or nullptr when `name` is none of them.
const char* find_builtin_chat_template(std::string_view name);
std::vector<std::string> builtin_chat_template_names();
// The names, comma-separated (for --help).
std::string builtin_chat_template_list();

// The built-in whose format a model's Jinja template writes, told by the special markers
// the template prints (<|im_start|> → chatml, <|start_header_id|> → llama3, ...); empty when
// none matches. What `--no-jinja` renders with, as llama-server picks its formatter.
std::string detect_builtin_chat_template(std::string_view source);

}  // namespace moetier
