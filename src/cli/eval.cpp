// moetier eval SUITE: the evaluation suites (docs/evaluation.md). longcontext-v1 is C++
// (src/eval/: it measures lengths with the model's own tokenizer). capability-v1
// judges what the model's HTML/SVG/JS renders in headless Chromium, so it is written in
// Node.js (tools/eval/capability/run.mjs, puppeteer-core); for it this command finds Node and
// the script and hands them every argument, plus this binary (for -m, which starts
// `moetier serve`) and its version. The script owns the flags and --help, so they are
// written down once.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/commands.h"
#include "cli/eval_commands.h"
#include "core/status.h"
#include "core/utf8_path.h"
#include "platform/process.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

struct Suite {
  std::string_view name;
  std::string_view folder;  // under tools/eval/ (a Node.js suite); empty for a C++ suite
  std::string_view summary;
  int (*native)(int argc, char** argv) = nullptr;  // the C++ suite's command
};

constexpr Suite kSuites[] = {
    {"longcontext", "",
     "longcontext-v1: needle retrieval at 4K-64K tokens, English and Chinese, with a length x depth table",
     cmd_eval_longcontext},
    {"capability", "capability",
     "capability-v1: SVG animation, WebGL with self-repair, a UI card (rendered in headless Chromium), two logic puzzles"},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: moetier eval <suite> [options]   (moetier eval <suite> --help for its options)\n\nsuites:\n");
  for (const Suite& s : kSuites) {
    std::fprintf(out, "  %-12.*s %.*s\n", static_cast<int>(s.name.size()), s.name.data(),
                 static_cast<int>(s.summary.size()), s.summary.data());
  }
  std::fprintf(out,
               "\nEach suite runs against any OpenAI-compatible server (--url) or starts `moetier serve -m MODEL`\n"
               "itself. capability is a Node.js script in tools/eval/ (set MOETIER_EVAL_DIR to move it, MOETIER_NODE\n"
               "to choose the node binary); scripts/setup.sh installs Node.js and Chromium, `npm ci` in the suite's\n"
               "folder its packages.\n");
}

// Where the suites' scripts are: $MOETIER_EVAL_DIR, else tools/eval in the folder of this
// binary or one of its parents (build/moetier, build/sub/moetier in a checkout), else an
// installed share/moetier/eval beside bin/.
fs::path find_eval_dir(const fs::path& exe) {
  std::error_code ec;
  if (const char* env = std::getenv("MOETIER_EVAL_DIR")) return fs::path(env);
  fs::path dir = exe.parent_path();
  for (int up = 0; up < 4 && !dir.empty(); ++up) {
    if (fs::is_directory(dir / "tools" / "eval", ec)) return dir / "tools" / "eval";
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  const fs::path installed = exe.parent_path().parent_path() / "share" / "moetier" / "eval";
  if (fs::is_directory(installed, ec)) return installed;
  return {};
}

// $MOETIER_NODE, else `node` (or Debian's old `nodejs`) on PATH.
fs::path find_node() {
  if (const char* env = std::getenv("MOETIER_NODE")) return env;
  for (const char* name : {"node", "nodejs"}) {
    if (fs::path p = platform::find_program(name); !p.empty()) return p;
  }
  return {};
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string_view name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  const Suite* suite = nullptr;
  for (const Suite& s : kSuites) {
    if (s.name == name) suite = &s;
  }
  if (suite == nullptr) {
    return report_error(Status::bad_input(std::string("unknown suite '") + argv[1] + "' (see 'moetier eval --help')"));
  }
  if (suite->native) return suite->native(argc - 1, argv + 1);
  const Result<fs::path> found_exe = platform::executable_path();
  if (!found_exe) return report_error(found_exe.status());
  const fs::path& exe = *found_exe;
  std::error_code ec;
  const fs::path eval_dir = find_eval_dir(exe);
  const fs::path dir = eval_dir / suite->folder;
  const fs::path script = dir / "run.mjs";
  if (eval_dir.empty() || !fs::exists(script, ec)) {
    return report_error(Status::runtime(
        "the evaluation scripts (tools/eval/" + std::string(suite->folder) +
        "/run.mjs) were not found beside this binary; set MOETIER_EVAL_DIR to the repository's tools/eval folder"));
  }
  const fs::path node = find_node();
  if (node.empty()) {
    return report_error(Status::runtime(
        "Node.js (18 or newer) is not installed: scripts/setup.sh installs it with Chromium (Debian: apt-get "
        "install nodejs npm chromium), then run `npm ci` in " + path_utf8(dir)));
  }
  if (!fs::exists(dir / "node_modules" / "puppeteer-core" / "package.json", ec)) {
    return report_error(Status::runtime("the npm package puppeteer-core is not installed for this suite: run `cd " +
                                        path_utf8(dir) + " && npm ci` (scripts/setup.sh installs Node.js, npm and Chromium)"));
  }
  std::vector<std::string> args = {path_utf8(node), path_utf8(script), "--moetier", path_utf8(exe), "--engine-version",
                                   std::string("moetier ") + MOETIER_VERSION};
  for (int i = 2; i < argc; ++i) args.emplace_back(argv[i]);
  // Node takes this process's place (its exit status is the command's); back here only when
  // it cannot be run.
  return report_error(platform::replace_process(args));
}

}  // namespace moetier
