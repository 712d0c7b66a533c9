// moetier chat: an interactive conversation using the model's chat template. Ctrl-C stops
// the current reply (not the program); Ctrl-D or /exit ends the chat.
#include <atomic>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_report.h"
#include "engine/session.h"
#include "platform/signals.h"
#include "platform/terminal.h"
#include "runtime/generate.h"
#include "text/builtin_chat_templates.h"
#include "text/chat_prompt.h"

namespace moetier {

int cmd_chat(int argc, char** argv) {
  EngineOptions flags;
  SamplerParams sampling = kQwenThinkingSampling;
  SpecOptions spec_flags;
  std::string system_prompt, reasoning = "auto", kwargs_text, template_file, template_name;
  int64_t n_predict = -1;
  ArgParser p("chat", "Chat interactively with a model, using its chat template.");
  p.option({"-sys", "--system-prompt"}, "TEXT", "system message", &system_prompt);
  p.option({"-n", "--n-predict"}, "N", "max tokens per reply (default -1: until end of turn)", &n_predict);
  p.option({"--reasoning"}, "on|off|auto", "thinking: sets enable_thinking in the template (default auto)",
           &reasoning);
  p.option({"--chat-template-kwargs"}, "JSON", "extra template variables, e.g. '{\"enable_thinking\":false}'",
           &kwargs_text);
  p.option({"--chat-template"}, "NAME|JINJA",
           "a built-in template by name (" + builtin_chat_template_list() + ") or, as llama-server, the template's Jinja source",
           &template_name);
  p.option({"--chat-template-file"}, "FILE", "use this Jinja template instead of the model's", &template_file);
  add_engine_flags(p, flags);
  add_sampling_flags(p, sampling);
  add_spec_flags(p, spec_flags);
  p.epilog("Sampling defaults follow Qwen's thinking-mode advice: --temp 0.6 --top-k 20 --top-p 0.95 --min-p 0.\n"
           "Type a message and press Enter. Ctrl-C stops a reply; Ctrl-D or /exit quits.");
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (flags.list_devices) return print_gpu_devices(flags.verbose);
  if (reasoning != "on" && reasoning != "off" && reasoning != "auto") {
    return report_error(Status::bad_input(fmt::format("--reasoning: '{}' is not one of on, off, auto", reasoning)));
  }
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (!kwargs_text.empty()) {
    kwargs = nlohmann::ordered_json::parse(kwargs_text, nullptr, false);
    if (kwargs.is_discarded() || !kwargs.is_object()) {
      return report_error(Status::bad_input("--chat-template-kwargs: not a JSON object"));
    }
  }
  if (auto st = validate(sampling); !st) return report_error(st);
  if (auto st = check_spec_options(spec_flags); !st) return report_error(st);
  std::vector<int32_t> conversation;  // every token fed so far, for the drafter's lookups
  StderrLoadReporter reporter;
  auto session = open_session(flags, spec_session_options(spec_flags, {.reporter = &reporter}));
  if (!session) return report_error(session.status());

  auto chat_prompt = ChatPrompt::load(session->file->header(), *session->tokenizer,
                                      {.file = template_file, .name_or_source = template_name});
  if (!chat_prompt) return report_error(chat_prompt.status());
  if (chat_prompt->is_fallback()) {
    std::fprintf(stderr, "moetier: the model has no chat template; using ChatML\n");
  }
  auto speculator = make_speculator(spec_flags, *session);
  if (!speculator) return report_error(speculator.status());
  if (auto st = prepare_speculation(speculator->get(), *session->sequence); !st) return report_error(st);
  auto sampler = Sampler::create(sampling);
  if (!sampler) return report_error(sampler.status());

  const text::Tokenizer& tok = *session->tokenizer;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", system_prompt}});
  std::string rendered_so_far;  // the prompt text already in the sequence
  const bool interactive = platform::is_terminal(platform::StandardStream::kStdin);

  // Ctrl+C stops the reply in progress, not the program (a prompt waiting for a line keeps
  // waiting); the scope ends with this function.
  std::atomic<bool> stop_reply{false};
  const platform::InterruptScope interrupt(&stop_reply);
  for (;;) {
    if (interactive) std::fputs("\n> ", stdout);
    std::fflush(stdout);
    std::string line;
    if (!platform::read_input_line(&line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    ChatRenderParams render{.messages = messages,
                            .kwargs = kwargs,
                            .normalization = {}};  // messages typed here are plain strings
    if (reasoning != "auto") render.enable_thinking = reasoning == "on";
    auto rendered = chat_prompt->render(render);
    if (!rendered) return report_error(rendered.status());
    // Feed only what is new since the last turn when the history renders as a prefix;
    // otherwise (e.g. the template rewrites earlier turns) start the sequence over.
    std::string delta;
    if (rendered->compare(0, rendered_so_far.size(), rendered_so_far) == 0) {
      delta = rendered->substr(rendered_so_far.size());
    } else {
      session->sequence->clear();
      sampler->reset();
      delta = *rendered;
    }
    const auto tokens = tok.encode(delta, {.parse_special = true, .add_special = rendered_so_far.empty()});
    if (session->sequence->n_past() + static_cast<int64_t>(tokens.size()) >= session->sequence->n_ctx()) {
      std::fprintf(stderr, "moetier: the conversation no longer fits the context (-c %lld); start a new chat\n",
                   static_cast<long long>(session->sequence->n_ctx()));
      break;
    }
    stop_reply.store(false);
    std::string reply;
    std::vector<int32_t> reply_tokens;
    auto stats = generate(*session->model, *session->sequence, tok, *sampler, tokens,
                          {.n_predict = n_predict,
                           .cancel = &stop_reply,
                           .speculator = speculator->get(),
                           .earlier_tokens = conversation},
                          *session->pool,
                          [&](std::string_view text) {
                            reply += text;
                            std::fwrite(text.data(), 1, text.size(), stdout);
                            std::fflush(stdout);
                          },
                          [&](int32_t t) { reply_tokens.push_back(t); });
    if (!stats) return report_error(stats.status());
    conversation.insert(conversation.end(), tokens.begin(), tokens.end());
    // The sequence keeps the reply without a final end-of-generation token.
    if (!reply_tokens.empty() && stats->stop == StopReason::kEog) reply_tokens.pop_back();
    conversation.insert(conversation.end(), reply_tokens.begin(), reply_tokens.end());
    const std::string spec_note =
        stats->spec.n_drafted > 0 ? fmt::format("; drafts {} of {} accepted", stats->spec.n_accepted, stats->spec.n_drafted)
                                  : "";
    std::fprintf(stderr, "\n[%lld tokens, %.2f t/s; prompt %lld tokens, %.2f t/s%s%s]\n",
                 static_cast<long long>(stats->n_generated), stats->generation_tokens_per_second(),
                 static_cast<long long>(stats->n_prompt), stats->prompt_tokens_per_second(), spec_note.c_str(),
                 stats->stop == StopReason::kCancelled ? ", stopped" : "");
    messages.push_back({{"role", "assistant"}, {"content", reply}});
    // The sequence now holds the prompt and the reply (without the end-of-turn token,
    // which the next render supplies); next turn feeds only what follows this text.
    rendered_so_far = *rendered + reply;
  }
  return 0;
}

}  // namespace moetier
