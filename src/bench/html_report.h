// `moetier bench --report DIR`: one self-contained HTML page (inline CSS and SVG, no
// scripts, no external resources; a Content-Security-Policy forbids loading any) with the
// provenance, the results and their statistics, the comparisons and the charts.
#pragma once

#include <string>
#include <vector>

#include "bench/chart.h"
#include "bench/report.h"

namespace moetier::bench {

struct HtmlReportInput {
  const Environment& env;
  const std::vector<TestResult>& results;
  const std::vector<Comparison>& comparisons;
  const ChartData& chart;
  std::string command_line;  // as the user typed it (shell-quoted where needed)
};

std::string render_html_report(const HtmlReportInput& input);

// argv joined with spaces, arguments with shell metacharacters in single quotes.
std::string command_line(int argc, char** argv);

}  // namespace moetier::bench
