// The tool-call format table (tool_call_formats.h): the formats in detection order. Each
// format's code is its family's unit under tool_formats/.
#include "server/tool_call_formats.h"

#include "server/tool_formats/common.h"

namespace moetier::server::tool_format {

const std::vector<FormatDef>& all() {
  // Order matters where markers overlap: Functionary v3.1 also writes "<function=" (before
  // Qwen3.5's XML form, which also writes "<tool_call>"); Mistral Small 3.2's [CALL_ID] and
  // the [ARGS] form before Nemo's plain [TOOL_CALLS]; DeepSeek R1's fenced JSON before V3.1.
  static const std::vector<FormatDef> table = {
      functionary_v31_format(),
      qwen35_xml_format(),
      qwen3_json_format(),
      functionary_v32_format(),
      llama3_format(),
      mistral_call_id_format(),
      mistral_args_format(),
      mistral_nemo_format(),
      command_r7b_format(),
      deepseek_r1_format(),
      deepseek_v31_format(),
  };
  return table;
}

const FormatDef& get(ToolCallFormat format) {
  for (const FormatDef& f : all()) {
    if (f.id == format) return f;
  }
  return all().front();  // kNone: callers check for it first
}

}  // namespace moetier::server::tool_format
