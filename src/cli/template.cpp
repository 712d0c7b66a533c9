// moetier template: renders a chat template with a JSON context, exactly as the server's
// template engine does, and nothing else (no message normalization, no tokens or date added):
// what scripts/template-parity.py compares with Python's Jinja2. Also prints a template's source.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/prompt_input.h"
#include "core/args.h"
#include "gguf/gguf.h"
#include "platform/file.h"
#include "text/builtin_chat_templates.h"
#include "text/template/chat_template.h"

namespace moetier {

namespace {

// The template's source from exactly one of the three places.
Result<std::string> template_source(const std::string& model, const std::string& name, const std::string& file) {
  if ((!model.empty()) + (!name.empty()) + (!file.empty()) != 1) {
    return Status::bad_input("give exactly one of -m MODEL, --chat-template NAME, --chat-template-file FILE");
  }
  if (!file.empty()) return read_text_file(file);
  if (!name.empty()) {
    if (const char* source = find_builtin_chat_template(name)) return std::string(source);
    return Status::bad_input(fmt::format("'{}' is not a built-in template ({})", name, builtin_chat_template_list()));
  }
  ASSIGN_OR_RETURN(gguf::GgufFile header, gguf::read_header(model));
  std::string source = header.get_string_or("tokenizer.chat_template", "");
  if (source.empty()) return Status::bad_input(fmt::format("'{}' has no tokenizer.chat_template", model));
  return source;
}

Status write_output(const std::string& text, const std::string& path) {
  // A file is written in binary mode: the exact bytes on every OS (no \r\n on Windows).
  std::FILE* out = path.empty() ? stdout : platform::open_stdio_file(path, "wb");
  if (!out) return Status::runtime(fmt::format("cannot open '{}' for writing", path));
  const bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  if (path.empty()) return std::fflush(out) == 0 && ok ? Status::ok() : Status::runtime("cannot write the output");
  if (std::fclose(out) != 0 || !ok) return Status::runtime(fmt::format("cannot write '{}'", path));
  return Status::ok();
}

}  // namespace

int cmd_template(int argc, char** argv) {
  std::string model, name, file, context_file, out_path;
  bool print_source = false, list_builtins = false;
  ArgParser p("template", "Render a chat template with a JSON context (or print its source).");
  p.option({"-m", "--model"}, "FILE", "the template of this GGUF file (tokenizer.chat_template; vocab-only files work)",
           &model);
  p.option({"--chat-template"}, "NAME", "a built-in template (" + builtin_chat_template_list() + ")", &name);
  p.option({"--chat-template-file"}, "FILE", "a Jinja template file", &file);
  p.option({"--context"}, "FILE",
           "a JSON object; each member becomes a template variable as given (messages, tools, "
           "add_generation_prompt, bos_token, ...). Default: {}",
           &context_file);
  p.option({"-o", "--output"}, "FILE", "write the result to FILE (exact bytes) instead of stdout", &out_path);
  p.flag({"--source"}, &print_source, "print the template's source instead of rendering it");
  p.flag({"--list-builtins"}, &list_builtins, "print the built-in templates' names, one per line");
  p.epilog("The template is rendered as Hugging Face's apply_chat_template renders it (trim_blocks, lstrip_blocks,\n"
           "raise_exception, strftime_now, tojson) and as moetier serve renders prompts, but with exactly the\n"
           "variables the context gives: no message normalization, no special tokens or date added.\n"
           "A template error (raise_exception included) exits with status 2 and its message on stderr.");
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (list_builtins) {
    for (const std::string& n : builtin_chat_template_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  auto source = template_source(model, name, file);
  if (!source) return report_error(source.status());
  if (print_source) {
    if (auto st = write_output(*source, out_path); !st) return report_error(st);
    return 0;
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  if (!context_file.empty()) {
    auto text = read_text_file(context_file);
    if (!text) return report_error(text.status());
    context = nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (context.is_discarded() || !context.is_object()) {
      return report_error(Status::bad_input(fmt::format("--context: '{}' is not a JSON object", context_file)));
    }
  }
  auto tmpl = text::ChatTemplate::parse(*source);
  if (!tmpl) return report_error(tmpl.status());
  auto rendered = tmpl->render(context);
  if (!rendered) return report_error(rendered.status());
  if (auto st = write_output(*rendered, out_path); !st) return report_error(st);
  return 0;
}

}  // namespace moetier
