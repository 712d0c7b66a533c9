// `moetier tune` as a user runs it, on the tiny reference model (no GPU here: the placement
// knobs collapse to the CPU and tune says so): it finishes within a small time budget,
// prints a command line the user can paste, its JSON record carries every candidate's
// samples consistently, and bad input exits 2 with one line.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/ref_data.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;
const std::string kModelPath = std::string(moetier::testing::kRefDir) + "/models/qwen35moe-tiny-f32.gguf";
const std::string kModel = "'" + kModelPath + "'";

using moetier::testing::count_lines;

TEST(CliTune, FinishesWithinASmallBudgetAndPrintsTheWinningCommand) {
  const auto r = run_moetier("tune -m " + kModel + " -t 1,2 --time-budget 20");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("collapse to CPU only"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("# moetier tune --for serve"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("## Phase 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    moetier serve -m " + kModelPath + " -c 4096 -t "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak − idle"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("moetier tune: winner: moetier serve"), std::string::npos) << r.err;
}

TEST(CliTune, JsonRecordHasEveryCandidateAndATinyBudgetStillAnswers) {
  const auto r = run_moetier("tune -m " + kModel + " --for bench -t 1,2 --time-budget 30 -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["purpose"], "bench");
  ASSERT_TRUE(j["candidates"].is_array());
  // start (-t 1), -t 2, --no-mmap: -ub is not searched for bench.
  EXPECT_EQ(j["candidates"].size(), 3u);
  for (const auto& c : j["candidates"]) {
    EXPECT_EQ(c["n_gpu_layers"], 0);
    EXPECT_EQ(c["n_ubatch"], 512);
    if (!c["measured"].get<bool>()) continue;
    EXPECT_EQ(c["phase1"]["tg_ts"].size(), 2u);
    EXPECT_EQ(c["phase1"]["score_samples"], c["phase1"]["tg_ts"]) << "bench scores tg";
    EXPECT_GT(c["phase1"]["avg_tg_ts"].get<double>(), 0);
  }
  const std::string command = j["winner"]["command"];
  EXPECT_EQ(command.rfind("moetier bench -m " + kModelPath + " -t ", 0), 0u) << command;
  EXPECT_EQ(j["model_sha256"], "1d44f0978d02650236ac4cf7edfb0423917479d04ce9a3248778e57fa53a8d8a");

  // A budget smaller than one repetition: the start is still measured and answered.
  const auto tiny = run_moetier("tune -m " + kModel + " --time-budget 0.01 -o json");
  ASSERT_EQ(tiny.rc, 0) << tiny.err;
  const auto t = nlohmann::json::parse(tiny.out);
  EXPECT_EQ(t["winner"]["index"], 0);
  EXPECT_TRUE(t["candidates"][0]["measured"].get<bool>());
  EXPECT_FALSE(t["phase2"]["ran"].get<bool>());
  EXPECT_NE(tiny.err.find("left out (the --time-budget would be exceeded)"), std::string::npos) << tiny.err;
}

TEST(CliTune, BadInputExitsTwoWithOneLine) {
  const std::vector<std::string> bad = {"tune -m " + kModel + " --for chat",
                                        "tune -m " + kModel + " --time-budget -5",
                                        "tune -m " + kModel + " --time-budget 0",
                                        "tune -m " + kModel + " --time-budget soon",
                                        "tune -m " + kModel + " --allow-kv-types f16,q5_1",
                                        "tune -m " + kModel + " --vram-budget -1",
                                        "tune -m " + kModel + " -t 0",
                                        "tune -m " + kModel + " -o csv",
                                        "tune -m " + kModel + " -c 0",
                                        "tune -m /nonexistent/model.gguf",
                                        "tune --for serve"};
  for (const std::string& args : bad) {
    const auto r = run_moetier(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  EXPECT_NE(run_moetier("tune -m /nonexistent/model.gguf").err.find("/nonexistent/model.gguf"), std::string::npos);
  const auto help = run_moetier("tune --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("--time-budget"), std::string::npos);
  EXPECT_NE(help.out.find("512/pp + 128/tg"), std::string::npos);
}

}  // namespace
}  // namespace moetier
