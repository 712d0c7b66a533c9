#include "eval/longcontext_report.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace moetier::eval {

namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const CellScore* find_cell(const std::vector<CellScore>& cells, int64_t length, int64_t depth) {
  for (const CellScore& c : cells) {
    if (c.length == length && c.depth == depth) return &c;
  }
  return nullptr;
}

std::vector<int64_t> axis(const std::vector<CellScore>& cells, bool lengths) {
  std::set<int64_t> s;
  for (const CellScore& c : cells) s.insert(lengths ? c.length : c.depth);
  return {s.begin(), s.end()};
}

}  // namespace

std::vector<CellScore> score_cells(const std::vector<nlohmann::json>& results) {
  std::vector<CellScore> cells;
  for (const nlohmann::json& r : results) {
    const int64_t length = r.value("length", int64_t{0}), depth = r.value("depth", int64_t{0});
    auto it = std::find_if(cells.begin(), cells.end(), [&](const CellScore& c) { return c.length == length && c.depth == depth; });
    if (it == cells.end()) {
      cells.push_back({.length = length, .depth = depth});
      it = cells.end() - 1;
    }
    const std::string verdict = r.value("verdict", std::string("wrong"));
    ++it->total;
    if (verdict == "correct") ++it->correct;
    ++it->verdicts[verdict];
  }
  std::sort(cells.begin(), cells.end(),
            [](const CellScore& a, const CellScore& b) { return a.length != b.length ? a.length < b.length : a.depth < b.depth; });
  return cells;
}

std::string table_markdown(const std::vector<CellScore>& cells) {
  const std::vector<int64_t> lengths = axis(cells, true), depths = axis(cells, false);
  std::string md = "| length \\ depth |";
  for (int64_t d : depths) md += fmt::format(" {}% |", d);
  md += " all |\n|---:|";
  for (size_t i = 0; i < depths.size(); ++i) md += "---:|";
  md += "---:|\n";
  std::map<std::string, int64_t> totals;
  int64_t correct = 0, total = 0, min_n = -1, max_n = 0;
  for (int64_t l : lengths) {
    md += fmt::format("| {} |", l);
    int64_t row_correct = 0, row_total = 0;
    for (int64_t d : depths) {
      const CellScore* c = find_cell(cells, l, d);
      if (!c) {
        md += " — |";
        continue;
      }
      md += fmt::format(" {}/{} |", c->correct, c->total);
      row_correct += c->correct;
      row_total += c->total;
      min_n = min_n < 0 ? c->total : std::min(min_n, c->total);
      max_n = std::max(max_n, c->total);
      for (const auto& [k, v] : c->verdicts) totals[k] += v;
    }
    md += fmt::format(" {}/{} |\n", row_correct, row_total);
    correct += row_correct;
    total += row_total;
  }
  md += fmt::format("\nCorrect: {}/{} ({:.0f}%).", correct, total, total ? 100.0 * static_cast<double>(correct) / static_cast<double>(total) : 0.0);
  md += " By class:";
  for (const char* k : {"correct", "wrong", "empty", "truncated", "drift"}) md += fmt::format(" {} {},", k, totals[k]);
  md.pop_back();
  md += ".\n";
  if (max_n > 0) {
    md += fmt::format("Samples per cell: {}{}; with n samples a cell's score moves in steps of 1/n, so few samples "
                      "per cell is low resolution.\n",
                      min_n == max_n ? fmt::format("{}", max_n) : fmt::format("{}–{}", min_n, max_n), "");
  }
  return md;
}

nlohmann::json table_json(const std::vector<CellScore>& cells) {
  nlohmann::json out = nlohmann::json::array();
  for (const CellScore& c : cells) {
    out.push_back({{"length", c.length},
                   {"depth", c.depth},
                   {"correct", c.correct},
                   {"n", c.total},
                   {"accuracy", c.total ? static_cast<double>(c.correct) / static_cast<double>(c.total) : 0.0},
                   {"verdicts", c.verdicts}});
  }
  return out;
}

std::string heatmap_svg(const std::vector<CellScore>& cells, const std::string& title) {
  const std::vector<int64_t> lengths = axis(cells, true), depths = axis(cells, false);
  constexpr int kCell = 64, kLeft = 90, kTop = 56;
  const int width = kLeft + kCell * static_cast<int>(depths.size()) + 24;
  const int height = kTop + kCell * static_cast<int>(lengths.size()) + 48;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      width, height, kLeft, xml_escape(title));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">needle depth (% of the text)</text>\n",
                     kLeft + kCell * static_cast<int>(depths.size()) / 2, height - 12);
  for (size_t j = 0; j < depths.size(); ++j) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}%</text>\n", kLeft + kCell * static_cast<int>(j) + kCell / 2,
                       kTop - 8, depths[j]);
  }
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int y = kTop + kCell * static_cast<int>(i);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} tok</text>\n", kLeft - 8, y + kCell / 2 + 5, lengths[i]);
    for (size_t j = 0; j < depths.size(); ++j) {
      const int x = kLeft + kCell * static_cast<int>(j);
      const CellScore* c = find_cell(cells, lengths[i], depths[j]);
      if (!c) {
        svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#eeeeee\" stroke=\"white\"/>\n", x, y, kCell, kCell);
        continue;
      }
      // Red (0) → yellow (0.5) → green (1).
      const double a = c->total ? static_cast<double>(c->correct) / static_cast<double>(c->total) : 0.0;
      const int r = a < 0.5 ? 220 : static_cast<int>(220 - (a - 0.5) * 2 * 180);
      const int g = a < 0.5 ? static_cast<int>(60 + a * 2 * 150) : 210;
      svg += fmt::format(
          "<rect class=\"cell\" data-length=\"{}\" data-depth=\"{}\" data-correct=\"{}\" data-n=\"{}\" x=\"{}\" y=\"{}\" "
          "width=\"{}\" height=\"{}\" fill=\"rgb({},{},70)\" stroke=\"white\"/>\n"
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}/{}</text>\n",
          c->length, c->depth, c->correct, c->total, x, y, kCell, kCell, r, g, x + kCell / 2, y + kCell / 2 + 5,
          c->correct, c->total);
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace moetier::eval
