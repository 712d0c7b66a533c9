// moetier logits: raw little-endian f32 logits of the last prompt position (or of every
// position with --all) to a file, for verification against other engines.
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_report.h"
#include "cli/prompt_input.h"
#include "engine/session.h"
#include "platform/file.h"

namespace moetier {

int cmd_logits(int argc, char** argv) {
  EngineOptions flags;
  std::string prompt, prompt_file, token_list, out_path;
  bool all = false, no_parse_special = false;
  ArgParser p("logits", "Write the f32 logits of a prompt to a file (little-endian, n_vocab values per row).");
  p.option({"-p", "--prompt"}, "TEXT", "prompt text", &prompt);
  p.option({"-f", "--file"}, "FILE", "prompt from a file (exact bytes)", &prompt_file);
  p.option({"--tokens"}, "IDS", "comma-separated token ids instead of text", &token_list);
  p.option({"-o", "--output"}, "FILE", "output file (required)", &out_path);
  p.flag({"--all"}, &all, "logits of every prompt position, not just the last");
  p.flag({"--no-parse-special"}, &no_parse_special, "tokenize control-token text as plain text");
  add_engine_flags(p, flags);
  p.epilog("The prompt is tokenized exactly as 'moetier tokenize' does (no BOS unless the model asks for one).\n"
           "example: moetier logits -m model.gguf -p \"Hello\" -o logits.bin --all");
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (flags.list_devices) return print_gpu_devices(flags.verbose);
  const int sources = !prompt.empty() + !prompt_file.empty() + !token_list.empty();
  if (sources != 1) return report_error(Status::bad_input("give exactly one of -p, -f, --tokens"));
  if (out_path.empty()) return report_error(Status::bad_input("no output file (-o FILE)"));

  StderrLoadReporter reporter;
  auto session = open_session(flags, {.reporter = flags.verbose ? &reporter : nullptr});
  if (!session) return report_error(session.status());
  std::vector<int32_t> tokens;
  if (!token_list.empty()) {
    auto ids = parse_token_list(token_list);
    if (!ids) return report_error(ids.status());
    tokens = *ids;
  } else {
    if (!prompt_file.empty()) {
      auto text = read_text_file(prompt_file);
      if (!text) return report_error(text.status());
      prompt = *text;
    }
    tokens = session->tokenizer->encode(prompt, {.parse_special = !no_parse_special});
  }
  if (tokens.empty()) return report_error(Status::bad_input("the prompt has no tokens"));
  std::vector<float> logits;
  auto st = session->model->forward(tokens, *session->sequence, {.all_logits = all}, logits, *session->pool);
  if (!st) return report_error(st);
  std::FILE* out = platform::open_stdio_file(out_path, "wb");
  if (!out) return report_error(Status::runtime(fmt::format("cannot create '{}'", out_path)));
  const bool ok = std::fwrite(logits.data(), sizeof(float), logits.size(), out) == logits.size();
  if (std::fclose(out) != 0 || !ok) return report_error(Status::runtime(fmt::format("cannot write '{}'", out_path)));
  std::fprintf(stderr, "moetier: %zu tokens, wrote %zu rows x %lld logits to %s\n", tokens.size(),
               logits.size() / static_cast<size_t>(session->model->hparams().n_vocab),
               static_cast<long long>(session->model->hparams().n_vocab), out_path.c_str());
  return 0;
}

}  // namespace moetier
