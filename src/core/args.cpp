#include "core/args.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace moetier {

Result<int64_t> parse_int(std::string_view s, std::string_view what) {
  std::string str(s);
  if (str.empty()) return Status::bad_input(fmt::format("{}: empty value, expected an integer", what));
  size_t i = (str[0] == '-' || str[0] == '+') ? 1 : 0;
  if (i == str.size()) return Status::bad_input(fmt::format("{}: '{}' is not an integer", what, str));
  for (size_t j = i; j < str.size(); ++j) {
    if (str[j] < '0' || str[j] > '9') return Status::bad_input(fmt::format("{}: '{}' is not an integer", what, str));
  }
  errno = 0;
  const long long v = std::strtoll(str.c_str(), nullptr, 10);
  if (errno == ERANGE) return Status::bad_input(fmt::format("{}: '{}' is out of range", what, str));
  return static_cast<int64_t>(v);
}

Result<double> parse_double(std::string_view s, std::string_view what) {
  std::string str(s);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(str.c_str(), &end);
  if (str.empty() || end != str.c_str() + str.size() || errno == ERANGE) {
    return Status::bad_input(fmt::format("{}: '{}' is not a number", what, str));
  }
  return v;
}

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {
  flag({"-h", "--help"}, &help_requested_, "show this help and exit");
}

void ArgParser::flag(std::vector<std::string> names, bool* out, std::string help) {
  opts_.push_back(Opt{.names = std::move(names), .help = std::move(help), .flag_out = out});
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help, Handler handler) {
  opts_.push_back(Opt{.names = std::move(names), .metavar = std::move(metavar), .help = std::move(help),
                      .handler = std::move(handler)});
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help, std::string* out) {
  option(std::move(names), std::move(metavar), std::move(help), [out](std::string_view v) {
    *out = std::string(v);
    return Status::ok();
  });
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help, int64_t* out) {
  std::string what = "flag '" + names.front() + "'";
  option(std::move(names), std::move(metavar), std::move(help), [out, what](std::string_view v) {
    auto r = parse_int(v, what);
    if (!r) return r.status();
    *out = *r;
    return Status::ok();
  });
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help, int* out) {
  std::string what = "flag '" + names.front() + "'";
  option(std::move(names), std::move(metavar), std::move(help), [out, what](std::string_view v) {
    auto r = parse_int(v, what);
    if (!r) return r.status();
    if (*r < std::numeric_limits<int>::min() || *r > std::numeric_limits<int>::max()) {
      return Status::bad_input(fmt::format("{}: '{}' is out of range", what, v));
    }
    *out = static_cast<int>(*r);
    return Status::ok();
  });
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help, double* out) {
  std::string what = "flag '" + names.front() + "'";
  option(std::move(names), std::move(metavar), std::move(help), [out, what](std::string_view v) {
    auto r = parse_double(v, what);
    if (!r) return r.status();
    *out = *r;
    return Status::ok();
  });
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help, float* out) {
  std::string what = "flag '" + names.front() + "'";
  option(std::move(names), std::move(metavar), std::move(help), [out, what](std::string_view v) {
    auto r = parse_double(v, what);
    if (!r) return r.status();
    *out = static_cast<float>(*r);
    return Status::ok();
  });
}

void ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help,
                       std::vector<std::string>* out) {
  option(std::move(names), std::move(metavar), std::move(help), [out](std::string_view v) {
    out->emplace_back(v);
    return Status::ok();
  });
}

void ArgParser::positional(std::string name, std::string help, std::string* out, bool required) {
  positionals_.push_back(Pos{std::move(name), std::move(help), out, required});
}

void ArgParser::section(std::string title) { opts_.push_back(Opt{.section = std::move(title)}); }

void ArgParser::epilog(std::string text) { epilog_ = std::move(text); }

ArgParser::Opt* ArgParser::find(std::string_view name) {
  for (auto& o : opts_) {
    for (const auto& n : o.names) {
      if (n == name) return &o;
    }
  }
  // As llama.cpp: a long flag may be spelled with '_' for '-' (--ctx_size, --backend_sampling).
  if (name.substr(0, 2) == "--" && name.find('_') != std::string_view::npos) {
    std::string dashed(name);
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    return find(dashed);
  }
  return nullptr;
}

bool ArgParser::given(std::string_view name) const {
  for (const auto& o : opts_) {
    for (const auto& n : o.names) {
      if (n == name) return o.seen;
    }
  }
  return false;
}

Status ArgParser::parse(int argc, char** argv, int first) {
  const std::string see = fmt::format("(see 'moetier {} --help')", command_);
  size_t next_positional = 0;
  bool only_positionals = false;
  for (int i = first; i < argc; ++i) {
    std::string_view arg = argv[i];
    const bool looks_like_flag = !only_positionals && arg.size() > 1 && arg[0] == '-' &&
                                 !(arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.'));
    if (!only_positionals && arg == "--") {
      only_positionals = true;
      continue;
    }
    if (!looks_like_flag) {
      if (next_positional >= positionals_.size()) {
        return Status::bad_input(fmt::format("unexpected argument '{}' {}", arg, see));
      }
      auto& p = positionals_[next_positional++];
      *p.out = std::string(arg);
      p.seen = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (auto eq = arg.find('='); eq != std::string_view::npos && arg.rfind("--", 0) == 0) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    Opt* opt = find(name);
    if (!opt) return Status::bad_input(fmt::format("unknown flag '{}' {}", name, see));
    opt->seen = true;
    if (opt->flag_out) {
      if (inline_value) return Status::bad_input(fmt::format("flag '{}' takes no value {}", name, see));
      *opt->flag_out = true;
      if (opt->flag_out == &help_requested_) return Status::ok();
      continue;
    }
    std::string_view value;
    if (inline_value) {
      value = *inline_value;
    } else {
      if (i + 1 >= argc) return Status::bad_input(fmt::format("flag '{}' needs a value ({}) {}", name, opt->metavar, see));
      value = argv[++i];
    }
    if (auto st = opt->handler(value); !st) return st;
  }
  for (size_t k = next_positional; k < positionals_.size(); ++k) {
    if (positionals_[k].required) {
      return Status::bad_input(fmt::format("missing {} {}", positionals_[k].name, see));
    }
  }
  return Status::ok();
}

std::string ArgParser::help_text() const {
  std::string usage = fmt::format("usage: moetier {}", command_);
  for (const auto& p : positionals_) usage += p.required ? fmt::format(" {}", p.name) : fmt::format(" [{}]", p.name);
  usage += " [options]\n\n" + summary_ + "\n";
  for (const auto& p : positionals_) usage += fmt::format("\n  {:<28} {}", p.name, p.help);
  if (!positionals_.empty()) usage += "\n";
  usage += "\noptions:\n";
  for (const auto& o : opts_) {
    if (!o.section.empty()) {
      usage += fmt::format("\n{}:\n", o.section);
      continue;
    }
    std::string left;
    for (size_t k = 0; k < o.names.size(); ++k) left += (k ? ", " : "") + o.names[k];
    if (!o.metavar.empty()) left += " " + o.metavar;
    if (left.size() > 28) {
      usage += fmt::format("  {}\n  {:<28} {}\n", left, "", o.help);
    } else {
      usage += fmt::format("  {:<28} {}\n", left, o.help);
    }
  }
  if (!epilog_.empty()) usage += "\n" + epilog_ + "\n";
  return usage;
}

}  // namespace moetier
