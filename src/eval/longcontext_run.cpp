#include "eval/longcontext_run.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <httplib.h>

#include "core/build_info.h"
#include "core/format.h"
#include "core/utc_time.h"
#include "core/utf8_path.h"
#include "eval/longcontext_report.h"
#include "eval/longcontext_score.h"
#include "gguf/file_sha256.h"
#include "gguf/sha256_cache.h"
#include "platform/file.h"

namespace moetier::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string item_json_line(const LongContextItem& it) {
  return json{{"id", it.id},
              {"lang", it.lang},
              {"length", it.target_tokens},
              {"depth", it.depth_percent},
              {"needle", it.needle},
              {"prompt_tokens", it.prompt_tokens},
              {"needle_depth", it.needle_depth},
              {"prompt_sha256", sha256_hex(it.prompt)},
              {"prompt", it.prompt}}
      .dump();
}

// The record of one item: its identity, then the verdict or the error.
json item_result(const LongContextItem& it, const Result<ChatReply>& reply) {
  json r = {{"id", it.id},
            {"lang", it.lang},
            {"length", it.target_tokens},
            {"depth", it.depth_percent},
            {"prompt_tokens", it.prompt_tokens},
            {"needle_depth", it.needle_depth},
            {"needle", it.needle},
            {"prompt_sha256", sha256_hex(it.prompt)}};
  if (!reply) {
    // A failed request is recorded (and not resumed past): the server may have run out of
    // context or memory at this length, which the report should show.
    r["verdict"] = "error";
    r["reason"] = reply.status().message();
    return r;
  }
  const Classification c = classify_answer(reply->content, reply->finish_reason, it.needle, it.prompt);
  r["verdict"] = verdict_name(c.verdict);
  r["reason"] = c.reason;
  r["needle_present"] = c.needle_present;
  r["haystack_copy"] = c.haystack_copy;
  r["list_items"] = c.list_items;
  r["finish_reason"] = reply->finish_reason;
  r["response"] = reply->content;
  r["reasoning_chars"] = reply->reasoning_content.size();
  r["usage"] = {{"prompt_tokens", reply->prompt_tokens}, {"completion_tokens", reply->completion_tokens}};
  r["timings"] = reply->timings;
  r["wall_s"] = reply->wall_s;
  return r;
}

}  // namespace

Result<TokenCounter> server_token_counter(const ServerUrl& server) {
  TokenCounter count = [server](std::string_view text) -> int64_t {
    httplib::Client client(server.host, server.port);
    client.set_read_timeout(120, 0);
    auto res = client.Post(server.base + "/tokenize", json{{"content", std::string(text)}}.dump(), "application/json");
    if (!res || res->status != 200) return -1;
    try {
      return static_cast<int64_t>(json::parse(res->body).at("tokens").size());
    } catch (const std::exception&) {
      return -1;
    }
  };
  if (count("probe") < 0) {
    return Status::bad_input("the server has no usable /tokenize endpoint: give --vocab MODEL.gguf so moetier can measure lengths");
  }
  return count;
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) return Status::runtime(fmt::format("cannot write {}", path_utf8(path)));
  return Status::ok();
}

Result<ItemSetFacts> write_item_set(const fs::path& out_dir, const std::vector<LongContextItem>& items) {
  std::string items_text, all_prompts;
  ItemSetFacts facts;
  for (const auto& it : items) {
    items_text += item_json_line(it) + "\n";
    all_prompts += it.prompt;
    all_prompts += '\0';
    facts.longest_tokens = std::max(facts.longest_tokens, it.prompt_tokens);
    facts.total_tokens += it.prompt_tokens;
  }
  facts.sha256 = sha256_hex(all_prompts);
  RETURN_IF_ERROR(write_text(out_dir / "items.jsonl", items_text));
  return facts;
}

Result<std::map<std::string, json>> resume_results(const fs::path& results_path, const std::vector<LongContextItem>& items,
                                                   bool fresh) {
  std::map<std::string, json> done;
  if (fresh) {
    std::error_code ec;
    fs::remove(results_path, ec);
    return done;
  }
  std::ifstream f(results_path);
  if (!f) return done;  // nothing to resume
  std::map<std::string, std::string> want;
  for (const auto& it : items) want[it.id] = sha256_hex(it.prompt);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    json r;
    try {
      r = json::parse(line);
    } catch (const std::exception&) {
      return Status::bad_input(fmt::format("{} has a line that is not JSON; use --fresh to start over", path_utf8(results_path)));
    }
    const std::string id = r.value("id", std::string());
    const auto wanted = want.find(id);
    if (wanted == want.end()) continue;
    if (wanted->second != r.value("prompt_sha256", std::string())) {
      return Status::bad_input(fmt::format(
          "{} holds results for different items (item {} differs: another seed or tokenizer); use --fresh or another --out",
          path_utf8(results_path), id));
    }
    done[id] = r;
  }
  return done;
}

json describe_server(const ServerUrl& server, json started) {
  json info = json::object();
  if (!started.is_null() && !started.empty()) info["started"] = std::move(started);
  if (auto props = get_json(server, "/props")) {
    json p = json::object();
    for (const char* k : {"build_info", "model_path", "total_slots", "chat_template"}) {
      if (props->contains(k)) p[k] = (*props)[k];
    }
    if (props->contains("default_generation_settings") && (*props)["default_generation_settings"].contains("n_ctx")) {
      p["n_ctx"] = (*props)["default_generation_settings"]["n_ctx"];
    }
    info["props"] = p;
  }
  if (auto models = get_json(server, "/v1/models")) info["models"] = *models;
  info["url"] = fmt::format("http://{}:{}{}", server.host, server.port, server.base);
  return info;
}

json longcontext_provenance(const ProvenanceParams& params) {
  json prov = {{"suite", "longcontext-v1"},
               {"date", utc_now_iso8601()},
               {"engine", {{"moetier_version", MOETIER_VERSION}}},
               {"seed", params.seed},
               {"cells", params.n_cells},
               {"items", params.n_items},
               {"item_set_sha256", params.item_set_sha256},
               {"tokenizer", params.tokenizer},
               {"max_tokens", params.max_tokens},
               {"temperature", params.temperature},
               {"server", params.server}};
  if (const std::string commit = build_git_commit(); !commit.empty()) prov["engine"]["moetier_commit"] = commit;
  if (!params.model_path.empty()) {
    json m = {{"file", path_utf8(utf8_path(params.model_path).filename())}, {"path", params.model_path}};
    if (const auto info = platform::file_info(params.model_path)) m["size_bytes"] = static_cast<int64_t>(info->size);
    if (params.hash_model) {
      // Cached by path, size and mtime: a 20 GB file is hashed once.
      auto sha = cached_file_sha256(params.model_path, {.cache_dir = params.cache_dir, .log = stderr});
      if (sha) m["sha256"] = sha->sha256;
    }
    prov["model"] = m;
  }
  return prov;
}

Result<LongContextOutcome> run_longcontext(LongContextRunParams params) {
  const fs::path results_path = params.out_dir / "results.jsonl";
  std::ofstream results(results_path, std::ios::app);
  if (!results) return Status::runtime(fmt::format("cannot write {}", path_utf8(results_path)));
  uint64_t tokens_todo = 0;
  for (const auto& it : params.items) {
    if (!params.done.count(it.id)) tokens_todo += static_cast<uint64_t>(it.prompt_tokens + params.max_tokens);
  }
  uint64_t tokens_done = 0;
  if (params.on_progress) params.on_progress(0, tokens_todo);
  LongContextOutcome outcome;
  for (const auto& it : params.items) {
    if (params.done.count(it.id)) continue;
    const Result<ChatReply> reply = chat(params.server, {.user_message = it.prompt,
                                                         .model = params.model_name,
                                                         .max_tokens = params.max_tokens,
                                                         .temperature = params.temperature,
                                                         .timeout_s = params.timeout_s});
    json r = item_result(it, reply);
    if (!reply) {
      ++outcome.failures;
      if (params.on_error) params.on_error(it.id, reply.status().message());
    }
    if (params.child) {
      r["server_peak_rss_bytes"] = params.child->peak_rss_bytes();
      r["server_rss_bytes"] = params.child->rss_bytes();
    }
    results << r.dump() << "\n";
    results.flush();
    params.done[it.id] = std::move(r);
    tokens_done += static_cast<uint64_t>(it.prompt_tokens + params.max_tokens);
    if (params.on_progress) params.on_progress(tokens_done, tokens_todo);
  }

  // Reports over every item of this set (resumed ones included), errors left out of the
  // table but counted.
  std::vector<json> scored;
  for (const auto& it : params.items) {
    const auto d = params.done.find(it.id);
    if (d != params.done.end() && d->second.value("verdict", std::string()) != "error") scored.push_back(d->second);
  }
  const std::vector<CellScore> cell_scores = score_cells(scored);
  std::string md = fmt::format("# longcontext-v1 — {}\n\n", params.title);
  md += table_markdown(cell_scores);
  if (outcome.failures) {
    md += fmt::format("{} item(s) failed with a server error (see results.jsonl); they are not in the table.\n", outcome.failures);
  }
  if (params.child) {
    md += fmt::format("Server peak resident memory: {}.\n",
                      format_bytes(static_cast<uint64_t>(std::max<int64_t>(0, params.child->peak_rss_bytes()))));
  }
  RETURN_IF_ERROR(write_text(params.out_dir / "table.md", md));
  RETURN_IF_ERROR(write_text(params.out_dir / "table.json",
                             json{{"cells", table_json(cell_scores)}, {"errors", outcome.failures}}.dump(2) + "\n"));
  RETURN_IF_ERROR(write_text(params.out_dir / "heatmap.svg", heatmap_svg(cell_scores, "longcontext-v1: correct / items per cell")));
  outcome.table_markdown = std::move(md);
  return outcome;
}

}  // namespace moetier::eval
