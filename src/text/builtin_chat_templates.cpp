#include "text/builtin_chat_templates.h"

#include <array>
#include <utility>

namespace moetier {

namespace {

struct Named {
  const char* name;
  const char* source;
};

// Formats as their model families define them. A system message that the format has no
// place for is put before the first user message, as those families' own templates do.
constexpr std::array kTemplates = {
    Named{"chatml",
          "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
    Named{"llama3",
          "{%- for m in messages %}{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content | trim + "
          "'<|eot_id|>' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"},
    Named{"llama2",
          "{%- set ns = namespace(sys='') %}{%- for m in messages %}"
          "{%- if m.role == 'system' %}{%- set ns.sys = '<<SYS>>\\n' + m.content + '\\n<</SYS>>\\n\\n' %}"
          "{%- elif m.role == 'user' %}{{- '[INST] ' + ns.sys + m.content + ' [/INST]' }}{%- set ns.sys = '' %}"
          "{%- else %}{{- ' ' + m.content + ' </s><s>' }}{%- endif %}{%- endfor %}"},
    Named{"mistral-v7",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- '[SYSTEM_PROMPT] ' + m.content + '[/SYSTEM_PROMPT]' }}"
          "{%- elif m.role == 'user' %}{{- '[INST] ' + m.content + '[/INST]' }}"
          "{%- else %}{{- ' ' + m.content + '</s>' }}{%- endif %}{%- endfor %}"},
    Named{"gemma",
          "{%- set ns = namespace(sys='') %}{%- for m in messages %}"
          "{%- if m.role == 'system' %}{%- set ns.sys = m.content + '\\n\\n' %}"
          "{%- else %}{{- '<start_of_turn>' + ('model' if m.role == 'assistant' else m.role) + '\\n' + ns.sys + "
          "m.content | trim + '<end_of_turn>\\n' }}{%- set ns.sys = '' %}{%- endif %}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}{%- endif %}"},
    Named{"phi3",
          "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content + '<|end|>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"},
    Named{"zephyr",
          "{%- for m in messages %}{{- '<|' + m.role + '|>\\n' + m.content + '</s>\\n' }}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"},
    Named{"vicuna",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- m.content + '\\n\\n' }}"
          "{%- elif m.role == 'user' %}{{- 'USER: ' + m.content + '\\n' }}"
          "{%- else %}{{- 'ASSISTANT: ' + m.content + '</s>\\n' }}{%- endif %}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- 'ASSISTANT:' }}{%- endif %}"},
    Named{"command-r",
          "{%- for m in messages %}{{- '<|START_OF_TURN_TOKEN|>' + {'system': '<|SYSTEM_TOKEN|>', 'user': "
          "'<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'}[m.role] + m.content + '<|END_OF_TURN_TOKEN|>' }}"
          "{%- endfor %}{%- if add_generation_prompt %}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{%- endif %}"},
    Named{"deepseek3",
          "{%- for m in messages %}{%- if m.role == 'system' %}{{- m.content }}"
          "{%- elif m.role == 'user' %}{{- '<｜User｜>' + m.content }}"
          "{%- else %}{{- '<｜Assistant｜>' + m.content + '<｜end▁of▁sentence｜>' }}{%- endif %}{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<｜Assistant｜>' }}{%- endif %}"},
};

// Markers that identify a format, the more specific first (phi3 and zephyr share
// <|assistant|>; llama2 and mistral share [INST]).
struct Marker {
  const char* name;
  std::array<const char*, 2> all_of;  // every non-null marker must appear
};
constexpr std::array kMarkers = {
    Marker{"chatml", {"<|im_start|>", nullptr}},
    Marker{"llama3", {"<|start_header_id|>", "<|eot_id|>"}},
    Marker{"mistral-v7", {"[SYSTEM_PROMPT]", nullptr}},
    Marker{"llama2", {"[INST]", nullptr}},
    Marker{"gemma", {"<start_of_turn>", nullptr}},
    Marker{"phi3", {"<|assistant|>", "<|end|>"}},
    Marker{"zephyr", {"<|assistant|>", "</s>"}},
    Marker{"command-r", {"<|START_OF_TURN_TOKEN|>", nullptr}},
    Marker{"deepseek3", {"<｜Assistant｜>", nullptr}},
    Marker{"vicuna", {"ASSISTANT:", nullptr}},
};

}  // namespace

std::string detect_builtin_chat_template(std::string_view source) {
  for (const Marker& m : kMarkers) {
    bool all = true;
    for (const char* s : m.all_of) all = all && (s == nullptr || source.find(s) != std::string_view::npos);
    if (all) return m.name;
  }
  return "";
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
