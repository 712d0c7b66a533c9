// `moetier inspect`, run as a user would (the built binary, MOETIER_BINARY): the census of
// every reference model against ../shared/ref/manifest.json, counts derived from the
// models' configurations, the plan, and clean failures (exit 2, one line) on bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/writer.h"
#include "support/ref_data.h"

namespace moetier {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct RunResult {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& stem) {
  return (fs::temp_directory_path() / fmt::format("moetier_inspect_test_{}_{}", ::getpid(), stem)).string();
}

// Runs `moetier inspect <args>`; args are passed through the shell, so keep them simple.
RunResult run_inspect(const std::string& args) {
  const std::string out = temp_path("stdout"), err = temp_path("stderr");
  const std::string cmd = fmt::format("'{}' inspect {} >'{}' 2>'{}'", MOETIER_BINARY, args, out, err);
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

const json& manifest() {
  static const json m = json::parse(slurp(std::string(MOETIER_REF_DIR) + "/manifest.json"));
  return m;
}

std::string model_path(const std::string& name) { return testing::ref_model_path(name); }

json inspect_json(const std::string& args) {
  const RunResult r = run_inspect(args);
  EXPECT_EQ(r.rc, 0) << r.err;
  if (r.rc != 0) return json::object();
  return json::parse(r.out);
}

class InspectRefModel : public ::testing::TestWithParam<std::string> {};

// Census per type equals the manifest's tensor_types exactly (count and bytes), and the
// totals add up.
TEST_P(InspectRefModel, CensusMatchesManifest) {
  const std::string name = GetParam();
  const json& want = manifest()["models"][name];
  const json j = inspect_json(fmt::format("'{}' --json", model_path(name)));
  ASSERT_TRUE(j.contains("census"));
  std::map<std::string, std::pair<int64_t, int64_t>> got;
  int64_t params = 0, tensors = 0;
  for (const auto& row : j["census"]) {
    got[row["type"]] = {row["n_tensors"].get<int64_t>(), row["n_bytes"].get<int64_t>()};
    params += row["n_params"].get<int64_t>();
    tensors += row["n_tensors"].get<int64_t>();
  }
  std::map<std::string, std::pair<int64_t, int64_t>> expected;
  for (const auto& [type, v] : want["tensor_types"].items()) {
    expected[type] = {v["count"].get<int64_t>(), v["bytes"].get<int64_t>()};
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(j["n_params_total"].get<int64_t>(), params);
  EXPECT_EQ(tensors, want["metadata"]["GGUF.tensor_count"].get<int64_t>());
  EXPECT_EQ(j["file_size"].get<int64_t>(), want["bytes"].get<int64_t>());
  EXPECT_EQ(j["arch"], want["config"]["arch"]);
  EXPECT_EQ(j["name"], want["config"]["name"]);
  EXPECT_EQ(j["file_type_declared"].get<int64_t>(), want["metadata"]["general.file_type"].get<int64_t>());
  EXPECT_TRUE(j["file_type_name"].is_string());
  EXPECT_TRUE(j["arch_supported"].get<bool>());
  EXPECT_TRUE(j["notes"].is_array());
}

// Active parameters and expert bytes from the generator config: each layer holds
// 3 * n_embd * n_ff_exp * n_expert routed-expert parameters, of which a token uses
// n_expert_used / n_expert.
TEST_P(InspectRefModel, ActiveParamsFollowFromTheConfig) {
  const std::string name = GetParam();
  const json& cfg = manifest()["models"][name]["config"];
  const json j = inspect_json(fmt::format("'{}' --json", model_path(name)));
  ASSERT_TRUE(j.contains("n_params_active"));
  const int64_t n_layer = cfg["n_layer"], n_embd = cfg["n_embd"], n_ff = cfg["n_ff_exp"];
  const int64_t n_expert = cfg["n_expert"], used = cfg["n_expert_used"];
  const int64_t expert_params = n_layer * 3 * n_embd * n_ff * n_expert;
  EXPECT_EQ(j["expert_params"].get<int64_t>(), expert_params);
  EXPECT_EQ(j["n_params_active"].get<int64_t>(),
            j["n_params_total"].get<int64_t>() - expert_params + expert_params / n_expert * used);
  // Every routed expert tensor holds n_expert equal slices.
  EXPECT_EQ(j["expert_bytes_per_token"].get<int64_t>() * n_expert, j["expert_bytes_total"].get<int64_t>() * used);
  EXPECT_EQ(j["expert_bytes_total"].get<int64_t>() + j["non_expert_bytes"].get<int64_t>(),
            j["tensor_bytes_total"].get<int64_t>());
  EXPECT_EQ(j["layers"]["total"].get<int64_t>(), n_layer);
}

INSTANTIATE_TEST_SUITE_P(All, InspectRefModel,
                         ::testing::Values("qwen35moe-tiny-f32", "qwen35moe-tiny-mixed", "qwen35moe-small-q4_k_m",
                                           "qwen35moe-small-ud_mix", "qwen35moe-small-iq4_xs", "qwen3moe-tiny-f32",
                                           "qwen3moe-small-q4_k_m"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

TEST(Inspect, UdMixExpertBytesAndDeclaredTypeMismatch) {
  // ud_mix: routed gate/up are exactly the 16 Q4_K tensors, routed down the 8 Q5_K ones
  // (ref README), so expert bytes = 9,437,184 + 5,767,168 = 15,204,352; a token uses 4 of
  // 16 experts: 15,204,352 / 4 = 3,801,088.
  const json j = inspect_json(fmt::format("'{}' --json", model_path("qwen35moe-small-ud_mix")));
  EXPECT_EQ(j["expert_bytes_total"].get<int64_t>(), 15204352);
  EXPECT_EQ(j["expert_bytes_per_token"].get<int64_t>(), 3801088);
  EXPECT_EQ(j["file_type_name"], "MOSTLY_Q4_K_M");
  EXPECT_FALSE(j["file_type_matches_content"].get<bool>());  // Q4_K is 43% of the bytes
  const json q4km = inspect_json(fmt::format("'{}' --json", model_path("qwen35moe-small-q4_k_m")));
  EXPECT_TRUE(q4km["file_type_matches_content"].get<bool>());

  const RunResult text = run_inspect(fmt::format("'{}'", model_path("qwen35moe-small-ud_mix")));
  EXPECT_EQ(text.rc, 0);
  EXPECT_NE(text.out.find("declared MOSTLY_Q4_K_M, but Q4_K holds only 10.7% of tensors"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("6 Gated DeltaNet + 2 full attention"), std::string::npos) << text.out;
}

TEST(Inspect, Sha256MatchesManifest) {
  const json j = inspect_json(fmt::format("'{}' --json --sha256 -q", model_path("qwen35moe-tiny-mixed")));
  EXPECT_EQ(j["sha256"], manifest()["models"]["qwen35moe-tiny-mixed"]["sha256"]);
}

TEST(Inspect, PlanJson) {
  // small qwen35moe, -c 4096 f16: 2 attention layers * 4096 cells * 2 KV heads *
  // (128 * 2 B + 128 * 2 B) = 8,388,608 B. State per sequence: 6 DeltaNet layers * 143,360 B
  // (see arch_test) = 860,160 B; -np 2 doubles it.
  const json j = inspect_json(fmt::format("'{}' --json --plan -c 4096 -np 2 -ngl all -cmoe --vram-budget 64",
                                          model_path("qwen35moe-small-q4_k_m")));
  ASSERT_TRUE(j.contains("plan"));
  const json& plan = j["plan"];
  EXPECT_EQ(plan["kv_bytes"].get<int64_t>(), 8388608);
  EXPECT_EQ(plan["state_bytes_per_seq"].get<int64_t>(), 860160);
  EXPECT_EQ(plan["state_bytes"].get<int64_t>(), 2 * 860160);
  ASSERT_EQ(plan["devices"].size(), 2u);
  EXPECT_EQ(plan["devices"][0]["name"], "CPU");
  EXPECT_EQ(plan["devices"][1]["name"], "GPU0");
  for (const char* field : {"weight_bytes", "kv_bytes", "state_bytes", "scratch_bytes", "budget_bytes"}) {
    EXPECT_TRUE(plan["devices"][0].contains(field)) << field;
  }
  EXPECT_EQ(plan["devices"][1]["budget_bytes"].get<int64_t>(), 64 << 20);
  EXPECT_EQ(plan["devices"][1]["kv_bytes"].get<int64_t>(), 8388608);
  // CPU holds the routed experts and token_embd, nothing else.
  EXPECT_EQ(plan["devices"][0]["weight_bytes"].get<int64_t>() + plan["devices"][1]["weight_bytes"].get<int64_t>(),
            j["tensor_bytes_total"].get<int64_t>());
  ASSERT_EQ(plan["layers"].size(), 8u);
  for (const auto& l : plan["layers"]) {
    EXPECT_EQ(l["dense"], "GPU0");
    EXPECT_EQ(l["experts"], "CPU");
    EXPECT_EQ(l["kind"], (l["layer"].get<int>() + 1) % 4 == 0 ? "attention" : "deltanet");
  }
  EXPECT_TRUE(plan["fits"].get<bool>());
  EXPECT_TRUE(plan["gpu_free_bytes"].is_number());
}

TEST(Inspect, FitJsonCarriesTheChosenFlags) {
  // small qwen35moe, -c 4096: the dense part, KV, state and scratch take 24.1 MiB of the GPU
  // (PlanJson's figures), each block's routed experts ~1.8 MiB; a 30 MiB budget without a
  // margin holds 3 more blocks' experts: -ngl 9 (8 blocks + output) -ncmoe 5.
  const json j = inspect_json(fmt::format("'{}' --json -c 4096 --fit on --vram-budget 30 --fit-margin 0",
                                          model_path("qwen35moe-small-q4_k_m")));
  ASSERT_TRUE(j.contains("fit")) << j.dump();
  const json& fit = j["fit"];
  EXPECT_EQ(fit["flags"], "-ngl 9 -ncmoe 5");
  EXPECT_EQ(fit["n_gpu_layers"].get<int64_t>(), 9);
  EXPECT_EQ(fit["n_cpu_moe"].get<int64_t>(), 5);
  EXPECT_EQ(fit["expert_layers_on_gpu"].get<int64_t>(), 3);
  for (const auto& l : j["plan"]["layers"]) EXPECT_EQ(l["experts"], l["layer"].get<int>() < 5 ? "CPU" : "GPU0");
  EXPECT_TRUE(j["plan"]["fits"].get<bool>());
}

TEST(Inspect, PlanFlagsImplyPlanAndTextShowsTable) {
  const RunResult r = run_inspect(fmt::format("'{}' -ngl 3 -ncmoe 1", model_path("qwen3moe-small-q4_k_m")));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("memory plan"), std::string::npos);
  EXPECT_NE(r.out.find("GPU0"), std::string::npos);
  EXPECT_EQ(r.out.find("no GPU backend yet"), std::string::npos) << "the GPU backend exists now";
}

// --- failures: exit status 2, one line on stderr, nothing on stdout ---------------------

void expect_clean_failure(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(InspectErrors, MissingFile) {
  expect_clean_failure(run_inspect("/nonexistent/model.gguf"), "/nonexistent/model.gguf");
}

TEST(InspectErrors, NotAGgufFile) {
  const std::string path = temp_path("not_gguf.bin");
  std::ofstream(path) << "this is certainly not a GGUF file, just some text\n";
  expect_clean_failure(run_inspect(fmt::format("'{}'", path)), "GGUF");
  fs::remove(path);
}

TEST(InspectErrors, UnknownFlagAndBadValues) {
  const std::string m = model_path("qwen3moe-tiny-f32");
  expect_clean_failure(run_inspect(fmt::format("'{}' --bogus", m)), "--bogus");
  expect_clean_failure(run_inspect(fmt::format("'{}' -ctk q9", m)), "-ctk");
  expect_clean_failure(run_inspect(fmt::format("'{}' -ngl lots", m)), "-ngl");
  expect_clean_failure(run_inspect(fmt::format("'{}' --vram-budget -5", m)), "--vram-budget");
  expect_clean_failure(run_inspect(""), "MODEL");
}

// A valid GGUF of an architecture moetier does not know: identity and census, no crash;
// --plan is refused.
TEST(InspectErrors, UnknownArchitecture) {
  const std::string path = temp_path("llama.gguf");
  {
    auto w = gguf::Writer::create(path);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    (*w)->set("general.architecture", gguf::Value::make_string("llama"));
    (*w)->set("general.file_type", gguf::Value::make_u32(0));
    ASSERT_TRUE((*w)->add_tensor("token_embd.weight", DType::F32, {8, 4}).is_ok());
    ASSERT_TRUE((*w)->write_header().is_ok());
    const std::vector<float> data(32, 0.5f);
    ASSERT_TRUE((*w)->write_tensor_data(data.data(), data.size() * sizeof(float)).is_ok());
    ASSERT_TRUE((*w)->finish().is_ok());
  }
  const json j = inspect_json(fmt::format("'{}' --json", path));
  EXPECT_EQ(j["arch"], "llama");
  EXPECT_FALSE(j["arch_supported"].get<bool>());
  ASSERT_EQ(j["census"].size(), 1u);
  EXPECT_EQ(j["census"][0]["n_params"].get<int64_t>(), 32);
  EXPECT_EQ(j["census"][0]["n_bytes"].get<int64_t>(), 128);
  EXPECT_TRUE(j["n_params_active"].is_null());
  EXPECT_FALSE(j["notes"].empty());
  expect_clean_failure(run_inspect(fmt::format("'{}' --plan", path)), "not supported");
  fs::remove(path);
}

}  // namespace
}  // namespace moetier
