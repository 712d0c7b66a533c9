#include "bench/html_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "bench/configs.h"

namespace moetier::bench {

namespace {

std::string mib(std::optional<int64_t> bytes) {
  return bytes ? fmt::format("{:.1f}", static_cast<double>(*bytes) / 1048576.0) : "–";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:2em;color:#111;max-width:1200px}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f0f0f0}td.l,th.l{text-align:left}tr.noisy td{background:#fff3e0}"
    "pre{background:#f6f6f6;padding:8px;white-space:pre-wrap;word-break:break-all}"
    ".warn{color:#a04000}code{font-size:90%}";

}  // namespace

std::string command_line(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                         "-_./=,:+@%") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

std::string render_html_report(const HtmlReportInput& in) {
  const Environment& env = in.env;
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing outside the page may load: the report must be readable offline and as an attachment.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
      "<title>moetier bench report</title>\n";
  h += fmt::format("<style>{}</style>\n</head>\n<body>\n<h1>moetier bench report</h1>\n", kStyle);

  h += "<h2>Provenance</h2>\n<ul id=\"provenance\">\n";
  for (const std::string& line : provenance_lines(env)) h += fmt::format("<li>{}</li>\n", xml_escape(line));
  h += "</ul>\n";
  h += fmt::format("<p>Command line:</p>\n<pre id=\"command\">{}</pre>\n", xml_escape(in.command_line));

  // Results: the swept knobs as columns, then the statistics.
  std::vector<TestSpec> specs;
  for (const TestResult& r : in.results) specs.push_back(r.spec);
  const std::vector<std::string> swept = swept_knobs(specs);
  h += "<h2>Results</h2>\n<table id=\"results\">\n<thead><tr><th class=\"l\">test</th>";
  for (const std::string& k : swept) h += fmt::format("<th class=\"l\">{}</th>", xml_escape(k));
  h += "<th>t/s mean</th><th>sd</th><th>min</th><th>max</th><th>cv</th><th>drift</th><th>n</th>"
       "<th>peak − idle RSS MiB</th><th>VRAM MiB</th><th class=\"l\">samples t/s</th></tr></thead>\n<tbody>\n";
  std::vector<std::string> noisy;
  for (const TestResult& r : in.results) {
    const Summary s = r.ts_summary();
    const bool is_noisy = s.cv > kNoisyCv;
    if (is_noisy) noisy.push_back(test_name(r.spec));
    h += fmt::format("<tr{}><td class=\"l\">{}</td>", is_noisy ? " class=\"noisy\"" : "", xml_escape(test_kind(r.spec)));
    for (const Knob& k : test_knobs(r.spec)) {
      if (std::find(swept.begin(), swept.end(), k.name) != swept.end()) {
        h += fmt::format("<td class=\"l\">{}</td>", xml_escape(k.text));
      }
    }
    const auto drift = r.drift_percent();
    std::string samples;
    for (double t : r.samples_ts()) samples += fmt::format("{}{:.2f}", samples.empty() ? "" : ", ", t);
    h += fmt::format("<td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.1f}%</td><td>{}</td><td>{}</td>"
                     "<td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
                     s.mean, s.sd, s.min, s.max, 100 * s.cv,
                     r.interleaved && drift ? fmt::format("{:+.1f}%", *drift) : "–", s.n, mib(r.rss_peak_minus_idle_bytes(env)),
                     r.vram_peak_minus_idle_bytes ? mib(r.vram_peak_minus_idle_bytes) + " (" + xml_escape(r.vram_source) + ")"
                                                  : "–",
                     samples);
  }
  h += "</tbody>\n</table>\n";
  h += "<p>cv = sd / mean of the repetitions' t/s; drift = mean t/s of the second half of the rounds against the "
       "first half (interleaved runs); peak − idle RSS = the test's VmHWM minus the RSS before loading.</p>\n";
  if (!noisy.empty()) {
    h += fmt::format("<p class=\"warn\" id=\"noisy\">Coefficient of variation above {:.0f}%: {}. Differences of that size "
                     "are noise; rerun with more repetitions or a quieter machine.</p>\n",
                     100 * kNoisyCv, xml_escape(fmt::format("{}", fmt::join(noisy, ", "))));
  }
  if (!in.comparisons.empty()) {
    h += "<h2>Comparisons</h2>\n<p>Ratio of mean t/s with a 95% confidence interval (Welch t interval on the log "
         "ratio, delta method); \"no difference\" when the interval holds 1.</p>\n<ul id=\"comparisons\">\n";
    for (const Comparison& c : in.comparisons) h += fmt::format("<li>{}</li>\n", xml_escape(describe_comparison(c)));
    h += "</ul>\n";
  }
  h += "<h2>Charts</h2>\n<div id=\"chart\">\n" + render_svg(in.chart) + "</div>\n</body>\n</html>\n";
  return h;
}

}  // namespace moetier::bench
