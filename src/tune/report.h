// `moetier tune`'s output: markdown for people (the default) and one JSON object with every
// candidate's measurements (-o json). Pure formatting of a SearchResult.
#pragma once

#include <string>
#include <vector>

#include "bench/report.h"
#include "tune/search.h"

namespace moetier::tune {

struct TuneReport {
  bench::Environment env;           // provenance (version, commit, date, model file, CPU)
  std::string model_path;
  std::string model_type;           // "qwen35moe 7.8B.A0.9B Q4_K - Medium" ("" when not loaded)
  Purpose purpose = Purpose::kServe;
  int64_t n_ctx = 4096;             // -c, for serve's command line and the plan
  int64_t n_layer_all = 0;
  double time_budget_s = 0;
  std::string placement_note;       // what the plan chose (or why the GPU knobs collapse)
  std::string fit_flags;            // --fit's choice as flags ("" without a GPU)
  SearchParams search;              // sizes and repetitions (the callbacks are not used)
  SearchResult result;
};

// The winner as a command a user can paste: "moetier serve -m MODEL -c 4096 -t 2 -ngl 0".
std::string winner_command(const TuneReport& r);
// "confirmed" / "overruled" sentence on --fit's placement ("" without a GPU).
std::string fit_verdict(const TuneReport& r);

std::string render_markdown(const TuneReport& r);
std::string render_json(const TuneReport& r);

}  // namespace moetier::tune
