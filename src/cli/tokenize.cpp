// moetier tokenize: token ids and pieces of a text, with the model's own tokenizer. Works
// on vocab-only GGUF files.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/prompt_input.h"
#include "core/args.h"
#include "engine/session.h"

namespace moetier {

int cmd_tokenize(int argc, char** argv) {
  EngineOptions flags;
  std::string prompt, prompt_file;
  bool ids_only = false, no_parse_special = false;
  ArgParser p("tokenize", "Tokenize text with a model's tokenizer (also works on vocab-only GGUF files).");
  p.option({"-m", "--model"}, "FILE", "GGUF file with tokenizer metadata", &flags.model_path);
  p.option({"-p", "--prompt"}, "TEXT", "text to tokenize", &prompt);
  p.option({"-f", "--file"}, "FILE", "text from a file (exact bytes)", &prompt_file);
  p.flag({"--ids"}, &ids_only, "print only one JSON array of token ids");
  p.flag({"--no-parse-special"}, &no_parse_special, "do not turn control-token text (<|im_start|>) into tokens");
  p.epilog("Output: one line per token, 'ID -> \\'PIECE\\'' (or, with --ids, exactly one JSON array).");
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (!prompt.empty() && !prompt_file.empty()) return report_error(Status::bad_input("give -p or -f, not both"));
  if (!prompt_file.empty()) {
    auto text = read_text_file(prompt_file);
    if (!text) return report_error(text.status());
    prompt = *text;
  } else if (!p.given("-p") && !p.given("--prompt")) {
    return report_error(Status::bad_input("no text given (-p TEXT or -f FILE)"));
  }
  auto session = open_session(flags, {.need_model = false});
  if (!session) return report_error(session.status());
  const auto tokens = session->tokenizer->encode(prompt, {.parse_special = !no_parse_special});
  if (ids_only) {
    std::printf("%s\n", nlohmann::json(tokens).dump().c_str());
    return 0;
  }
  for (int32_t id : tokens) {
    const std::string piece = session->tokenizer->token_to_piece(id, /*render_special=*/true);
    std::printf("%6d -> '%s'\n", id, piece.c_str());
  }
  std::fprintf(stderr, "moetier: %zu tokens\n", tokens.size());
  return 0;
}

}  // namespace moetier
