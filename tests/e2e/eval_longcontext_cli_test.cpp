// moetier eval longcontext as a user runs it: against a server it starts (-m) and against a
// running server (--url), on a tiny reference model whose answers are noise — the harness
// must still finish, write every output and resume; bad input gets one clear line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

TEST(EvalLongContextCli, StartsAServerRunsTheItemsAndResumes) {
  const std::string dir = moetier::testing::temp_file("lc-run");
  const std::string model = moetier::testing::ref_model_path("qwen3moe-tiny-f32");
  const std::string cmd = "eval longcontext -m '" + model + "' --lengths 300,600 --depths 25,75 --max-tokens 12 --out '" +
                          dir + "' -- -t 1";
  auto r = run_moetier(cmd);
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* f : {"items.jsonl", "results.jsonl", "table.md", "table.json", "heatmap.svg", "provenance.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  }
  const auto results = read_jsonl(dir + "/results.jsonl");
  ASSERT_EQ(results.size(), 8u);
  for (const auto& res : results) {
    EXPECT_TRUE(res.contains("verdict") && res["verdict"] != "error") << res.dump();
    EXPECT_GT(res.value("server_peak_rss_bytes", int64_t{0}), 0);
    EXPECT_TRUE(res.contains("timings"));
  }
  EXPECT_NE(r.out.find("| 300 |"), std::string::npos) << r.out;
  std::ifstream pf(dir + "/provenance.json");
  const auto prov = nlohmann::json::parse(pf);
  EXPECT_EQ(prov["suite"], "longcontext-v1");
  EXPECT_EQ(prov["model"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(prov["items"], 8);
  // A second run resumes: nothing left to ask, the same table.
  auto again = run_moetier(cmd);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.err.find("resuming: 8 of 8"), std::string::npos) << again.err;
  EXPECT_EQ(read_jsonl(dir + "/results.jsonl").size(), 8u);
  // Other items in the same directory are refused, not mixed in.
  auto other = run_moetier("eval longcontext -m '" + model + "' --lengths 300,600 --depths 25,75 --seed 7 --max-tokens 12 --out '" +
                           dir + "' -- -t 1");
  EXPECT_EQ(other.rc, 2);
  EXPECT_NE(other.err.find("different items"), std::string::npos) << other.err;
  std::filesystem::remove_all(dir);
}

TEST(EvalLongContextCli, AgainstARunningServer) {
  const std::string model = moetier::testing::ref_model_path("qwen35moe-tiny-f32");
  moetier::testing::ServerProcess server({"-m", model, "-t", "1", "-c", "1024"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string dir = moetier::testing::temp_file("lc-url");
  // Lengths measured through the server's /tokenize (no --vocab).
  auto r = run_moetier("eval longcontext --url http://127.0.0.1:" + std::to_string(server.port()) +
                       " --lengths 400 --depths 50 --lang en --max-tokens 8 --out '" + dir + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto results = read_jsonl(dir + "/results.jsonl");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["id"], "en-400-d50");
  std::filesystem::remove_all(dir);
}

TEST(EvalLongContextCli, BadInputIsOneClearLine) {
  const std::string vocab = std::string(moetier::testing::kRefDir) + "/tokenizer/qwen3-vocab.gguf";
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"eval longcontext", "give -m MODEL"},
           {"eval longcontext --url http://127.0.0.1:1 -m x.gguf", "give -m MODEL"},
           {"eval longcontext --list --vocab '" + vocab + "' --lengths 4096,abc", "not a whole number"},
           {"eval longcontext --list --vocab '" + vocab + "' --depths 150", "not a percentage"},
           {"eval longcontext --list --vocab '" + vocab + "' --lang fr", "--lang"},
           {"eval longcontext --url https://example.com", "https"},
           {"eval longcontext --bogus", "--bogus"},
           {"eval nosuch", "unknown suite"},
       }) {
    auto r = run_moetier(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
  // --list needs no server and prints one line per item.
  const std::string dir = moetier::testing::temp_file("lc-list");
  auto r = run_moetier("eval longcontext --list --vocab '" + vocab + "' --lengths 2048 --out '" + dir + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("en-2048-d50"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("zh-2048-d90"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moetier
