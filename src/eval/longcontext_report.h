// longcontext-v1 reports: the length × depth table (Markdown and JSON) and its heat map
// (SVG), from the per-item result records (results.jsonl).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moetier::eval {

struct CellScore {
  int64_t length = 0;
  int64_t depth = 0;
  int64_t correct = 0;
  int64_t total = 0;
  std::map<std::string, int64_t> verdicts;  // verdict name → count
};

// One score per (length, depth) present in `results` (records with "length", "depth",
// "verdict"), ordered by length then depth.
std::vector<CellScore> score_cells(const std::vector<nlohmann::json>& results);

// Rows = lengths, columns = depths, cells "correct/n" ("—" where there is no item), then the
// totals per verdict class and a note on the resolution (samples per cell).
std::string table_markdown(const std::vector<CellScore>& cells);
nlohmann::json table_json(const std::vector<CellScore>& cells);

// A heat map: one square per cell coloured from red (0 correct) to green (all correct) with
// "k/n" written in it; lengths down, depths across. Self-contained SVG (no scripts or fonts
// beyond the generic sans-serif family).
std::string heatmap_svg(const std::vector<CellScore>& cells, const std::string& title);

}  // namespace moetier::eval
