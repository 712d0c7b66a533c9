// moetier eval SUITE: the evaluation suites the seed reports ran, against moetier or any
// OpenAI-compatible server.
#include <cstdio>
#include <string_view>

#include "tools/commands.h"
#include "tools/eval/eval_commands.h"

namespace moetier {

namespace {

struct Suite {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);
};

constexpr Suite kSuites[] = {
    {"longcontext", "longcontext-v1: needle retrieval at 4K-64K tokens, English and Chinese, with a length x depth table",
     cmd_eval_longcontext},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: moetier eval <suite> [options]   (moetier eval <suite> --help)\n\nsuites:\n");
  for (const Suite& s : kSuites) {
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(s.name.size()), s.name.data(), static_cast<int>(s.summary.size()),
                 s.summary.data());
  }
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "-h" || name == "--help") {
    usage(stdout);
    return 0;
  }
  for (const Suite& s : kSuites) {
    if (s.name == name) return s.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "moetier: error: unknown suite '%.*s'\n", static_cast<int>(name.size()), name.data());
  usage(stderr);
  return 2;
}

}  // namespace moetier
