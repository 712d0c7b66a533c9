// `moetier bench` as a user runs it, on the tiny reference model: the four output formats
// (shape, llama-bench's field names, statistics consistent with the samples), moetier's
// own fields checked against an independent count from the file, --profile, and bad
// input answered with exit status 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "platform/cpu.h"
#include "support/cli.h"
#include "support/ref_data.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;
const std::string kModelPath = std::string(moetier::testing::kRefDir) + "/models/qwen35moe-tiny-f32.gguf";
const std::string kModel = "'" + kModelPath + "'";
// From ../shared/ref/manifest.json (models → qwen35moe-tiny-f32.gguf → sha256).
const std::string kModelSha256 = "1d44f0978d02650236ac4cf7edfb0423917479d04ce9a3248778e57fa53a8d8a";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// llama-bench's fields that apply to moetier, then moetier's own, in output order.
const std::vector<std::string> kFields = {
    "build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
    "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "n_gpu_layers",
    "n_cpu_moe", "flash_attn", "tensor_buft_overrides", "use_mmap", "n_prompt", "n_gen", "n_depth", "test_time",
    "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "weight_bytes_per_token", "repacked_bytes", "achieved_gbps", "peak_rss_bytes",
    "cpu_isa", "cpu_cores", "cpus", "machine_read_gbps", "disk_read_gbps", "bandwidth_fraction", "estimate_n_layer", "estimate_ts", "gpu_device",
    "gpu_weight_bytes", "gpu_kv_bytes", "gpu_state_bytes", "gpu_scratch_bytes", "vram_used_delta_bytes",
    "gpu_backend", "spec_type", "spec_acceptance_target", "spec_draft_max", "spec_n_drafted", "spec_n_accepted",
    "spec_acceptance", "spec_expected_tokens_per_step", "spec_tokens_per_step", "step_tokens", "step_seqs", "step_ms",
    "spec_draft_ms_per_token", "expert_hit_rate", "expert_read_ahead_rate",
    "expert_bytes_read_per_token", "expert_read_gbps", "expert_prediction_accuracy", "expert_wait_fraction", "expert_gpu_hit_rate", "expert_gpu_copies_per_token", "moetier_version", "date", "model_file", "model_file_bytes",
    "model_sha256", "min_ts", "max_ts", "cv_ts", "drift_pct", "interleaved", "other_busy_cpus", "idle_rss_bytes",
    "peak_rss_scope", "rss_peak_minus_idle_bytes", "vram_peak_minus_idle_bytes", "vram_source", "e2e", "e2e_url",
    "avg_ttft_ms", "stddev_ttft_ms"};

// Weight bytes per generated token counted from the file alone: every tensor but the
// routed experts ("*_exps"), of which a token uses n_expert_used of n_expert, and of the
// token embedding only one row.
struct FileCounts {
  int64_t bytes = 0, params = 0, bytes_per_token = 0;
};
FileCounts count_file(const std::string& path) {
  auto header = gguf::read_header(path);
  EXPECT_TRUE(header.is_ok());
  FileCounts c;
  const int64_t n_expert = header->get_int_or("qwen35moe.expert_count", 0);
  const int64_t n_used = header->get_int_or("qwen35moe.expert_used_count", 0);
  EXPECT_GT(n_expert, 0);
  for (const auto& t : header->tensors) {
    const auto bytes = static_cast<int64_t>(t.n_bytes);
    c.bytes += bytes;
    c.params += static_cast<int64_t>(t.n_elements);
    if (t.name.find("_exps.") != std::string::npos) {
      c.bytes_per_token += bytes / n_expert * n_used;
    } else if (t.name == "token_embd.weight") {
      c.bytes_per_token += bytes / t.ne[1];
    } else {
      c.bytes_per_token += bytes;
    }
  }
  return c;
}

TEST(CliBench, JsonRecordsHaveLlamaBenchFieldsAndConsistentStatistics) {
  const auto r = run_moetier("bench -m " + kModel + " -p 8 -n 4 -r 2 -t 2 -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto doc = nlohmann::ordered_json::parse(r.out);  // throws (fails) on invalid JSON
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), 2u);
  const FileCounts counts = count_file(kModelPath);
  for (size_t i = 0; i < doc.size(); ++i) {
    const auto& rec = doc[i];
    std::vector<std::string> names;
    for (const auto& [k, v] : rec.items()) names.push_back(k);
    std::vector<std::string> want = kFields;
    want.push_back("samples_ns");
    want.push_back("samples_ts");
    EXPECT_EQ(names, want);
    EXPECT_EQ(rec["model_filename"], kModelPath);
    EXPECT_EQ(rec["backends"], "CPU");
    EXPECT_EQ(rec["n_threads"], 2);
    EXPECT_EQ(rec["n_batch"], 2048);
    EXPECT_EQ(rec["n_ubatch"], 512);
    EXPECT_EQ(rec["type_k"], "f16");
    EXPECT_EQ(rec["flash_attn"], -1);
    EXPECT_EQ(rec["use_mmap"], true);
    EXPECT_EQ(rec["n_depth"], 0);
    EXPECT_EQ(rec["model_size"], counts.bytes);
    EXPECT_EQ(rec["model_n_params"], counts.params);
    EXPECT_EQ(rec["weight_bytes_per_token"], counts.bytes_per_token);
    EXPECT_GT(rec["peak_rss_bytes"].get<int64_t>(), 0);
    EXPECT_TRUE(rec["model_type"].get<std::string>().rfind("qwen35moe ", 0) == 0) << rec["model_type"];
    EXPECT_NE(rec["model_type"].get<std::string>().find("all F32"), std::string::npos) << rec["model_type"];

    const auto ns = rec["samples_ns"].get<std::vector<int64_t>>();
    const auto ts = rec["samples_ts"].get<std::vector<double>>();
    ASSERT_EQ(ns.size(), 2u);
    ASSERT_EQ(ts.size(), 2u);
    const int64_t n_tokens = rec["n_prompt"].get<int64_t>() + rec["n_gen"].get<int64_t>();
    double ts_sum = 0;
    for (size_t k = 0; k < ns.size(); ++k) {
      ASSERT_GT(ns[k], 0);
      const double want_ts = 1e9 * static_cast<double>(n_tokens) / static_cast<double>(ns[k]);
      EXPECT_NEAR(ts[k], want_ts, want_ts * 1e-5);  // printed with 6 significant digits
      ts_sum += want_ts;
    }
    EXPECT_GT(rec["avg_ts"].get<double>(), 0.0);
    EXPECT_NEAR(rec["avg_ts"].get<double>(), ts_sum / 2, ts_sum * 1e-6);
    EXPECT_NEAR(rec["avg_ns"].get<double>(), (ns[0] + ns[1]) / 2.0, 1.0);
    // Two samples: sample stddev = |a - b| / sqrt(2).
    EXPECT_NEAR(rec["stddev_ns"].get<double>(), std::abs(ns[0] - ns[1]) / std::sqrt(2.0), 1.0);
  }
  EXPECT_EQ(doc[0]["n_prompt"], 8);
  EXPECT_EQ(doc[0]["n_gen"], 0);
  EXPECT_TRUE(doc[0]["achieved_gbps"].is_null());
  EXPECT_EQ(doc[1]["n_prompt"], 0);
  EXPECT_EQ(doc[1]["n_gen"], 4);
  const double gbps = doc[1]["achieved_gbps"].get<double>();
  EXPECT_NEAR(gbps, static_cast<double>(counts.bytes_per_token) * doc[1]["avg_ts"].get<double>() / 1e9, gbps * 1e-5);
  // Progress on stderr names the test and the repetition.
  EXPECT_NE(r.err.find("pp8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("repetition 2/2"), std::string::npos) << r.err;
}

TEST(CliBench, CsvJsonlAndMarkdownShapes) {
  const std::string common = "bench -m " + kModel + " -p 8 -n 4 -r 2 -t 1,2 --no-warmup -o ";
  {
    const auto r = run_moetier(common + "csv");
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 5u) << r.out;  // header + 2 thread counts x (pp8, tg4)
    std::string want_header;
    for (size_t i = 0; i < kFields.size(); ++i) want_header += (i ? "," : "") + kFields[i];
    EXPECT_EQ(lines[0], want_header);
    for (size_t i = 1; i < lines.size(); ++i) {
      // every value quoted: 2 quotes per field, fields separated by '","'
      EXPECT_EQ(lines[i].front(), '"');
      EXPECT_EQ(lines[i].back(), '"');
      size_t separators = 0;
      for (size_t pos = 0; (pos = lines[i].find("\",\"", pos)) != std::string::npos; ++pos) ++separators;
      EXPECT_EQ(separators + 1, kFields.size()) << lines[i];
    }
    // n_ubatch, n_threads, type_k: the thread count varies slower than the test kind
    EXPECT_NE(lines[1].find("\"512\",\"1\",\"f16\""), std::string::npos) << lines[1];
    EXPECT_NE(lines[3].find("\"512\",\"2\",\"f16\""), std::string::npos) << lines[3];
  }
  {
    const auto r = run_moetier(common + "jsonl");
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 4u) << r.out;
    const std::vector<std::pair<int, int>> want = {{1, 8}, {1, 0}, {2, 8}, {2, 0}};
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto rec = nlohmann::json::parse(lines[i]);
      ASSERT_TRUE(rec.is_object());
      EXPECT_EQ(rec["n_threads"], want[i].first);
      EXPECT_EQ(rec["n_prompt"], want[i].second);
      EXPECT_EQ(rec["samples_ns"].size(), 2u);
    }
  }
  {
    const auto r = run_moetier(common + "md");
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto lines = lines_of(r.out);
    // The provenance header, a blank line, then llama-bench's table.
    ASSERT_GE(lines.size(), 16u) << r.out;
    EXPECT_EQ(lines[0].rfind("moetier ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find("(commit "), std::string::npos) << lines[0];
    EXPECT_TRUE(std::regex_search(lines[0], std::regex(R"(run \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$)"))) << lines[0];
    EXPECT_EQ(lines[1], "model: " + kModelPath + " (" + std::to_string(std::filesystem::file_size(kModelPath)) +
                            " bytes, sha256 " + kModelSha256 + ")");
    EXPECT_EQ(lines[2].rfind("CPU: ", 0), 0u) << lines[2];
    EXPECT_NE(lines[2].find("threads 1,2"), std::string::npos) << lines[2];
    EXPECT_EQ(lines[3].rfind("memory: idle RSS ", 0), 0u) << lines[3];
    EXPECT_EQ(lines[4], "repetitions: interleaved round-robin over the tests of each model load");
    EXPECT_EQ(lines[5], "");
    EXPECT_EQ(lines[6].rfind("| model ", 0), 0u) << lines[6];
    EXPECT_NE(lines[6].find("| threads |"), std::string::npos) << lines[6];
    EXPECT_NE(lines[6].find("t/s |"), std::string::npos) << lines[6];
    EXPECT_NE(lines[6].find(" cv |"), std::string::npos) << lines[6];
    EXPECT_NE(lines[6].find(" drift |"), std::string::npos) << lines[6];
    EXPECT_NE(lines[6].find("| peak-idle MiB |"), std::string::npos) << lines[6];
    EXPECT_EQ(lines[7].rfind("| ---", 0), 0u) << lines[7];
    EXPECT_NE(lines[8].find(" pp8 |"), std::string::npos) << lines[8];
    EXPECT_NE(lines[9].find(" tg4 |"), std::string::npos) << lines[9];
    EXPECT_NE(lines[8].find(" ± "), std::string::npos) << lines[8];
    EXPECT_EQ(lines[12], "");
    // Two configurations differing in the thread count: one comparison per test kind
    // (the noise warning before them depends on the machine's noise).
    const auto title = std::find(lines.begin(), lines.end(),
                                 "comparisons (ratio of mean t/s with a 95% Welch interval on the log ratio):");
    ASSERT_NE(title, lines.end()) << r.out;
    ASSERT_LT(title + 2, lines.end());
    EXPECT_EQ(title[1].rfind("- pp8: n_threads 1 -> 2: t/s ratio ", 0), 0u) << title[1];
    EXPECT_EQ(title[2].rfind("- tg4: n_threads 1 -> 2: t/s ratio ", 0), 0u) << title[2];
    EXPECT_EQ(lines.back().rfind("build: ", 0), 0u);
  }
}

TEST(CliBench, DepthPromptGenAndProfile) {
  const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 4 -pg 4,2 -d 4 -r 1 -t 1 --profile -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc[0]["n_depth"], 4);
  EXPECT_EQ(doc[1]["n_prompt"], 4);
  EXPECT_EQ(doc[1]["n_gen"], 2);
  EXPECT_TRUE(doc[1]["achieved_gbps"].is_null());
  // tg4 on a 4-layer MoE model: 4 single-token forwards through 3 DeltaNet layers and 1 attention layer
  // (layer 3), each with routed experts, and 4 LM heads; the blocks and "other" add up to the repetition's wall time.
  const auto& profile = doc[0]["profile"];
  ASSERT_TRUE(profile.is_object()) << doc[0];
  std::set<std::string> blocks;
  double percent = 0;
  for (const auto& b : profile["blocks"]) {
    blocks.insert(b["block"].get<std::string>());
    percent += b["percent"].get<double>();
    const std::string name = b["block"].get<std::string>();
    const double calls = b["calls"].get<double>();
    if (name == "moe_experts") {
      EXPECT_GE(calls, 16);  // at least one span per layer and token
    } else if (name == "lm_head") {
      EXPECT_EQ(calls, 4);
    } else if (name == "attention") {
      EXPECT_EQ(calls, 4);  // layer 3 only
    } else if (name == "delta_net") {
      EXPECT_EQ(calls, 12);  // layers 0-2
    }
  }
  EXPECT_TRUE(blocks.count("moe_experts") && blocks.count("other") && blocks.count("lm_head"));
  EXPECT_NEAR(percent, 100.0, 0.1);
  EXPECT_NE(r.err.find("profile of tg4 @ d4"), std::string::npos) << r.err;

  const auto md = run_moetier("bench -m " + kModel + " -p 0 -n 0 -pg 4,2 -d 4 -r 1 -t 1");
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find(" pp4+tg2 @ d4 |"), std::string::npos) << md.out;
}

// --spec-replay: each tg test also runs as the greedy loop without drafts and once per
// (acceptance, draft length) with replayed drafts; the records say which, count the drafts,
// leave achieved_gbps null for speculative runs, and acceptance 1 accepts every draft.
TEST(CliBench, SpecReplayAddsGreedyAndSpeculativeRecords) {
  const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 12 -r 1 -t 2 --spec-replay 1,0.5 --spec-draft-n-max 1,3 -o jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;  // plain tg, greedy, 2 acceptances × 2 lengths
  const auto plain = nlohmann::json::parse(lines[0]);
  EXPECT_TRUE(plain["spec_type"].is_null());
  EXPECT_FALSE(plain["achieved_gbps"].is_null());
  const auto greedy = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(greedy["spec_type"], "none");
  EXPECT_EQ(greedy["spec_draft_max"], 0);
  EXPECT_EQ(greedy["spec_n_drafted"], 0);
  const std::vector<std::pair<double, int>> want = {{1.0, 1}, {1.0, 3}, {0.5, 1}, {0.5, 3}};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto rec = nlohmann::json::parse(lines[i + 2]);
    EXPECT_EQ(rec["spec_type"], "replay");
    EXPECT_DOUBLE_EQ(rec["spec_acceptance_target"].get<double>(), want[i].first);
    EXPECT_EQ(rec["spec_draft_max"], want[i].second);
    EXPECT_GT(rec["spec_n_drafted"].get<int64_t>(), 0) << lines[i + 2];
    EXPECT_TRUE(rec["achieved_gbps"].is_null());
    EXPECT_EQ(rec["n_gen"], 12);
    if (want[i].first == 1.0) {
      EXPECT_EQ(rec["spec_n_accepted"], rec["spec_n_drafted"]) << lines[i + 2];
      EXPECT_DOUBLE_EQ(rec["spec_acceptance"].get<double>(), 1.0);
    }
  }
  const auto md = run_moetier("bench -m " + kModel + " -p 0 -n 4 -r 1 -t 1 --spec-replay 0.8");
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find("tg4 greedy"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("tg4 spec a=0.8 k=3"), std::string::npos) << md.out;
}

// --step: records carry the step size and time per step (t/s counts every token of the 16
// steps); markdown gets the table of each size against the smallest, per block with --profile;
// spec rows get the expected and measured tokens per verify step.
TEST(CliBench, StepTestsAndTheStepCostTable) {
  const auto r = run_moetier("bench -m " + kModel + " --step 1,4 -r 1 -t 2 -o jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  for (size_t i = 0; i < 2; ++i) {
    const auto rec = nlohmann::json::parse(lines[i]);
    const int64_t n = i == 0 ? 1 : 4;
    EXPECT_EQ(rec["step_tokens"], n);
    EXPECT_EQ(rec["step_seqs"], 1);
    EXPECT_EQ(rec["n_prompt"], 0);
    EXPECT_EQ(rec["n_gen"], 16);
    const double step_ms = rec["step_ms"].get<double>();
    EXPECT_GT(step_ms, 0);
    // One repetition: t/s = 1e3·n / step_ms exactly, up to the 6 decimals step_ms is written
    // with (±5e-7 ms, a relative error of 5e-7 / step_ms) and avg_ts's own 6 decimals.
    const double ts = rec["avg_ts"].get<double>();
    EXPECT_NEAR(ts, 1e3 * static_cast<double>(n) / step_ms, ts * 6e-7 / step_ms + 1e-5);
    EXPECT_EQ(rec["achieved_gbps"].is_null(), n > 1) << lines[i];
  }
  const auto md = run_moetier("bench -m " + kModel + " --step 1,2 -d 3 -r 1 -t 1 --profile");
  ASSERT_EQ(md.rc, 0) << md.err;
  EXPECT_NE(md.out.find(" step2 @ d3 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tokens in the step | 1 | 2 |"), std::string::npos) << md.out;
  for (const char* row : {"| step |", "| delta_net |", "| delta_rule |", "| lm_head |", "| all but moe_experts |",
                          "| routed experts read per layer (pairs) |"}) {
    EXPECT_NE(md.out.find(row), std::string::npos) << row << "\n" << md.out;
  }
  // --step-seqs: S sequences in each step (t/s counts every sequence's tokens); the table
  // gets a column per sequence count, after one sequence's of the same token count.
  const auto seqs = run_moetier("bench -m " + kModel + " --step 1,2 --step-seqs 1,3 -d 2 -r 1 -t 2 -o jsonl");
  ASSERT_EQ(seqs.rc, 0) << seqs.err;
  const auto seq_lines = lines_of(seqs.out);
  ASSERT_EQ(seq_lines.size(), 4u) << seqs.out;
  const auto three = nlohmann::json::parse(seq_lines[1]);
  EXPECT_EQ(three["step_tokens"], 1);
  EXPECT_EQ(three["step_seqs"], 3);
  const double three_ts = three["avg_ts"].get<double>();
  EXPECT_NEAR(three_ts, 1e3 * 3 / three["step_ms"].get<double>(), three_ts * 1e-5);
  // Three sequences' tokens read the dense weights once: no weights-per-second figure.
  EXPECT_TRUE(three["achieved_gbps"].is_null()) << seq_lines[1];
  const auto seqs_md = run_moetier("bench -m " + kModel + " --step 1,2 --step-seqs 1,3 -d 2 -r 1 -t 2 --profile");
  ASSERT_EQ(seqs_md.rc, 0) << seqs_md.err;
  EXPECT_NE(seqs_md.out.find(" step2 x3 seqs @ d2 |"), std::string::npos) << seqs_md.out;
  EXPECT_NE(seqs_md.out.find("| tokens in the step | 1 | 2 | 3 seqs x 1 | 3 seqs x 2 |"), std::string::npos)
      << seqs_md.out;
  EXPECT_NE(seqs_md.out.find("S seqs x N: S sequences in one call"), std::string::npos) << seqs_md.out;

  const auto spec = run_moetier("bench -m " + kModel + " -p 0 -n 8 -r 1 -t 1 --spec-replay 1 --spec-draft-n-max 2");
  ASSERT_EQ(spec.rc, 0) << spec.err;
  EXPECT_NE(spec.out.find("tg8 spec a=1 k=2: "), std::string::npos) << spec.out;
  // Measured tokens per step can fall short of 3 where the token budget cuts the last draft.
  EXPECT_NE(spec.out.find("expected 3.00 tokens per verify step of 3, measured "), std::string::npos) << spec.out;
  EXPECT_NE(spec.out.find("(100% of the drafted tokens kept); a verify step cost "), std::string::npos) << spec.out;
}

// --spec-type draft-mtp: greedy baseline plus one record per draft length with the MTP head
// drafting (a synth file with an MTP block), carrying the head's time per drafted token.
TEST(CliBench, SpecTypeDraftMtpRecordsTheHeadsCost) {
  const std::string path = testing::temp_file("mtp.gguf");
  const auto synth = run_moetier("synth --preset tiny --mtp-layers 1 -q -o '" + path + "'");
  ASSERT_EQ(synth.rc, 0) << synth.err;
  const auto r = run_moetier("bench -m '" + path + "' -p 0 -n 8 -r 1 -t 2 --spec-type draft-mtp --spec-draft-n-max 1,2 -o jsonl");
  std::filesystem::remove(path);
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;  // plain tg, greedy, k = 1 and 2
  EXPECT_EQ(nlohmann::json::parse(lines[1])["spec_type"], "none");
  for (size_t i = 2; i < 4; ++i) {
    const auto rec = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(rec["spec_type"], "draft-mtp");
    EXPECT_EQ(rec["spec_draft_max"], static_cast<int>(i) - 1);
    EXPECT_TRUE(rec["spec_acceptance_target"].is_null());
    EXPECT_GT(rec["spec_n_drafted"].get<int64_t>(), 0) << lines[i];
    EXPECT_GT(rec["spec_draft_ms_per_token"].get<double>(), 0) << lines[i];
  }
  // A file without an MTP block: one clear error.
  const auto none = run_moetier("bench -m " + kModel + " -p 0 -n 4 -r 1 --spec-type draft-mtp");
  EXPECT_EQ(none.rc, 2) << none.err;
  EXPECT_NE(none.err.find("MTP"), std::string::npos) << none.err;
}

TEST(CliBench, BadInputExitsTwoWithOneLine) {
  const std::vector<std::string> bad = {"bench -m " + kModel + " --bogus", "bench -m " + kModel + " -p 1-x",
                                       "bench -m " + kModel + " -p 0 -n 0",  "bench -p 8",
                                       "bench -m " + kModel + " -o xml",     "bench -m " + kModel + " -ctk q5_1",
                                       "bench -m " + kModel + " --spec-replay 1.5",
                                       "bench -m " + kModel + " --spec-replay 0.8 --spec-draft-n-max 0",
                                       "bench -m " + kModel + " --spec-adaptive maybe",
                                       "bench -m " + kModel + " --spec-type ngram-simple",
                                       "bench -m " + kModel + " --spec-draft-n-max 2",  // without --spec-replay
                                       "bench -m " + kModel + " --interleave maybe",
                                       "bench -m " + kModel + " --chart out.jpg",
                                       "bench -m " + kModel + " --report ''"};
  for (const std::string& args : bad) {
    const auto r = run_moetier(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_EQ(lines_of(r.err).size(), 1u) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
  const auto missing = run_moetier("bench -m /nonexistent/model.gguf -p 8 -n 0 -r 1");
  EXPECT_NE(missing.rc, 0);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;
  const auto help = run_moetier("bench --help");
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("-pg"), std::string::npos);
  EXPECT_NE(help.out.find("examples:"), std::string::npos);
}

TEST(CliBench, ScaleLayersEstimateLiesBetweenMeasuredAndProportionalTime) {
  // The tiny model has 4 layers; for 8 the estimate adds the measured per-layer time once
  // more: total ≤ estimate ≤ 2·total, i.e. avg_ts / 2 ≤ estimate_ts ≤ avg_ts (r = 1, so
  // avg_ts is exactly the one sample's t/s).
  const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 4 -r 1 -t 1 --scale-layers 8 -o json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto records = nlohmann::json::parse(r.out);
  ASSERT_EQ(records.size(), 1u);
  const auto& rec = records[0];
  EXPECT_EQ(rec["estimate_n_layer"], 8);
  const double ts = rec["avg_ts"], est = rec["estimate_ts"];
  EXPECT_LE(est, ts * (1 + 1e-9));
  EXPECT_GE(est, ts / 2 * (1 - 1e-9));
  EXPECT_NE(r.err.find("ESTIMATE, not measured"), std::string::npos) << r.err;
  EXPECT_TRUE(rec["machine_read_gbps"].is_null());  // only with --membw
  const auto bad = run_moetier("bench -m " + kModel + " --scale-layers 0");
  EXPECT_EQ(bad.rc, 2);
}

// Interleaving: with two configurations (-t 1,2) the repetitions alternate by default, and
// every record carries its statistics (min, max, cv, drift), the provenance (file, size,
// SHA-256, version, date) and the memory figures (idle, peak of the test, peak - idle).
TEST(CliBench, InterleavedRecordsCarryStatisticsProvenanceAndMemory) {
  for (const std::string mode : {"", " --interleave off"}) {
    SCOPED_TRACE(mode);
    const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 2 -t 1,2 -r 3 -o jsonl" + mode);
    ASSERT_EQ(r.rc, 0) << r.err;
    const bool interleaved = mode.empty();
    // stderr: one repetition of each test per round, or each test's in a row.
    const size_t a1 = r.err.find("[1/2] tg2 t=1: repetition 1/3"), a2 = r.err.find("[1/2] tg2 t=1: repetition 2/3");
    const size_t b1 = r.err.find("[2/2] tg2 t=2: repetition 1/3"), a3 = r.err.find("[1/2] tg2 t=1: repetition 3/3");
    ASSERT_TRUE(a1 != std::string::npos && a2 != std::string::npos && b1 != std::string::npos && a3 != std::string::npos)
        << r.err;
    if (interleaved) {
      EXPECT_LT(b1, a2) << r.err;
    } else {
      EXPECT_GT(b1, a3) << r.err;
    }
    const auto lines = lines_of(r.out);
    ASSERT_EQ(lines.size(), 2u) << r.out;
    for (const std::string& line : lines) {
      const auto rec = nlohmann::json::parse(line);
      EXPECT_EQ(rec["interleaved"], interleaved);
      const auto ts = rec["samples_ts"].get<std::vector<double>>();
      ASSERT_EQ(ts.size(), 3u);
      // samples_ts has 6 significant digits
      const double lo = *std::min_element(ts.begin(), ts.end()), hi = *std::max_element(ts.begin(), ts.end());
      EXPECT_NEAR(rec["min_ts"].get<double>(), lo, 1e-5 * lo);
      EXPECT_NEAR(rec["max_ts"].get<double>(), hi, 1e-5 * hi);
      EXPECT_NEAR(rec["cv_ts"].get<double>(), rec["stddev_ts"].get<double>() / rec["avg_ts"].get<double>(), 1e-5);
      // drift of 3 samples: the last against the first (the middle one in neither half).
      EXPECT_NEAR(rec["drift_pct"].get<double>(), 100 * (ts[2] - ts[0]) / ts[0], 1e-3 * std::max(1.0, ts[2] / ts[0]));
      EXPECT_EQ(rec["model_file"], "qwen35moe-tiny-f32.gguf");
      EXPECT_EQ(rec["model_file_bytes"], static_cast<int64_t>(std::filesystem::file_size(kModelPath)));
      EXPECT_EQ(rec["model_sha256"], kModelSha256);
      EXPECT_FALSE(rec["moetier_version"].get<std::string>().empty());
      EXPECT_TRUE(std::regex_match(rec["date"].get<std::string>(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
          << rec["date"];
      const int64_t idle = rec["idle_rss_bytes"], peak = rec["peak_rss_bytes"];
      EXPECT_GT(idle, 0);
      EXPECT_GT(peak, idle);
      EXPECT_EQ(rec["rss_peak_minus_idle_bytes"].get<int64_t>(), peak - idle);
      EXPECT_TRUE(rec["peak_rss_scope"] == "test" || rec["peak_rss_scope"] == "cumulative") << rec["peak_rss_scope"];
      EXPECT_TRUE(rec["vram_source"].is_null());  // CPU only
    }
  }
}

// Users' "memory is deterministic": two identical runs give the same peak - idle RSS up
// to what differs between two processes doing the same work. That is page-granular state
// placed by address-space randomisation and thread timing: the lazily touched pages of the
// main and worker threads' stacks and of glibc's per-thread malloc arenas (tcache and arena
// headers, a few pages each), and where the heap's top falls when malloc_trim returns free
// memory. A bound of 64 pages (256 KiB) per thread plus 1 MiB for the main thread, the loader
// and libc covers that with margin (observed: ~0.2 MiB apart); a real difference in what a
// test allocates (a KV cache, a scratch buffer, the weights) is at least megabytes.
TEST(CliBench, PeakMinusIdleRssIsReproducible) {
  const std::string args = "bench -m " + kModel + " -p 0 -n 4 -r 2 -t 1 -ngl 0 -o jsonl";
  std::vector<int64_t> figures;
  for (int run = 0; run < 2; ++run) {
    const auto r = run_moetier(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    const auto rec = nlohmann::json::parse(lines_of(r.out).at(0));
    if (rec["peak_rss_scope"] != "test") GTEST_SKIP() << "VmHWM cannot be reset here (/proc/self/clear_refs)";
    figures.push_back(rec["rss_peak_minus_idle_bytes"].get<int64_t>());
  }
  const int64_t threads = 1;
  const int64_t tolerance = (int64_t{1} << 20) + threads * (int64_t{256} << 10);
  EXPECT_LE(std::abs(figures[0] - figures[1]), tolerance) << figures[0] << " vs " << figures[1];
  // And the figure holds at least the weights the test reads (the whole file is mapped or moved).
  EXPECT_GT(figures[0], static_cast<int64_t>(std::filesystem::file_size(kModelPath)) / 2);
}

// -ctk/-ctv take every KV cache type the engine has (f32, f16, q8_0, q4_0), at depth; the
// records say which; --chart writes an SVG with one line per test kind and cache type
// against the depth, and --report a self-contained HTML page that opens in headless Chromium
// without console errors (tests/node/bench_report_test.mjs; skipped without Node.js and
// puppeteer-core unless MOETIER_REQUIRE_NODE/MOETIER_REQUIRE_CHROMIUM are set, as in scripts/test.sh).
TEST(CliBench, KvCacheTypesChartAndReport) {
  const std::string dir = testing::temp_file("report");
  const std::string svg = testing::temp_file("chart.svg");
  const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 2 -d 0,64 -ctk f16,q8_0,q4_0 -ctv q8_0 -r 2 -t 1 -o json"
                             " --chart '" + svg + "' --report '" + dir + "'");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.size(), 6u);
  const std::vector<std::string> types = {"f16", "f16", "q8_0", "q8_0", "q4_0", "q4_0"};
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_EQ(doc[i]["type_k"], types[i]);
    EXPECT_EQ(doc[i]["type_v"], "q8_0");
    EXPECT_EQ(doc[i]["n_depth"], i % 2 == 0 ? 0 : 64);
    EXPECT_GT(doc[i]["rss_peak_minus_idle_bytes"].get<int64_t>(), 0);
  }
  // Six configurations differing in two knobs: no comparison unless --compare.
  EXPECT_EQ(r.err.find("moetier bench: compare"), std::string::npos) << r.err;

  // The chart: x = n_depth, one speed series per cache type (a single test kind), two
  // points each, and the same series of peak - idle RSS in the memory panel.
  const std::string text = testing::slurp_file(svg);
  std::filesystem::remove(svg);
  ASSERT_EQ(text.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << text.substr(0, 200);
  const std::regex series(R"re(<g class="series" data-name="([^"]*)")re");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), series); it != std::sregex_iterator(); ++it) {
    names.push_back((*it)[1]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"tg2, type_k=f16", "tg2, type_k=q8_0", "tg2, type_k=q4_0", "tg2, type_k=f16 RSS",
                                             "tg2, type_k=q8_0 RSS", "tg2, type_k=q4_0 RSS"}));
  size_t circles = 0;
  for (size_t pos = 0; (pos = text.find("<circle class=\"point\"", pos)) != std::string::npos; ++pos) ++circles;
  EXPECT_EQ(circles, 12u);

  const std::string html = testing::slurp_file(dir + "/index.html");
  ASSERT_FALSE(html.empty());
  // Self-contained: the only URL is the SVG namespace.
  EXPECT_EQ(std::regex_replace(html, std::regex("http://www.w3.org/2000/svg"), "").find("://"), std::string::npos);
  EXPECT_NE(html.find(kModelSha256), std::string::npos);

  const std::filesystem::path node_dir = std::filesystem::path(MOETIER_SOURCE_DIR) / "tests" / "node";
  const bool have_node = std::system("node --version >/dev/null 2>&1") == 0 &&
                         std::filesystem::exists(node_dir / "node_modules" / "puppeteer-core" / "package.json");
  std::string chromium = std::getenv("MOETIER_CHROMIUM") ? std::getenv("MOETIER_CHROMIUM") : "";
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (chromium.empty() && std::filesystem::exists(p)) chromium = p;
  }
  if (!have_node || chromium.empty()) {
    std::filesystem::remove_all(dir);
    if (std::getenv("MOETIER_REQUIRE_NODE") || std::getenv("MOETIER_REQUIRE_CHROMIUM")) {
      FAIL() << "Node.js, puppeteer-core (cd tests/node && npm ci) or Chromium is missing";
    }
    GTEST_SKIP() << "Node.js, tests/node/node_modules or Chromium missing; scripts/test.sh installs them";
  }
  const std::string out = testing::temp_file("report.out");
  const std::string cmd = fmt::format(
      "cd '{}' && CHROMIUM_PATH='{}' timeout 120 node bench_report_test.mjs '{}/index.html' 6 'tg2, type_k=q4_0' "
      "'tg2, type_k=f16 RSS' >'{}' 2>&1",
      node_dir.string(), chromium, dir, out);
  const int rc = std::system(cmd.c_str());
  const std::string log = testing::slurp_file(out);
  std::filesystem::remove(out);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("all checks passed"), std::string::npos) << log;
}

// --chart FILE.png converts with rsvg-convert; where it is missing, that is said before
// anything runs (exit status 2, one line naming the Debian package).
TEST(CliBench, PngChartNeedsRsvgConvert) {
  const std::string png = testing::temp_file("chart.png");
  const bool have = std::system("command -v rsvg-convert >/dev/null 2>&1") == 0;
  const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 2 -r 1 -t 1 --chart '" + png + "'");
  if (!have) {
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_NE(r.err.find("librsvg2-bin"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
    return;
  }
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string bytes = testing::slurp_file(png);
  std::filesystem::remove(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

// Other processes' load: this test process keeps two spinning threads per usable CPU busy
// while bench runs one thread, so bench's summary must report well over half the CPUs busy
// elsewhere and warn, on stderr and under the md table, that the test was oversubscribed.
TEST(CliBench, OtherProcessesLoadIsReportedAndOversubscriptionWarned) {
  const int n_cpus = static_cast<int>(platform::usable_cpus().size());
  ASSERT_GT(n_cpus, 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < 2 * n_cpus; ++i) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  // ~1.5 s of timed repetitions at ~2,000 t/s: over min_cpu_sample_seconds on 2 CPUs.
  const auto r = run_moetier("bench -m " + kModel + " -p 0 -n 1024 -r 3 -t 1 -o md");
  stop.store(true);
  for (auto& t : spinners) t.join();
  ASSERT_EQ(r.rc, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("other processes ([0-9.]+) CPUs busy"))) << r.err;
  EXPECT_GT(std::stod(m[1].str()), 0.5 * n_cpus) << r.err;
  EXPECT_NE(r.err.find("warning: other processes kept"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("\nwarning: other processes kept"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("or use -t 1 (the free CPUs)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace moetier
