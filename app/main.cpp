// The `moetier` binary: one executable, one subcommand per job.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "core/cpu_features.h"
#include "platform/process.h"
#include "platform/terminal.h"

namespace {

struct Command {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);
};

constexpr Command kCommands[] = {
    {"inspect", "what is really in a GGUF file: identity, tensor census, architecture, memory plan",
     moetier::cmd_inspect},
    {"synth", "write a random-weight model with the exact tensor shapes of a real one", moetier::cmd_synth},
    {"run", "generate text from a prompt", moetier::cmd_run},
    {"chat", "chat interactively using the model's chat template", moetier::cmd_chat},
    {"serve", "OpenAI-compatible HTTP server with parallel slots (llama-server's flags)", moetier::cmd_serve},
    {"logits", "write the f32 logits of a prompt to a file (verification against other engines)",
     moetier::cmd_logits},
    {"tokenize", "show the token ids of a text (works on vocab-only files)", moetier::cmd_tokenize},
    {"template", "render a chat template with a JSON context, or print a model's template", moetier::cmd_template},
    {"bench", "measure prompt and generation speed (llama-bench's flags and output formats)", moetier::cmd_bench},
    {"tune", "search -ngl/-ncmoe/-t/-ub/mmap/KV type by measurement; prints the winning command line", moetier::cmd_tune},
    {"eval", "evaluation suites (longcontext-v1, capability-v1) against moetier or any OpenAI-compatible server",
     moetier::cmd_eval},
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "moetier %s — Mixture-of-Experts inference for machines whose GPU is too small for the model\n\n"
               "usage: moetier <command> [options]   (moetier <command> --help for its options)\n\ncommands:\n",
               MOETIER_VERSION);
  for (const auto& c : kCommands) {
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
  }
  std::fprintf(out, "\nexit status: 0 success, 1 runtime failure, 2 bad usage or bad input\n");
}

// --cpu-isa TIER (or --cpu-isa=TIER) anywhere on the command line caps the kernels' ISA for
// the whole process; it is applied here, before any command reads the CPU's features, and
// the commands accept the flag (so it shows in their --help). Returns 0 to go on, else the
// exit status.
int apply_cpu_isa(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    std::string_view tier;
    if (a == "--cpu-isa") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "moetier: error: --cpu-isa needs a value: auto, avx512, avx2, avx2-novnni or scalar\n");
        return 2;
      }
      tier = argv[i + 1];
    } else if (a.rfind("--cpu-isa=", 0) == 0) {
      tier = a.substr(std::strlen("--cpu-isa="));
    } else {
      continue;
    }
    if (const auto st = moetier::limit_cpu_isa(tier); !st) {
      std::fprintf(stderr, "moetier: error: %s\n", st.message().c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** os_argv) {
  moetier::platform::prepare_console();  // before any output
  // The arguments as UTF-8 on every OS (Windows gives main() its ANSI code page): every
  // command and path below sees the text the user typed.
  std::vector<std::string> args = moetier::platform::utf8_arguments(argc, os_argv);
  std::vector<char*> arg_pointers;
  for (std::string& a : args) arg_pointers.push_back(a.data());
  arg_pointers.push_back(nullptr);
  char** argv = arg_pointers.data();
  argc = static_cast<int>(args.size());
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (const int rc = apply_cpu_isa(argc, argv); rc != 0) return rc;
  const std::string_view cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    print_usage(stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::printf("moetier %s (cpu: %s)\n", MOETIER_VERSION, moetier::cpu_features().describe().c_str());
    return 0;
  }
  for (const auto& c : kCommands) {
    if (c.name == cmd) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "moetier: error: unknown command '%s' (see 'moetier --help')\n", argv[1]);
  return 2;
}
