// A longcontext-v1 run against a server, after its items exist: the items file, resuming
// the results already in the output folder (checked against these items), the server's
// description, the provenance record, one chat request per item (each result appended to
// results.jsonl as it arrives) and the reports over the whole item set. The command
// (`moetier eval longcontext`) parses flags, measures lengths, starts the server and draws
// the progress.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "eval/longcontext_items.h"
#include "eval/openai_client.h"
#include "eval/server_child.h"

namespace moetier::eval {

// Lengths measured by a server's /tokenize (llama-server's and moetier's); kBadInput when
// the server has none that answers.
Result<TokenCounter> server_token_counter(const ServerUrl& server);

// items.jsonl: one JSON line per item (its prompt and the prompt's SHA-256).
struct ItemSetFacts {
  std::string sha256;         // over every prompt, each followed by a NUL byte
  int64_t longest_tokens = 0;
  int64_t total_tokens = 0;
};
Result<ItemSetFacts> write_item_set(const std::filesystem::path& out_dir, const std::vector<LongContextItem>& items);

// The results already in `results_path` (by item id) for these items; with `fresh` the file
// is removed instead. kBadInput when a line is not JSON or an id's prompt differs (another
// seed or tokenizer made that file).
Result<std::map<std::string, nlohmann::json>> resume_results(const std::filesystem::path& results_path,
                                                             const std::vector<LongContextItem>& items, bool fresh);

// What a server says about itself (/props, /v1/models) merged into `started` (how moetier
// started it; empty for --url), with its address.
nlohmann::json describe_server(const ServerUrl& server, nlohmann::json started);

// provenance.json: the suite, date, engine build, the item set and how it was measured, the
// request settings, the server, and the model file (size; SHA-256 unless `hash_model` is
// false, from the cache bench shares when the file is unchanged).
struct ProvenanceParams {
  int64_t seed = 0;
  size_t n_cells = 0, n_items = 0;
  std::string item_set_sha256;
  std::string tokenizer;     // the GGUF or the server's /tokenize that measured the lengths
  int64_t max_tokens = 0;
  double temperature = 0;
  nlohmann::json server;     // describe_server
  std::string model_path;    // empty with --url
  bool hash_model = true;
  std::string cache_dir;     // the SHA-256 cache
};
nlohmann::json longcontext_provenance(const ProvenanceParams& params);

struct LongContextRunParams {
  std::filesystem::path out_dir;
  std::vector<LongContextItem> items;
  std::map<std::string, nlohmann::json> done;  // resume_results
  ServerUrl server;
  const ServerChild* child = nullptr;  // the server moetier started (its memory per item); null for --url
  std::string title;                   // the report's heading: the model file or the URL
  // The request.
  std::string model_name = "moetier-eval";
  int64_t max_tokens = 512;
  double temperature = 0;
  double timeout_s = 3600;
  // Progress: prompt + answer tokens done of the total still to do; first called with 0
  // before the first request.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  std::function<void(const std::string& id, const std::string& error)> on_error;  // a failed request
};

struct LongContextOutcome {
  int failures = 0;          // requests that failed (recorded, left out of the table)
  std::string table_markdown;
};

// The requests for items not yet done, then table.md, table.json and heatmap.svg over every
// item of the set (resumed ones included).
Result<LongContextOutcome> run_longcontext(LongContextRunParams params);

// Writes `text` to `path`; kRuntime if it cannot.
Status write_text(const std::filesystem::path& path, const std::string& text);

}  // namespace moetier::eval
