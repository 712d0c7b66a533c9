// Command-line parsing with llama.cpp's spelling: single-dash multi-letter flags (-ngl,
// -ncmoe, -ctk), long flags (--no-mmap), "--flag=value" and "--flag value". No Debian
// library parses single-dash multi-letter names (CLI11 and cxxopts split "-ngl" into
// -n -g -l), so this small declarative parser is hand-written.
//
// Usage:
//   ArgParser p("inspect", "What is really in a GGUF file.");
//   p.positional("MODEL", &path, "GGUF file");
//   p.flag({"--json"}, &json, "print one JSON object");
//   p.option({"-c", "--ctx-size"}, "N", "context length", &ctx);
//   if (auto st = p.parse(argc, argv); !st) ...
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace moetier {

class ArgParser {
 public:
  using Handler = std::function<Status(std::string_view value)>;

  ArgParser(std::string command, std::string summary);

  // A boolean flag without a value.
  void flag(std::vector<std::string> names, bool* out, std::string help);
  // An option with a value, parsed by `handler` (which returns kBadInput on bad values).
  void option(std::vector<std::string> names, std::string metavar, std::string help, Handler handler);
  // Typed conveniences; integers accept only digits (with sign), doubles strtod syntax.
  void option(std::vector<std::string> names, std::string metavar, std::string help, std::string* out);
  void option(std::vector<std::string> names, std::string metavar, std::string help, int64_t* out);
  void option(std::vector<std::string> names, std::string metavar, std::string help, int* out);
  void option(std::vector<std::string> names, std::string metavar, std::string help, double* out);
  void option(std::vector<std::string> names, std::string metavar, std::string help, float* out);
  // A repeatable option: every occurrence is appended.
  void option(std::vector<std::string> names, std::string metavar, std::string help,
              std::vector<std::string>* out);
  void positional(std::string name, std::string help, std::string* out, bool required = true);
  // A section heading in --help between groups of options.
  void section(std::string title);
  // Free text printed after the options in --help (examples).
  void epilog(std::string text);

  // Parses argv[first..argc). `-h/--help` sets help_requested() and stops. Errors name the
  // flag: "unknown flag '--foo' (see 'moetier inspect --help')",
  // "flag '-c' needs a value", "flag '-c': 'abc' is not an integer".
  Status parse(int argc, char** argv, int first = 1);
  bool help_requested() const { return help_requested_; }
  // Was this option (any of its names) given on the command line?
  bool given(std::string_view name) const;
  std::string help_text() const;

 private:
  struct Opt {
    std::vector<std::string> names;
    std::string metavar;  // empty for flags
    std::string help;
    Handler handler;
    bool* flag_out = nullptr;
    bool seen = false;
    std::string section;  // non-empty: a section heading entry, not an option
  };
  struct Pos {
    std::string name, help;
    std::string* out;
    bool required;
    bool seen = false;
  };
  Opt* find(std::string_view name);
  std::string command_, summary_, epilog_;
  std::vector<Opt> opts_;
  std::vector<Pos> positionals_;
  bool help_requested_ = false;
};

// Strict number parsing for flag values and metadata-like strings.
Result<int64_t> parse_int(std::string_view s, std::string_view what);
Result<double> parse_double(std::string_view s, std::string_view what);

}  // namespace moetier
