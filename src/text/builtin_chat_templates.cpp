#include "text/builtin_chat_templates.h"

#include <array>
#include <utility>

namespace moetier {

namespace {

struct Named {
  const char* name;
  const char* source;
};

// Formats as llama-server renders them for the same name, message by message; roles the
// format has no place for are skipped. A system message that the format has no place for is
// put before the first user message, as those families' own templates do.
constexpr std::array kTemplates = {
    Named{"chatml",
          "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
    Named{"llama3",
          "{%- for m in messages %}{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim + "
          "'<|eot_id|>' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"},
    // Llama 4: Llama 3's layout with <|header_start|>/<|header_end|> and <|eot|>.
    Named{"llama4",
          "{%- for m in messages %}{{- '<|header_start|>' + m.role + '<|header_end|>\\n\\n' + m.content | trim + "
          "'<|eot|>' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|header_start|>assistant<|header_end|>\\n\\n' }}{%- endif %}"},
    // Llama 2: [INST] user [/INST] assistant</s>, the next turn opens with [INST] again. Plain
    // `llama2` has no system block (the system text goes first, ending in a newline); the -sys
    // variants wrap it in <<SYS>>; -sys-bos opens later turns with <s>; -sys-strip trims every text.
    Named{"llama2",
          "{{- '[INST] ' }}{%- set ns = namespace(inside=true) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- '[INST] ' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- m.content + '\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content + ' [/INST]' }}"
          "{%- else %}{{- m.content + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    Named{"llama2-sys",
          "{{- '[INST] ' }}{%- set ns = namespace(inside=true) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- '[INST] ' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- '<<SYS>>\\n' + m.content + '\\n<</SYS>>\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content + ' [/INST]' }}"
          "{%- else %}{{- m.content + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    Named{"llama2-sys-bos",
          "{{- '[INST] ' }}{%- set ns = namespace(inside=true) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- '<s>[INST] ' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- '<<SYS>>\\n' + m.content + '\\n<</SYS>>\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content + ' [/INST]' }}"
          "{%- else %}{{- m.content + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    Named{"llama2-sys-strip",
          "{{- '[INST] ' }}{%- set ns = namespace(inside=true) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- '[INST] ' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- '<<SYS>>\\n' + m.content | trim + '\\n<</SYS>>\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content | trim + ' [/INST]' }}"
          "{%- else %}{{- m.content | trim + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    // Mistral's instruct formats: v1 (" [INST] ", spaces), v3 ("[INST] ", assistant text
    // trimmed), v3-tekken ("[INST]", no spaces); a system message opens the first [INST] block.
    Named{"mistral-v1",
          "{%- set ns = namespace(inside=false) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- ' [INST] ' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content + ' [/INST]' }}"
          "{%- else %}{{- ' ' + m.content + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    Named{"mistral-v3",
          "{%- set ns = namespace(inside=false) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- '[INST] ' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content + '[/INST]' }}"
          "{%- else %}{{- ' ' + m.content | trim + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    Named{"mistral-v3-tekken",
          "{%- set ns = namespace(inside=false) %}{%- for m in messages %}"
          "{%- if not ns.inside %}{{- '[INST]' }}{%- set ns.inside = true %}{%- endif %}"
          "{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- m.content + '[/INST]' }}"
          "{%- else %}{{- m.content + '</s>' }}{%- set ns.inside = false %}{%- endif %}{%- endfor %}"},
    // v7: [SYSTEM_PROMPT] blocks; v7-tekken (Mistral Small 3.x) without the spaces.
    Named{"mistral-v7",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- '[SYSTEM_PROMPT] ' + m.content + '[/SYSTEM_PROMPT]' }}"
          "{%- elif m.role == 'user' %}{{- '[INST] ' + m.content + '[/INST]' }}"
          "{%- else %}{{- ' ' + m.content + '</s>' }}{%- endif %}{%- endfor %}"},
    Named{"mistral-v7-tekken",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- '[SYSTEM_PROMPT]' + m.content + '[/SYSTEM_PROMPT]' }}"
          "{%- elif m.role == 'user' %}{{- '[INST]' + m.content + '[/INST]' }}"
          "{%- else %}{{- m.content + '</s>' }}{%- endif %}{%- endfor %}"},
    // Gemma: no system role; the system texts (trimmed, joined) open the next user turn.
    Named{"gemma",
          "{%- set ns = namespace(sys='') %}{%- for m in messages %}"
          "{%- if m.role == 'system' %}{%- set ns.sys = ns.sys + m.content | trim %}"
          "{%- else %}{%- set role = 'model' if m.role == 'assistant' else m.role %}"
          "{{- '<start_of_turn>' + role + '\\n' }}"
          "{%- if ns.sys and role != 'model' %}{{- ns.sys + '\\n\\n' }}{%- set ns.sys = '' %}{%- endif %}"
          "{{- m.content | trim + '<end_of_turn>\\n' }}{%- endif %}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"},
    Named{"phi3",
          "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"},
    // Phi-4: ChatML with <|im_sep|> after the role and no newlines.
    Named{"phi4",
          "{%- for m in messages %}{{- '<|im_start|>' + m.role + '<|im_sep|>' + m.content + '<|im_end|>' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant<|im_sep|>' }}{%- endif %}"},
    Named{"zephyr",
          "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content + '<|endoftext|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"},
    Named{"vicuna",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- 'USER: ' + m.content + '\\n' }}"
          "{%- elif m.role == 'assistant' %}{{- 'ASSISTANT: ' + m.content + '</s>\\n' }}{%- endif %}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- 'ASSISTANT:' }}{%- endif %}"},
    Named{"command-r",
          "{%- set tokens = {'system': '<|SYSTEM_TOKEN|>', 'user': '<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'} %}"
          "{%- for m in messages %}{%- if m.role in tokens %}"
          "{{- '<|START_OF_TURN_TOKEN|>' + tokens[m.role] + m.content | trim + '<|END_OF_TURN_TOKEN|>' }}{%- endif %}"
          "{%- endfor %}{%- if add_generation_prompt %}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{%- endif %}"},
    // DeepSeek Coder (### Instruction / ### Response), DeepSeek-V2 (User: / Assistant:),
    // DeepSeek-V3 and R1 (<｜User｜> / <｜Assistant｜>).
    Named{"deepseek",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- m.content }}"
          "{%- elif m.role == 'user' %}{{- '### Instruction:\\n' + m.content + '\\n' }}"
          "{%- elif m.role == 'assistant' %}{{- '### Response:\\n' + m.content + '\\n<|EOT|>\\n' }}{%- endif %}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '### Response:\\n' }}{%- endif %}"},
    Named{"deepseek2",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- 'User: ' + m.content + '\\n\\n' }}"
          "{%- elif m.role == 'assistant' %}{{- 'Assistant: ' + m.content + '<｜end▁of▁sentence｜>' }}{%- endif %}"
          "{%- endfor %}{%- if add_generation_prompt %}{{- 'Assistant:' }}{%- endif %}"},
    Named{"deepseek3",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- '<｜User｜>' + m.content }}"
          "{%- elif m.role == 'assistant' %}{{- '<｜Assistant｜>' + m.content + '<｜end▁of▁sentence｜>' }}{%- endif %}"
          "{%- endfor %}{%- if add_generation_prompt %}{{- '<｜Assistant｜>' }}{%- endif %}"},
    // GLM: ChatGLM3 ([gMASK]sop, a space after each role line), GLM-4 ([gMASK]<sop>), GLM-Edge.
    Named{"chatglm3",
          "{{- '[gMASK]sop' }}{%- for m in messages %}{{- '<|' + m.role + '|>\\n ' + m.content }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}"},
    Named{"chatglm4",
          "{{- '[gMASK]<sop>' }}{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"},
    Named{"glmedge",
          "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}"},
    // gpt-oss (OpenAI's Harmony layout, without channels): assistant turns end in <|return|>.
    Named{"gpt-oss",
          "{%- for m in messages %}{{- '<|start|>' + m.role + '<|message|>' + m.content + "
          "('<|return|>' if m.role == 'assistant' else '<|end|>') }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|start|>assistant' }}{%- endif %}"},
    Named{"kimi-k2",
          "{%- for m in messages %}"
          "{{- {'system': '<|im_system|>system<|im_middle|>', 'user': '<|im_user|>user<|im_middle|>', "
          "'assistant': '<|im_assistant|>assistant<|im_middle|>', 'tool': '<|im_system|>tool<|im_middle|>'}.get(m.role, '') }}"
          "{{- m.content + '<|im_end|>' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_assistant|>assistant<|im_middle|>' }}{%- endif %}"},
    // Hunyuan-A13B: the assistant's turn opens right after <|extra_0|>.
    Named{"hunyuan-moe",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- '<|startoftext|>' + m.content + '<|extra_4|>' }}"
          "{%- elif m.role == 'assistant' %}{{- m.content + '<|eos|>' }}"
          "{%- else %}{{- '<|startoftext|>' + m.content + '<|extra_0|>' }}{%- endif %}{%- endfor %}"},
};

// The names llama-server knows that have no built-in here: `--chat-template NAME` refuses them
// rather than render the name as a template's text.
constexpr std::array kOtherLlamaServerNames = {
    "falcon3",   "monarch",  "orion",        "openchat",   "vicuna-orca",   "deepseek-ocr", "minicpm",
    "exaone3",   "exaone4",  "exaone-moe",   "rwkv-world", "granite",       "granite-4.0",  "granite-4.1",
    "gigachat",  "megrez",   "yandex",       "bailing",    "bailing-think", "bailing2",     "smolvlm",
    "hunyuan-dense", "hunyuan-vl", "seed_oss", "grok-2",   "pangu-embedded", "solar-open",
};

// Markers that identify a format in a model's template, tried in order (the more specific
// first: phi4 and chatml share <|im_start|>; the Mistral and Llama 2 formats share [INST]).
// A rule without a name is a format with no built-in here: the search stops with none.
struct Marker {
  const char* name;
  std::array<const char*, 3> all_of;  // every non-null marker must appear
};
constexpr std::array kMarkers = {
    Marker{"phi4", {"<|im_start|>", "<|im_sep|>", nullptr}},
    Marker{"chatml", {"<|im_start|>", nullptr, nullptr}},
    Marker{"mistral-v7", {"[SYSTEM_PROMPT] ", nullptr, nullptr}},
    Marker{"mistral-v7-tekken", {"[SYSTEM_PROMPT]", nullptr, nullptr}},
    Marker{"mistral-v1", {"' [INST] ' + system_message", nullptr, nullptr}},
    Marker{"mistral-v1", {"[AVAILABLE_TOOLS]", " [INST]", nullptr}},
    Marker{"mistral-v3-tekken", {"[AVAILABLE_TOOLS]", "\"[INST]\"", nullptr}},
    Marker{"mistral-v3", {"[AVAILABLE_TOOLS]", nullptr, nullptr}},
    Marker{"llama2-sys-strip", {"[INST]", "content.strip()", nullptr}},
    Marker{"llama2-sys-bos", {"[INST]", "bos_token + '[INST]", nullptr}},
    Marker{"llama2-sys", {"[INST]", "<<SYS>>", nullptr}},
    Marker{"llama2", {"[INST]", nullptr, nullptr}},
    Marker{"phi3", {"<|assistant|>", "<|end|>", nullptr}},
    Marker{"chatglm4", {"[gMASK]<sop>", nullptr, nullptr}},
    Marker{nullptr, {"<|assistant|>", "<|user|>", "</s>"}},  // Falcon 3
    Marker{"glmedge", {"<|assistant|>", "<|user|>", nullptr}},
    Marker{"zephyr", {"<|user|>", "<|endoftext|>", nullptr}},
    Marker{"zephyr", {"<|assistant|>", "</s>", nullptr}},
    Marker{"gemma", {"<start_of_turn>", nullptr, nullptr}},
    Marker{nullptr, {"USER: ", "ASSISTANT: ", "SYSTEM: "}},  // Vicuna with Orca's system prefix
    Marker{"vicuna", {"USER: ", "ASSISTANT: ", nullptr}},
    Marker{"deepseek", {"### Instruction:", "<|EOT|>", nullptr}},
    Marker{"command-r", {"<|START_OF_TURN_TOKEN|>", nullptr, nullptr}},
    Marker{"llama3", {"<|start_header_id|>", "<|eot_id|>", nullptr}},
    Marker{"chatglm3", {"[gMASK]sop", nullptr, nullptr}},
    Marker{"deepseek2", {"'Assistant: ' + message['content'] + eos_token", nullptr, nullptr}},
    Marker{"deepseek3", {"<｜Assistant｜>", nullptr, nullptr}},
    Marker{"llama4", {"<|header_start|>", "<|header_end|>", nullptr}},
    Marker{"hunyuan-moe", {"<|extra_0|>", "<|extra_4|>", nullptr}},
    Marker{"gpt-oss", {"<|start|>", "<|channel|>", nullptr}},
    Marker{"kimi-k2", {"<|im_assistant|>assistant<|im_middle|>", nullptr, nullptr}},
    Marker{"vicuna", {"ASSISTANT:", nullptr, nullptr}},
};

}  // namespace

std::string detect_builtin_chat_template(std::string_view source) {
  for (const Named& t : kTemplates) {
    if (source == t.source) return t.name;
  }
  for (const Marker& m : kMarkers) {
    bool all = true;
    for (const char* s : m.all_of) all = all && (s == nullptr || source.find(s) != std::string_view::npos);
    if (all) return m.name ? m.name : "";
  }
  return "";
}

bool is_other_llama_server_template_name(std::string_view name) {
  for (const char* n : kOtherLlamaServerNames) {
    if (name == n) return true;
  }
  return false;
}

const char* find_builtin_chat_template(std::string_view name) {
  for (const Named& t : kTemplates) {
    if (name == t.name) return t.source;
  }
  return nullptr;
}

std::vector<std::string> builtin_chat_template_names() {
  std::vector<std::string> out;
  for (const Named& t : kTemplates) out.emplace_back(t.name);
  return out;
}

std::string builtin_chat_template_list() {
  std::string out;
  for (const Named& t : kTemplates) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

}  // namespace moetier
