// `moetier bench --e2e`: a chat turn end to end on the tiny reference model, in-process and
// through a running `moetier serve` (--url), reported next to the pure pp/tg numbers; a
// wrong --url fails at once with one line.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;
using moetier::testing::ServerProcess;
const std::string kModelPath = std::string(moetier::testing::kRefDir) + "/models/qwen35moe-tiny-f32.gguf";
const std::string kModel = "'" + kModelPath + "'";

using moetier::testing::count_lines;

// The e2e records of a JSON array, and the one in-process record's prompt length.
std::vector<nlohmann::json> e2e_records(const nlohmann::json& all) {
  std::vector<nlohmann::json> out;
  for (const auto& r : all) {
    if (!r["e2e"].is_null()) out.push_back(r);
  }
  return out;
}

void expect_consistent_turn(const nlohmann::json& rec, int64_t n_gen) {
  EXPECT_EQ(rec["n_gen"], n_gen) << rec.dump();
  EXPECT_GT(rec["n_prompt"].get<int64_t>(), 10) << "the rendered message is several dozen tokens";
  ASSERT_TRUE(rec["avg_ttft_ms"].is_number()) << rec.dump();
  const double ttft_ms = rec["avg_ttft_ms"].get<double>();
  const double turn_ms = rec["avg_ns"].get<double>() / 1e6;
  EXPECT_GT(ttft_ms, 0);
  EXPECT_LT(ttft_ms, turn_ms) << "the first token comes before the turn ends";
  // t/s of an e2e turn: generated tokens per second of the whole turn, per repetition, and
  // their mean (as llama-bench: the mean of the rates, not the rate of the mean time, which
  // on a loaded machine with two uneven repetitions differ by more than any fixed share).
  // The printed figures carry 3 decimals (samples_ts) and 6 (avg_ts).
  const auto& samples_ns = rec["samples_ns"];
  const auto& samples_ts = rec["samples_ts"];
  ASSERT_TRUE(samples_ns.is_array() && samples_ts.is_array() && samples_ns.size() == samples_ts.size() &&
              !samples_ns.empty()) << rec.dump();
  double mean_ts = 0;
  for (size_t i = 0; i < samples_ns.size(); ++i) {
    const double ts = n_gen / (samples_ns[i].get<double>() / 1e9);
    EXPECT_NEAR(samples_ts[i].get<double>(), ts, 1e-3 + 1e-6 * ts) << rec.dump();
    mean_ts += ts / static_cast<double>(samples_ns.size());
  }
  EXPECT_NEAR(rec["avg_ts"].get<double>(), mean_ts, 1e-6 + 1e-6 * mean_ts) << rec.dump();
  EXPECT_TRUE(rec["achieved_gbps"].is_null());
}

TEST(CliBenchE2e, InProcessTurnNextToThePureNumbers) {
  const auto r = run_moetier("bench -m " + kModel + " -p 16 -n 8 -r 2 -t 1 --e2e -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto all = nlohmann::json::parse(r.out);
  ASSERT_EQ(all.size(), 3u) << "pp16, tg8, e2e chat";
  EXPECT_TRUE(all[0]["e2e"].is_null());
  EXPECT_TRUE(all[0]["avg_ttft_ms"].is_null());
  const auto e2e = e2e_records(all);
  ASSERT_EQ(e2e.size(), 1u);
  EXPECT_EQ(e2e[0]["e2e"], "in-process");
  EXPECT_TRUE(e2e[0]["e2e_url"].is_null());
  expect_consistent_turn(e2e[0], 8);

  const auto md = run_moetier("bench -m " + kModel + " -p 0 -n 8 -r 2 -t 1 --e2e");
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("| e2e chat (pp "), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("time to first token"), std::string::npos) << md.out;
  EXPECT_NE(md.err.find("time to first token"), std::string::npos) << md.err;
}

TEST(CliBenchE2e, ThroughAServerWithUrl) {
  ServerProcess server({"-m", kModelPath, "-t", "1", "-np", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  // The server alone (no -m) and next to the in-process turn.
  const auto r = run_moetier("bench --url " + url + " -n 8 -r 2 -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto all = nlohmann::json::parse(r.out);
  ASSERT_EQ(all.size(), 1u) << r.out;
  EXPECT_EQ(all[0]["e2e"], "http");
  EXPECT_EQ(all[0]["e2e_url"], url);
  EXPECT_EQ(all[0]["backends"], "HTTP");
  EXPECT_NE(all[0]["model_type"].get<std::string>().find("(HTTP)"), std::string::npos) << all[0].dump();
  expect_consistent_turn(all[0], 8);

  const auto both = run_moetier("bench -m " + kModel + " -p 0 -n 8 -r 2 -t 1 --url " + url + " -o json");
  ASSERT_EQ(both.rc, 0) << both.err;
  const auto e2e = e2e_records(nlohmann::json::parse(both.out));
  ASSERT_EQ(e2e.size(), 2u) << both.out;
  EXPECT_EQ(e2e[0]["e2e"], "in-process");
  EXPECT_EQ(e2e[1]["e2e"], "http");
  // The same message through the same template and tokenizer: the same prompt.
  EXPECT_EQ(e2e[0]["n_prompt"], e2e[1]["n_prompt"]);

  const auto md = run_moetier("bench --url " + url + " -n 8 -r 2");
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("over HTTP"), std::string::npos) << md.out;
}

TEST(CliBenchE2e, BadUrlFailsAtOnceWithOneLine) {
  // Port 1 on the loopback: nothing listens there.
  for (const std::string& args : {std::string("bench --url http://127.0.0.1:1 -n 4 -r 1"),
                                  std::string("bench -m ") + kModel + " --url http://127.0.0.1:1 -n 4 -r 1",
                                  std::string("bench --url https://example.com -n 4"),
                                  std::string("bench --url http://127.0.0.1:notaport -n 4"), std::string("bench --url ''")}) {
    const auto r = run_moetier(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  }
  const auto refused = run_moetier("bench --url http://127.0.0.1:1 -n 4 -r 1");
  EXPECT_NE(refused.err.find("no server answers"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace moetier
