// Chat templates by name, for `--chat-template NAME` (llama-server's named built-ins), written
// as Jinja for moetier's template engine. Each renders `messages` (system/user/assistant)
// as llama-server's formatter of the same name does and, with add_generation_prompt, the
// header of the assistant's turn where that formatter writes one; the BOS token is left to
// the tokenizer, as llama.cpp does.
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

// A name llama-server's --chat-template knows that has no built-in here (falcon3, granite, ...).
bool is_other_llama_server_template_name(std::string_view name);

// The built-in whose format a model's Jinja template writes, told by the special markers
// the template prints (<|im_start|> → chatml, <|start_header_id|> → llama3, ...); empty when
// none matches (or the format has no built-in). A built-in's own source is detected as itself.
// What `--no-jinja` renders with, as llama-server picks its formatter.
std::string detect_builtin_chat_template(std::string_view source);

}  // namespace moetier
