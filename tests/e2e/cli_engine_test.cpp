// The engine commands as a user runs them: run, logits, tokenize, chat — outputs checked
// against ../shared/ref, and bad input answered with one clear line and exit status 2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/ref_data.h"

#include "gguf/gguf.h"
#include "support/cli.h"
#include "text/tokenizer.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;
const std::string kRef = moetier::testing::kRefDir;
using moetier::testing::read_f32_file;
using moetier::testing::read_json_file;

std::string model(const std::string& name) { return "'" + kRef + "/models/" + name + ".gguf'"; }
std::string prompt(const std::string& id) { return "'" + kRef + "/prompts/" + id + ".txt'"; }

nlohmann::json continuation(const std::string& model_name, const std::string& id) {
  std::ifstream in(kRef + "/expected/" + model_name + "/" + id + ".continuation.json");
  return nlohmann::json::parse(in);
}

TEST(CliRun, GreedyTextEqualsLlamaCppContinuation) {
  // F32 model: all 32 greedy tokens match llama.cpp (README section 6), so the printed text
  // is exactly their detokenization. End-of-generation tokens render as nothing.
  const auto cont = continuation("qwen35moe-tiny-f32", "p2_short");
  const auto r = run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -f " + prompt("p2_short") +
                             " -n 32 --temp 0 --ignore-eos -t 2 -ctk f32 -ctv f32");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto header = gguf::read_header(kRef + "/models/qwen35moe-tiny-f32.gguf");
  ASSERT_TRUE(header.is_ok());
  auto tok = text::Tokenizer::from_gguf(*header);
  ASSERT_TRUE(tok.is_ok());
  const auto ids = cont["greedy_tokens"].get<std::vector<int32_t>>();
  text::Detokenizer detok(*tok);
  std::string expected;
  for (int32_t id : ids) expected += detok.push(id);
  expected += detok.finish();
  EXPECT_EQ(r.out, expected + "\n");
  EXPECT_NE(r.err.find("generated 32 tokens"), std::string::npos) << r.err;
}

TEST(CliLogits, LastAndAllPositionsMatchReference) {
  const std::string out = moetier::testing::temp_file("logits.bin");
  // llama.cpp's reference ran with an f32 KV cache (-ctk f32 -ctv f32); moetier's default is f16.
  auto r = run_moetier("logits -m " + model("qwen3moe-tiny-f32") + " -f " + prompt("p3_mixed") +
                       " -ctk f32 -ctv f32 -o '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = read_f32_file(out);
  const auto want = read_f32_file(kRef + "/expected/qwen3moe-tiny-f32/p3_mixed.logits.f32.bin");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << "logit " << i;

  r = run_moetier("logits -m " + model("qwen3moe-tiny-f32") + " --tokens 5,6,7 --all -o '" + out + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_f32_file(out).size(), 3u * 268u);
  std::filesystem::remove(out);
}

// --cpu-isa caps the kernels' ISA (to measure the users' AVX2 path on an AVX-512 machine).
// Every ISA's kernels are bit-identical to the scalar references, so each tier the CPU has
// gives the very same logits bytes; a tier the CPU lacks or an unknown one is bad usage.
TEST(CliCpuIsa, EveryTierGivesTheSameLogits) {
  const std::string out_base = ::testing::TempDir() + "isa_logits_";
  std::vector<std::string> tiers = {"auto", "scalar"};
  const auto probe = run_moetier("--version --cpu-isa avx2");
  if (probe.rc == 0) tiers.insert(tiers.end(), {"avx2", "avx2-novnni"});
  if (run_moetier("--version --cpu-isa avx512").rc == 0) tiers.push_back("avx512");
  std::vector<std::vector<float>> got;
  for (const auto& tier : tiers) {
    const std::string out = out_base + tier + ".bin";
    const auto r = run_moetier("logits -m " + model("qwen35moe-small-ud_mix") + " -f " + prompt("p3_mixed") +
                               " -t 2 --cpu-isa " + tier + " -o '" + out + "'");
    ASSERT_EQ(r.rc, 0) << tier << ": " << r.err;
    got.push_back(read_f32_file(out));
    ASSERT_FALSE(got.back().empty());
  }
  for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i], got[0]) << tiers[i] << " vs " << tiers[0];
  const auto version = run_moetier("--version --cpu-isa scalar");
  EXPECT_NE(version.out.find("--cpu-isa scalar"), std::string::npos) << version.out;
  const auto bad = run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -p hi --cpu-isa avx1024");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--cpu-isa"), std::string::npos) << bad.err;
}

TEST(CliTokenize, IdsMatchLlamaCppAndWorkOnVocabOnlyFiles) {
  // Case 'p3_mixed' of prompts/tokens.json for the small qwen35moe vocabulary.
  std::ifstream in(kRef + "/prompts/tokens.json");
  const auto tokens = nlohmann::json::parse(in);
  const auto r = run_moetier("tokenize -m " + model("qwen35moe-small-q4_k_m") + " -f " + prompt("p3_mixed") + " --ids");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = nlohmann::json::parse(r.out);
  bool found = false;
  for (const auto& [key, value] : tokens.items()) {
    if (key.find("qwen35moe-small") == std::string::npos || !value.contains("p3_mixed")) continue;
    EXPECT_EQ(got, value["p3_mixed"]);
    found = true;
  }
  if (!found) {
    // Fall back to the manifest's prompt tokens for the case.
    std::ifstream mf(kRef + "/manifest.json");
    for (const auto& c : nlohmann::json::parse(mf)["cases"]) {
      if (c["case_id"] == "qwen35moe-small-q4_k_m/p3_mixed") {
        EXPECT_EQ(got, c["prompt_tokens"]);
      }
    }
  }
  const auto v = run_moetier("tokenize -m '" + kRef + "/tokenizer/qwen3-vocab.gguf' -p 'Hello world' --ids");
  ASSERT_EQ(v.rc, 0) << v.err;
  EXPECT_EQ(v.out, "[9707,1879]\n");
}

TEST(CliChat, AnswersEachLineAndReportsSpeed) {
  const std::string input = moetier::testing::temp_file("chat_in.txt");
  std::ofstream(input) << "Hello\nTell me more\n";
  const auto r = run_moetier("chat -m " + model("qwen35moe-small-q4_k_m") + " -n 8 --seed 3", input);
  EXPECT_EQ(r.rc, 0) << r.err;
  size_t turns = 0;
  for (size_t pos = r.err.find(" t/s;"); pos != std::string::npos; pos = r.err.find(" t/s;", pos + 1)) ++turns;
  EXPECT_EQ(turns, 2u) << r.err;
  std::filesystem::remove(input);
}

// Speculative decoding changes nothing a user sees but the speed line: chat (two turns, the
// drafter looking back over the conversation) and run, sampled with a seed, print the same
// text with and without --spec-type ngram-simple (a 1-token n-gram drafts often).
TEST(CliSpeculative, ChatAndRunPrintTheSameTextWithDrafts) {
  const std::string input = moetier::testing::temp_file("chat_spec_in.txt");
  std::ofstream(input) << "Hello hello hello\nSay it again, say it again\n";
  const std::string spec = " --spec-type ngram-simple --spec-ngram-simple-size-n 1 --spec-adaptive off";
  for (const std::string& m : {model("qwen35moe-small-q4_k_m"), model("qwen3moe-small-q4_k_m")}) {
    const std::string chat = "chat -m " + m + " -n 24 --seed 3";
    const auto plain = run_moetier(chat, input);
    const auto fast = run_moetier(chat + spec, input);
    ASSERT_EQ(plain.rc, 0) << plain.err;
    ASSERT_EQ(fast.rc, 0) << fast.err;
    EXPECT_EQ(plain.out, fast.out);
    EXPECT_NE(fast.err.find("drafts "), std::string::npos) << fast.err;  // it did draft
    const std::string run = "run -m " + m + " -p 'one two one two one two one' -n 32 --seed 5 --temp 0.7";
    const auto run_plain = run_moetier(run);
    const auto run_fast = run_moetier(run + spec);
    ASSERT_EQ(run_fast.rc, 0) << run_fast.err;
    EXPECT_EQ(run_plain.out, run_fast.out);
    EXPECT_NE(run_fast.err.find("speculative (ngram-simple)"), std::string::npos) << run_fast.err;
  }
  std::filesystem::remove(input);
}

// Exit status 2 and exactly one "error:" line (load progress lines may precede it).
void expect_one_line_error(const moetier::testing::CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.rc, 2) << r.err;
  size_t errors = 0;
  for (size_t pos = r.err.find("error:"); pos != std::string::npos; pos = r.err.find("error:", pos + 1)) ++errors;
  EXPECT_EQ(errors, 1u) << r.err;
  const size_t line_start = r.err.rfind('\n', r.err.find("error:"));
  const std::string line = r.err.substr(line_start == std::string::npos ? 0 : line_start + 1);
  EXPECT_NE(line.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << r.err;
}

TEST(CliErrors, BadInputIsOneClearLine) {
  expect_one_line_error(run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -f " + prompt("p5_long") + " -c 16"),
                        "more than the context");
  expect_one_line_error(run_moetier("run -m /nonexistent.gguf -p hi"), "/nonexistent.gguf");
  expect_one_line_error(run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -p hi --bogus"), "unknown flag '--bogus'");
  expect_one_line_error(run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -p hi -b 0"), "-b must be positive");
  expect_one_line_error(run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -p hi -ctk q2_k"), "-ctk");
  expect_one_line_error(run_moetier("run -m " + model("qwen35moe-tiny-f32") + " -p hi --top-p 7"), "--top-p");
  expect_one_line_error(run_moetier("logits -m " + model("qwen35moe-tiny-f32") + " --tokens 1,x -o /dev/null"),
                        "--tokens");
  expect_one_line_error(run_moetier("logits -m " + model("qwen35moe-tiny-f32") + " --tokens 1,99999 -o /dev/null"),
                        "out of range");
  expect_one_line_error(run_moetier("run -m '" + kRef + "/tokenizer/qwen3-vocab.gguf' -p hi"), "block_count");
}

}  // namespace
}  // namespace moetier
