// `moetier bench`'s outputs as pure functions: the chart's series and its SVG, the HTML
// report's escaping and command line. (Its memory figures are platform's process_memory,
// tested in platform_test.cpp.)
#include <gtest/gtest.h>

#include "support/bench_args.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_params.h"
#include "bench/chart.h"
#include "bench/configs.h"
#include "bench/html_report.h"

namespace moetier::bench {
namespace {

using testing::tests_of;

// Results with given t/s samples (n tokens per repetition = n_gen) and RSS peaks.
TestResult result_for(const TestSpec& spec, std::vector<double> ts, int64_t peak_rss) {
  TestResult r;
  r.spec = spec;
  for (double t : ts) r.samples_ns.push_back(static_cast<int64_t>(std::llround(1e9 * static_cast<double>(spec.n_gen + spec.n_prompt) / t)));
  r.peak_rss_bytes = peak_rss;
  return r;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t pos = 0; (pos = text.find(what, pos)) != std::string::npos; pos += what.size()) ++n;
  return n;
}

TEST(BenchChart, SeriesAgainstTheFirstSweptNumericKnob) {
  // -d 0,64,128 × -ctk f16,q8_0 × (pp8, tg4): x = n_depth (numeric); one line per kind and cache type.
  const auto tests = tests_of({"-p", "8", "-n", "4", "-d", "0,64,128", "-ctk", "f16,q8_0"});
  ASSERT_EQ(tests.size(), 12u);
  std::vector<TestResult> results;
  for (size_t i = 0; i < tests.size(); ++i) results.push_back(result_for(tests[i], {100.0 + i, 102.0 + i}, (100 + i) << 20));
  Environment env;
  env.idle_rss_bytes = int64_t{10} << 20;
  const ChartData chart = chart_from_results(results, env);
  EXPECT_EQ(chart.x_label, "n_depth");
  EXPECT_TRUE(chart.categories.empty());
  ASSERT_EQ(chart.panels.size(), 2u);
  std::vector<std::string> names;
  for (const ChartSeries& s : chart.panels[0].series) {
    names.push_back(s.name);
    ASSERT_EQ(s.points.size(), 3u) << s.name;
    EXPECT_EQ(s.points[0].x, 0);
    EXPECT_EQ(s.points[2].x, 128);
    EXPECT_NEAR(s.points[0].err, std::sqrt(2.0), 1e-3);  // samples t and t + 2: sd = sqrt(2)
  }
  EXPECT_EQ(names, (std::vector<std::string>{"pp8, type_k=f16", "tg4, type_k=f16", "pp8, type_k=q8_0", "tg4, type_k=q8_0"}));
  ASSERT_EQ(chart.panels[1].series.size(), 4u);
  EXPECT_EQ(chart.panels[1].series[0].name, "pp8, type_k=f16 RSS");
  EXPECT_DOUBLE_EQ(chart.panels[1].series[0].points[0].y, 90.0);  // (100 - 10) MiB

  // The SVG: well-formed enough for a strict parser (checked in the e2e test with Chromium),
  // one group per series with one point per x value, error bars in the speed panel only.
  const std::string svg = render_svg(chart);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(count(svg, "<g class=\"series\""), 8);
  EXPECT_EQ(count(svg, "<circle class=\"point\""), 24);
  EXPECT_EQ(count(svg, "class=\"error-bar\""), 12);
  EXPECT_EQ(count(svg, "data-name=\"tg4, type_k=q8_0\""), 1);
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));

  // Nothing numeric swept: the cache types become categories.
  const auto cats = tests_of({"-p", "0", "-n", "4", "-ctk", "f16,q8_0,q4_0"});
  std::vector<TestResult> cat_results;
  for (const TestSpec& t : cats) cat_results.push_back(result_for(t, {50, 50}, 1 << 20));
  const ChartData c = chart_from_results(cat_results, env);
  EXPECT_EQ(c.x_label, "type_k");
  EXPECT_EQ(c.categories, (std::vector<std::string>{"f16", "q8_0", "q4_0"}));
  ASSERT_EQ(c.panels[0].series.size(), 1u);
  EXPECT_EQ(c.panels[0].series[0].points.size(), 3u);
}

TEST(BenchChart, PngNeedsTheConverterAndOtherNamesAreRefused) {
  EXPECT_TRUE(check_chart_output("").is_ok());
  EXPECT_TRUE(check_chart_output("a.svg").is_ok());
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
#ifdef _WIN32
  _putenv_s("PATH", "/nonexistent");
  const Status st = check_chart_output("a.png");
  _putenv_s("PATH", saved.c_str());
#else
  setenv("PATH", "/nonexistent", 1);
  const Status st = check_chart_output("a.png");
  setenv("PATH", saved.c_str(), 1);
#endif
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("librsvg2-bin"), std::string::npos) << st.message();
}

// A verify step of k drafts, each kept with probability a: 1 + a + ... + a^k tokens.
TEST(BenchReport, ExpectedTokensPerVerifyStep) {
  EXPECT_DOUBLE_EQ(spec_expected_tokens_per_step(1.0, 3), 4.0);
  EXPECT_DOUBLE_EQ(spec_expected_tokens_per_step(0.0, 3), 1.0);
  EXPECT_NEAR(spec_expected_tokens_per_step(0.8, 3), 1 + 0.8 + 0.64 + 0.512, 1e-12);
  EXPECT_NEAR(spec_expected_tokens_per_step(0.5, 1), 1.5, 1e-12);
}

TEST(BenchReport, ComparisonLines) {
  Comparison c{.a_name = "tg4", .b_name = "tg4", .what = "n_threads 1 -> 2",
               .ci = RatioCi{.ratio = 1.02, .low = 0.97, .high = 1.07, .df = 8}, .interleaved = true};
  EXPECT_EQ(describe_comparison(c), "tg4: n_threads 1 -> 2: t/s ratio 1.020, 95% CI [0.970, 1.070]: no difference");
  c.ci = RatioCi{.ratio = 0.5, .low = 0.4, .high = 0.6, .df = 8};
  c.b_name = "tg4 @ d512";
  c.what = "n_depth 0 -> 512";
  c.interleaved = false;
  EXPECT_EQ(describe_comparison(c), "tg4 @ d512 vs tg4: n_depth 0 -> 512: t/s ratio 0.500, 95% CI [0.400, 0.600]: slower "
                                    "(not interleaved: drift between the runs is not accounted for)");
  c.ci.reset();
  EXPECT_NE(describe_comparison(c).find("no interval"), std::string::npos);
}

TEST(BenchReport, EscapingAndCommandLine) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  std::vector<std::string> words = {"moetier", "bench", "-m", "my model.gguf", "-p", "8", "-ot", "a=CPU;b=GPU", "it's"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  EXPECT_EQ(command_line(static_cast<int>(argv.size()), argv.data()),
            "moetier bench -m 'my model.gguf' -p 8 -ot 'a=CPU;b=GPU' 'it'\\''s'");
}

}  // namespace
}  // namespace moetier::bench
