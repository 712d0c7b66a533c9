#include "bench/chart.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "bench/configs.h"
#include "core/utf8_path.h"
#include "platform/process.h"

namespace moetier::bench {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

ChartData chart_from_results(const std::vector<TestResult>& results, const Environment& env) {
  ChartData chart;
  chart.title = "moetier bench";
  std::vector<TestSpec> specs;
  for (const TestResult& r : results) specs.push_back(r.spec);
  const std::vector<std::string> swept = swept_knobs(specs);
  // The x knob: the first swept numeric one, else the first swept one as categories.
  std::string x_knob;
  bool numeric = false;
  if (!results.empty()) {
    for (const Knob& k : test_knobs(specs[0])) {
      if (std::find(swept.begin(), swept.end(), k.name) != swept.end() && k.numeric) {
        x_knob = k.name;
        numeric = true;
        break;
      }
    }
  }
  if (x_knob.empty() && !swept.empty()) x_knob = swept[0];
  chart.x_label = x_knob.empty() ? "configuration" : x_knob;
  if (x_knob.empty()) chart.categories.push_back("all");

  ChartPanel speed{.y_label = "tokens per second (mean ± sd)", .series = {}};
  ChartPanel memory{.y_label = "peak - idle memory (MiB)", .series = {}};
  std::map<std::string, size_t> speed_index, memory_index;
  const auto series_in = [](ChartPanel& panel, std::map<std::string, size_t>& index, const std::string& name) -> ChartSeries& {
    auto [it, added] = index.try_emplace(name, panel.series.size());
    if (added) panel.series.push_back({.name = name, .points = {}});
    return panel.series[it->second];
  };
  for (const TestResult& r : results) {
    double x = 0;
    std::string name = test_kind(r.spec);
    for (const Knob& k : test_knobs(r.spec)) {
      // A model is shown by its file name (the records and the header have the path).
      const std::string text = k.name == "model" ? path_utf8(utf8_path(k.text).filename()) : k.text;
      if (k.name == x_knob) {
        if (numeric) {
          x = *k.numeric;
        } else {
          auto it = std::find(chart.categories.begin(), chart.categories.end(), text);
          x = static_cast<double>(it - chart.categories.begin());
          if (it == chart.categories.end()) chart.categories.push_back(text);
        }
      } else if (std::find(swept.begin(), swept.end(), k.name) != swept.end()) {
        name += fmt::format(", {}={}", k.name, text);
      }
    }
    const Summary s = r.ts_summary();
    series_in(speed, speed_index, name).points.push_back({.x = x, .y = s.mean, .err = s.sd});
    if (auto rss = r.rss_peak_minus_idle_bytes(env)) {
      series_in(memory, memory_index, name + " RSS").points.push_back({.x = x, .y = static_cast<double>(*rss) / 1048576.0});
    }
    if (r.vram_peak_minus_idle_bytes) {
      series_in(memory, memory_index, name + " VRAM")
          .points.push_back({.x = x, .y = static_cast<double>(*r.vram_peak_minus_idle_bytes) / 1048576.0});
    }
  }
  for (ChartPanel* panel : {&speed, &memory}) {
    for (ChartSeries& s : panel->series) {
      std::stable_sort(s.points.begin(), s.points.end(), [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
    }
  }
  chart.panels.push_back(std::move(speed));
  chart.panels.push_back(std::move(memory));
  return chart;
}

namespace {

// Geometry in SVG user units (pixels at 100% zoom).
constexpr double kWidth = 860, kPlotLeft = 80, kPlotWidth = 520, kLegendLeft = 620;
constexpr double kPanelHeight = 300, kPlotTop = 40, kPlotHeight = 210, kTitleHeight = 30;
// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
constexpr const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"};

// 4-6 round tick values (steps of 1, 2 or 5 × 10^k; at least 1 for an integer knob) inside
// [lo, hi], or from lo up to the first tick at or above hi when `cover` (a y axis' top).
std::vector<double> nice_ticks(double lo, double hi, bool cover, bool integer) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  if (integer) step = std::max(step, 1.0);
  const double last = cover ? std::ceil(hi / step - 1e-9) * step : hi;
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= last + step * 1e-9; v += step) {
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  }
  return ticks;
}

std::string fmt_num(double v) { return fmt::format("{:g}", v); }

}  // namespace

std::string render_svg(const ChartData& chart) {
  const double height = kTitleHeight + kPanelHeight * static_cast<double>(chart.panels.size());
  // Wide enough for the longest legend entry (~7 px per character at font-size 12 after
  // the 30 px swatch), so labels are never cut off at the right edge.
  size_t longest = 0;
  for (const ChartPanel& p : chart.panels) {
    for (const ChartSeries& s : p.series) longest = std::max(longest, s.name.size());
  }
  const double width = std::max(kWidth, kLegendLeft + 30 + 7.0 * static_cast<double>(longest) + 10);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{2}\" y=\"20\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      width, height, kPlotLeft, xml_escape(chart.title));
  // The x range is shared by the panels (the same knob).
  double x_lo = 0, x_hi = 1;
  bool any = false;
  for (const ChartPanel& p : chart.panels)
    for (const ChartSeries& s : p.series)
      for (const ChartPoint& pt : s.points) {
        x_lo = any ? std::min(x_lo, pt.x) : pt.x;
        x_hi = any ? std::max(x_hi, pt.x) : pt.x;
        any = true;
      }
  const bool categorical = !chart.categories.empty();
  if (categorical) {
    x_lo = -0.5;
    x_hi = static_cast<double>(chart.categories.size()) - 0.5;
  } else if (x_hi - x_lo <= 0) {
    x_lo -= 1;
    x_hi += 1;
  } else {
    const double pad = 0.05 * (x_hi - x_lo);
    x_lo -= pad;
    x_hi += pad;
  }
  const auto px = [&](double x) { return kPlotLeft + (x - x_lo) / (x_hi - x_lo) * kPlotWidth; };

  for (size_t pi = 0; pi < chart.panels.size(); ++pi) {
    const ChartPanel& panel = chart.panels[pi];
    const double top = kTitleHeight + kPanelHeight * static_cast<double>(pi) + kPlotTop;
    const double bottom = top + kPlotHeight;
    // y from 0 (speeds and footprints are compared as ratios: a cut axis exaggerates) to the top of the error bars.
    double y_hi = 0;
    for (const ChartSeries& s : panel.series)
      for (const ChartPoint& pt : s.points) y_hi = std::max(y_hi, pt.y + pt.err);
    if (y_hi <= 0) y_hi = 1;
    const std::vector<double> yt = nice_ticks(0, y_hi, /*cover=*/true, /*integer=*/false);
    const double y_top = yt.back();
    const auto py = [&](double y) { return bottom - y / y_top * kPlotHeight; };
    svg += fmt::format("<g class=\"panel\" data-title=\"{}\">\n", xml_escape(panel.y_label));
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{}</text>\n", kPlotLeft, top - 12, xml_escape(panel.y_label));
    for (double v : yt) {
      svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#dddddd\"/>"
                         "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                         kPlotLeft, py(v), kPlotLeft + kPlotWidth, py(v), kPlotLeft - 6, py(v) + 4, fmt_num(v));
    }
    const std::vector<double> xt = categorical ? std::vector<double>{} : nice_ticks(x_lo, x_hi, /*cover=*/false, /*integer=*/true);
    for (double v : xt) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", px(v), bottom + 16, fmt_num(v));
    }
    for (size_t c = 0; c < chart.categories.size(); ++c) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", px(static_cast<double>(c)),
                         bottom + 16, xml_escape(chart.categories[c]));
    }
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444444\"/>\n", kPlotLeft, top,
                       kPlotWidth, kPlotHeight);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", kPlotLeft + kPlotWidth / 2,
                       bottom + 34, xml_escape(chart.x_label));
    for (size_t si = 0; si < panel.series.size(); ++si) {
      const ChartSeries& s = panel.series[si];
      const char* color = kColors[si % std::size(kColors)];
      svg += fmt::format("<g class=\"series\" data-name=\"{}\" stroke=\"{}\" fill=\"{}\">\n<title>{}</title>\n",
                         xml_escape(s.name), color, color, xml_escape(s.name));
      std::string points;
      for (const ChartPoint& pt : s.points) points += fmt::format("{:.1f},{:.1f} ", px(pt.x), py(pt.y));
      if (s.points.size() > 1) svg += fmt::format("<polyline fill=\"none\" stroke-width=\"2\" points=\"{}\"/>\n", points);
      for (const ChartPoint& pt : s.points) {
        if (pt.err > 0) {  // error bar: ± sd, with caps
          const double x = px(pt.x), y0 = py(pt.y - pt.err), y1 = py(pt.y + pt.err);
          svg += fmt::format("<path class=\"error-bar\" fill=\"none\" d=\"M{0:.1f},{1:.1f}V{2:.1f}M{3:.1f},{1:.1f}H{4:.1f}"
                             "M{3:.1f},{2:.1f}H{4:.1f}\"/>\n",
                             x, y0, y1, x - 4, x + 4);
        }
        svg += fmt::format("<circle class=\"point\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\"><title>{}: {} = {}, {:.4g}{}</title></circle>\n",
                           px(pt.x), py(pt.y), xml_escape(s.name), xml_escape(chart.x_label),
                           categorical && pt.x >= 0 && pt.x < static_cast<double>(chart.categories.size())
                               ? xml_escape(chart.categories[static_cast<size_t>(pt.x)])
                               : fmt_num(pt.x),
                           pt.y, pt.err > 0 ? fmt::format(" ± {:.3g}", pt.err) : "");
      }
      const double ly = top + 8 + 18 * static_cast<double>(si);
      svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke-width=\"2\"/>"
                         "<text x=\"{3}\" y=\"{4:.1f}\" stroke=\"none\" fill=\"#000000\">{5}</text>\n",
                         kLegendLeft, ly, kLegendLeft + 18, kLegendLeft + 24, ly + 4, xml_escape(s.name));
      svg += "</g>\n";
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

namespace {

bool is_png(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".png") == 0; }

constexpr const char* kConverter = "rsvg-convert";

}  // namespace

Status check_chart_output(const std::string& path) {
  if (!is_png(path)) return Status::ok();
  if (platform::find_program(kConverter).empty()) {
    return Status::bad_input(fmt::format("--chart {}: a PNG needs rsvg-convert, which is not on PATH (Debian: apt-get "
                                         "install librsvg2-bin; or write an .svg)", path));
  }
  return Status::ok();
}

Status write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(utf8_path(path), std::ios::binary | std::ios::trunc);
  if (!out) return Status::bad_input(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  out << text;
  if (!out.flush()) return Status::runtime(fmt::format("{}: write failed", path));
  return Status::ok();
}

Status write_chart(const ChartData& chart, const std::string& path) {
  const std::string svg = render_svg(chart);
  if (!is_png(path)) return write_text_file(path, svg);
  RETURN_IF_ERROR(check_chart_output(path));
  const std::string tmp = fmt::format("{}.{}.svg", path, platform::process_id());
  RETURN_IF_ERROR(write_text_file(tmp, svg));
  const Result<platform::ProcessExit> exit = platform::run_process({kConverter, "-f", "png", "-o", path, tmp});
  std::error_code ec;
  std::filesystem::remove(utf8_path(tmp), ec);
  if (!exit) return exit.status().with_context("--chart " + path);
  if (!exit->success()) {
    return Status::runtime(fmt::format("--chart {}: {} failed (exit status {})", path, kConverter, exit->code));
  }
  return Status::ok();
}

}  // namespace moetier::bench
