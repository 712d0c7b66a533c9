// `moetier bench --chart`: t/s (mean with sd error bars) and peak - idle memory against the
// swept knob, as an SVG written by hand (a few primitives: no library needed), optionally
// converted to PNG by rsvg-convert. The data step and the drawing step are separate pure
// functions, so tests check the series without running a benchmark.
#pragma once

#include <string>
#include <vector>

#include "bench/report.h"
#include "core/status.h"

namespace moetier::bench {

struct ChartPoint {
  double x = 0;    // the knob's value, or the category's index on a categorical axis
  double y = 0;
  double err = 0;  // half-height of the error bar (the sample sd; 0 = none)
};

struct ChartSeries {
  std::string name;  // "tg128", "pp512, type_k=q8_0", "tg128 VRAM"
  std::vector<ChartPoint> points;  // by increasing x
};

struct ChartPanel {
  std::string y_label;
  std::vector<ChartSeries> series;
};

struct ChartData {
  std::string title;
  std::string x_label;                   // the swept knob, e.g. "n_depth"
  std::vector<std::string> categories;   // categorical x axis: label of x = 0, 1, ...; empty: numeric
  std::vector<ChartPanel> panels;        // [0] t/s, [1] peak - idle memory (MiB)
};

// x = the first swept numeric knob (the first swept knob, as categories, when none is
// numeric; one category when nothing is swept); one series per test kind and combination of
// the other swept knobs.
ChartData chart_from_results(const std::vector<TestResult>& results, const Environment& env);

// A standalone SVG document: one panel below the other, legend on the right. Every series
// is a <g class="series" data-name="..."> holding one <circle class="point"> per point.
std::string render_svg(const ChartData& chart);

// Fails (bad input) for a .png path when rsvg-convert is not on PATH; "" and .svg pass.
Status check_chart_output(const std::string& path);

// Writes the chart as SVG, or as PNG through rsvg-convert when the path ends in .png.
Status write_chart(const ChartData& chart, const std::string& path);

// Writes `text` to `path` (replacing it); errors name the path.
Status write_text_file(const std::string& path, const std::string& text);

// "&amp;"-style escaping for XML/HTML text and attribute values.
std::string xml_escape(std::string_view text);

}  // namespace moetier::bench
