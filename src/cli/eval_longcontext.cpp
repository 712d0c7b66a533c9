// moetier eval longcontext: the longcontext-v1 retrieval suite against moetier (started as
// a `moetier serve` child) or any OpenAI-compatible server (--url).
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/eval_commands.h"
#include "console/progress.h"
#include "core/args.h"
#include "core/utf8_path.h"
#include "engine/session.h"
#include "eval/longcontext_items.h"
#include "eval/longcontext_run.h"
#include "eval/openai_client.h"
#include "eval/server_child.h"
#include "gguf/sha256_cache.h"
#include "platform/process.h"

namespace moetier {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<std::vector<int64_t>> parse_int_list(const std::string& text, const char* what) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    try {
      size_t used = 0;
      const int64_t v = std::stoll(part, &used);
      if (used != part.size()) throw std::invalid_argument(part);
      out.push_back(v);
    } catch (const std::exception&) {
      return Status::bad_input(fmt::format("{}: '{}' is not a whole number (give a comma list, e.g. 4096,16384)", what, part));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

struct Options {
  std::string model, url, vocab, out = "longcontext-v1-results", lengths, depths, langs, model_name = "moetier-eval";
  int64_t seed = eval::kLongContextDefaultSeed;
  int64_t max_tokens = 512;
  double temperature = 0;
  double timeout_s = 3600;
  int64_t ctx = 0;
  bool fresh = false, list_only = false, no_sha256 = false;
  std::vector<std::string> server_args;  // after --
};

}  // namespace

int cmd_eval_longcontext(int argc, char** argv) {
  Options o;
  // Everything after "--" goes to `moetier serve`.
  int n_own = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      n_own = i;
      for (int j = i + 1; j < argc; ++j) o.server_args.emplace_back(argv[j]);
      break;
    }
  }
  ArgParser p("eval longcontext",
              "longcontext-v1: single-needle retrieval at long context (26 items by default: lengths 4096 to 65536 "
              "tokens, needle depths 10 to 90%, half English, half Chinese), against moetier or any "
              "OpenAI-compatible server.");
  p.section("what to evaluate (one of)");
  p.option({"-m", "--model"}, "FILE", "GGUF model: starts `moetier serve -m FILE` on a free local port (server flags after --)", &o.model);
  p.option({"--url"}, "URL", "a running OpenAI-compatible server, e.g. http://127.0.0.1:8080 (llama-server, moetier serve, ...)", &o.url);
  p.section("items");
  p.option({"--lengths"}, "LIST", "prompt lengths in tokens, comma list (default grid: 4096,8192,16384,32768,65536)", &o.lengths);
  p.option({"--depths"}, "LIST", "needle depths in % of the text, comma list (default grid: 10,25,50,75,90)", &o.depths);
  p.option({"--lang"}, "LIST", "en, zh or en,zh (default both)", &o.langs);
  p.option({"--seed"}, "N", fmt::format("item generator seed (default {}: longcontext-v1)", eval::kLongContextDefaultSeed), &o.seed);
  p.option({"--vocab"}, "FILE", "GGUF whose tokenizer measures the lengths (default: the -m model; with --url and no --vocab, the server's /tokenize)", &o.vocab);
  p.section("run and output");
  p.option({"--out"}, "DIR", "output directory (default longcontext-v1-results); a run there is resumed", &o.out);
  p.flag({"--fresh"}, &o.fresh, "discard the results already in --out and start over");
  p.flag({"--list"}, &o.list_only, "generate the items (DIR/items.jsonl), print a summary, and stop");
  p.option({"--max-tokens"}, "N", "answer budget per item (default 512)", &o.max_tokens);
  p.option({"--temperature"}, "T", "sampling temperature sent with each request (default 0: greedy)", &o.temperature);
  p.option({"--timeout"}, "SECONDS", "per request (default 3600)", &o.timeout_s);
  p.option({"--model-name"}, "NAME", "the request's \"model\" field (default moetier-eval; one-model servers accept any)", &o.model_name);
  p.option({"-c", "--ctx-size"}, "N", "context of the started server (default: the longest prompt + --max-tokens + 256)", &o.ctx);
  p.flag({"--no-sha256"}, &o.no_sha256, "do not hash the model file for the provenance record");
  p.epilog(
      "Scoring: an answer is correct when it contains the needle (and no other code of its shape). Failures are\n"
      "classified as wrong, empty (nothing, or a refusal), truncated (the budget ran out) or drift (enumeration\n"
      "drift: the answer copies long runs of the text, or lists short items until the budget runs out).\n"
      "Output in DIR: items.jsonl (the prompts), results.jsonl (one record per item: answer, class, timings,\n"
      "the server's peak memory), table.md and table.json (length x depth), heatmap.svg, provenance.json.\n"
      "Examples:\n"
      "  moetier eval longcontext -m model.gguf --lengths 4096,16384 -- -t 8 --no-mmap\n"
      "  moetier eval longcontext --url http://127.0.0.1:8080 --vocab model.gguf --out llama-server-run");
  if (auto st = p.parse(n_own, argv); !st) return report_error(st);
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (o.model.empty() == o.url.empty() && !o.list_only) {
    return report_error(Status::bad_input("give -m MODEL (moetier starts a server) or --url URL (a running server)"));
  }
  if (!o.url.empty() && !o.server_args.empty()) {
    return report_error(Status::bad_input("server flags after -- only apply with -m (the server moetier starts)"));
  }
  if (o.max_tokens < 1) return report_error(Status::bad_input("--max-tokens must be at least 1"));
  if (o.seed < 0) return report_error(Status::bad_input("--seed must not be negative"));
  eval::LongContextSpec spec{.seed = static_cast<uint64_t>(o.seed)};
  if (!o.lengths.empty()) {
    auto v = parse_int_list(o.lengths, "--lengths");
    if (!v) return report_error(v.status());
    spec.lengths = *v;
  }
  if (!o.depths.empty()) {
    auto v = parse_int_list(o.depths, "--depths");
    if (!v) return report_error(v.status());
    spec.depths = *v;
  }
  if (!o.langs.empty()) {
    for (size_t start = 0; start <= o.langs.size();) {
      const size_t comma = o.langs.find(',', start);
      const std::string l = o.langs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (l != "en" && l != "zh") return report_error(Status::bad_input(fmt::format("--lang: '{}' (en or zh)", l)));
      spec.langs.push_back(l);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  auto cells = eval::longcontext_cells(spec);
  if (!cells) return report_error(cells.status());

  // The tokenizer that measures the lengths.
  std::optional<eval::ServerUrl> server_url;
  if (!o.url.empty()) {
    auto u = eval::parse_server_url(o.url);
    if (!u) return report_error(u.status());
    server_url = *u;
  }
  const std::string vocab_path = !o.vocab.empty() ? o.vocab : o.model;
  std::unique_ptr<Session> vocab_session;
  eval::TokenCounter count;
  std::string tokenizer_source;
  if (!vocab_path.empty()) {
    EngineOptions vf;
    vf.model_path = vocab_path;
    auto s = open_session(vf, {.need_model = false});
    if (!s) return report_error(s.status());
    vocab_session = std::make_unique<Session>(std::move(*s));
    const text::Tokenizer* tok = &*vocab_session->tokenizer;
    count = [tok](std::string_view text) { return static_cast<int64_t>(tok->encode(text, {.parse_special = false}).size()); };
    tokenizer_source = vocab_path;
  } else if (server_url) {
    auto c = eval::server_token_counter(*server_url);
    if (!c) return report_error(c.status());
    count = std::move(c).value();
    tokenizer_source = o.url + "/tokenize";
  } else {
    return report_error(Status::bad_input("--list needs -m MODEL or --vocab FILE to measure lengths"));
  }

  std::error_code ec;
  fs::create_directories(utf8_path(o.out), ec);
  if (ec) return report_error(Status::bad_input(fmt::format("cannot create --out {}: {}", o.out, ec.message())));
  const fs::path out = utf8_path(o.out);

  // Items (deterministic: the same seed and tokenizer give the same bytes).
  std::vector<eval::LongContextItem> items;
  {
    const size_t n_items = cells->size() * (spec.langs.empty() ? 2 : spec.langs.size());
    ProgressBar bar({.label = "generating items", .total = n_items, .bytes = false});
    auto r = eval::make_longcontext_items(spec, count, [&](size_t done, size_t total) {
      bar.update(done);
      (void)total;
    });
    if (!r) return report_error(r.status());
    items = std::move(*r);
    bar.finish();
  }
  auto item_set = eval::write_item_set(out, items);
  if (!item_set) return report_error(item_set.status());
  std::fprintf(stderr, "moetier: %zu items (%zu cells), %lld prompt tokens in all, longest %lld; item set %s\n", items.size(),
               cells->size(), static_cast<long long>(item_set->total_tokens), static_cast<long long>(item_set->longest_tokens),
               item_set->sha256.substr(0, 16).c_str());
  if (o.list_only) {
    for (const auto& it : items) {
      std::printf("%-16s %6lld tokens (target %lld)  needle %s at %.1f%%\n", it.id.c_str(), static_cast<long long>(it.prompt_tokens),
                  static_cast<long long>(it.target_tokens), it.needle.c_str(), 100 * it.needle_depth);
    }
    return 0;
  }

  // Earlier results in DIR (resume), checked against these items before a server starts.
  auto done = eval::resume_results(out / "results.jsonl", items, o.fresh);
  if (!done) return report_error(done.status());
  if (!done->empty()) {
    std::fprintf(stderr, "moetier: resuming: %zu of %zu items already done in %s\n", done->size(), items.size(), o.out.c_str());
  }

  // The server.
  std::optional<eval::ServerChild> child;
  json started;
  if (!o.model.empty()) {
    std::vector<std::string> args = {"-m", o.model};
    bool has_ctx = false;
    for (const std::string& a : o.server_args) has_ctx = has_ctx || a == "-c" || a == "--ctx-size" || a.rfind("--ctx-size=", 0) == 0;
    const int64_t ctx = o.ctx > 0 ? o.ctx : item_set->longest_tokens + o.max_tokens + 256;
    if (!has_ctx) args.insert(args.end(), {"-c", std::to_string(ctx)});
    args.insert(args.end(), o.server_args.begin(), o.server_args.end());
    const Result<fs::path> self = platform::executable_path();
    if (!self) return report_error(self.status());
    std::fprintf(stderr, "moetier: starting the server: moetier serve");
    for (const auto& a : args) std::fprintf(stderr, " %s", a.c_str());
    std::fprintf(stderr, " (log: %s)\n", path_utf8(out / "server.log").c_str());
    auto c = eval::ServerChild::start(
        {.executable = path_utf8(*self), .args = args, .log_path = path_utf8(out / "server.log")});
    if (!c) return report_error(c.status());
    child.emplace(std::move(*c));
    auto u = eval::parse_server_url(child->url());
    server_url = *u;
    started = json{{"command", "moetier serve"}, {"args", args}, {"idle_rss_bytes", child->rss_bytes()}};
  }
  const json server_info = eval::describe_server(*server_url, std::move(started));

  // Provenance, written before the run so an interrupted run still has it.
  const json prov = eval::longcontext_provenance({.seed = o.seed,
                                                  .n_cells = cells->size(),
                                                  .n_items = items.size(),
                                                  .item_set_sha256 = item_set->sha256,
                                                  .tokenizer = tokenizer_source,
                                                  .max_tokens = o.max_tokens,
                                                  .temperature = o.temperature,
                                                  .server = server_info,
                                                  .model_path = o.model,
                                                  .hash_model = !o.no_sha256,
                                                  .cache_dir = default_cache_dir()});
  if (auto st = eval::write_text(out / "provenance.json", prov.dump(2) + "\n"); !st) return report_error(st);

  // The run.
  std::optional<ProgressBar> bar;  // made at the first progress call, which brings the total
  auto outcome = eval::run_longcontext(
      {.out_dir = out,
       .items = std::move(items),
       .done = std::move(done).value(),
       .server = *server_url,
       .child = child ? &*child : nullptr,
       .title = o.model.empty() ? o.url : path_utf8(utf8_path(o.model).filename()),
       .model_name = o.model_name,
       .max_tokens = o.max_tokens,
       .temperature = o.temperature,
       .timeout_s = o.timeout_s,
       .on_progress = [&bar](uint64_t done_tokens, uint64_t total) {
         if (!bar) bar.emplace(ProgressOptions{.label = "longcontext-v1 (prompt+answer tokens)", .total = total, .bytes = false});
         bar->update(done_tokens);
       },
       .on_error = [](const std::string& id, const std::string& error) {
         std::fprintf(stderr, "\nmoetier: %s: %s\n", id.c_str(), error.c_str());
       }});
  if (bar) bar->finish();
  if (!outcome) return report_error(outcome.status());
  std::fputs(outcome->table_markdown.c_str(), stdout);
  std::fprintf(stderr, "moetier: wrote %s/{results.jsonl,table.md,table.json,heatmap.svg,provenance.json}\n", o.out.c_str());
  return outcome->failures ? 1 : 0;
}

}  // namespace moetier
