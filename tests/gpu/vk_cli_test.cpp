// The command line and the server with GPU layers (lavapipe in CI): `moetier run`, `bench`
// and `serve` driven as a user drives them, compared with their CPU runs. These tests start
// `moetier` through a POSIX shell (support/cli.h, support/server_process.h), so the Windows
// build leaves this file out (tests/CMakeLists.txt); the kernels and whole models are
// checked there by the other GPU tests, in-process.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/cli.h"
#include "support/gpu.h"
#include "support/http_client.h"
#include "support/ref_data.h"
#include "support/server_process.h"

#if MOETIER_HAVE_VULKAN
namespace moetier {
namespace {

const std::string kRef = testing::kRefDir;

// The command line a user runs: `moetier run` with the users' placement on the first Vulkan
// device prints the plan, uploads, and generates llama.cpp's greedy text (F32 model: all 32
// tokens match, README section 6), the same as the CPU path.
TEST(GpuCli, RunWithDenseOnGpuExpertsOnCpuGeneratesTheCpuText) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string model = kRef + "/models/qwen35moe-tiny-f32.gguf";
  const std::string common = "run -m '" + model + "' -f '" + kRef + "/prompts/p2_short.txt' -n 32 --temp 0 --ignore-eos -t 2 -ctk f32 -ctv f32";
  const auto cpu = testing::run_moetier(common + " -ngl 0");
  ASSERT_EQ(cpu.rc, 0) << cpu.err;
  const auto gpu = testing::run_moetier(common + " -dev 0 -ngl 99 -ncmoe 40");
  ASSERT_EQ(gpu.rc, 0) << gpu.err;
  EXPECT_EQ(gpu.out, cpu.out);
  EXPECT_NE(gpu.err.find("memory plan"), std::string::npos) << gpu.err;
  EXPECT_NE(gpu.err.find("GPU0"), std::string::npos) << gpu.err;
  EXPECT_NE(gpu.err.find("uploading to the GPU"), std::string::npos) << gpu.err;
  const auto all = testing::run_moetier(common + " -dev 0 -ngl all");
  ASSERT_EQ(all.rc, 0) << all.err;
  EXPECT_EQ(all.out, cpu.out);
  // Quantized KV caches (-ctk q8_0 -ctv q4_0): the GPU stores the CPU's blocks.
  const std::string qkv = " -ctk q8_0 -ctv q4_0";
  const auto cpu_q = testing::run_moetier("run -m '" + model + "' -f '" + kRef + "/prompts/p2_short.txt' -n 32 --temp 0 --ignore-eos -t 2 -ngl 0" + qkv);
  const auto gpu_q = testing::run_moetier("run -m '" + model + "' -f '" + kRef + "/prompts/p2_short.txt' -n 32 --temp 0 --ignore-eos -t 2 -dev 0 -ngl all" + qkv);
  ASSERT_EQ(cpu_q.rc, 0) << cpu_q.err;
  ASSERT_EQ(gpu_q.rc, 0) << gpu_q.err;
  EXPECT_EQ(gpu_q.out, cpu_q.out);
  // A device index past the last one: a clear message, and the CPU does the work.
  const auto bad = testing::run_moetier(common + " -dev 9 -ngl all");
  ASSERT_EQ(bad.rc, 0) << bad.err;
  EXPECT_EQ(bad.out, cpu.out);
  EXPECT_NE(bad.err.find("-dev 9"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("everything runs on the CPU"), std::string::npos) << bad.err;
  // --vram-budget smaller than the model's GPU part: the allocation is refused, CPU fallback.
  const auto tiny = testing::run_moetier(common + " -dev 0 -ngl all --vram-budget 1");
  ASSERT_EQ(tiny.rc, 0) << tiny.err;
  EXPECT_EQ(tiny.out, cpu.out);
  EXPECT_NE(tiny.err.find("running everything on the CPU"), std::string::npos) << tiny.err;
  const auto list = testing::run_moetier("run --list-devices");
  EXPECT_EQ(list.rc, 0);
  EXPECT_NE(list.out.find("0: "), std::string::npos) << list.out;
  const auto bad_ot = testing::run_moetier(common + " -ot 'exps=TPU'");
  EXPECT_EQ(bad_ot.rc, 2);
  EXPECT_NE(bad_ot.err.find("-ot"), std::string::npos) << bad_ot.err;
}

// bench with GPU layers: the backend column says Vulkan, --profile adds the GPU census
// (json and stderr), --gpu-kernels picks the kernel set (fast mat-vecs, or the exact matmul),
// and a bad kernel-set name is bad usage.
TEST(GpuCli, BenchReportsTheBackendAndTheCensus) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string model = kRef + "/models/qwen35moe-small-q4_k_m.gguf";
  for (const std::string kernels : {"fast", "exact"}) {
    SCOPED_TRACE(kernels);
    const auto r = testing::run_moetier("bench -m '" + model + "' -dev 0 -ngl 99 -p 16 -n 2 -r 1 -t 2 --profile -o jsonl " +
                                        "--gpu-kernels " + kernels);
    ASSERT_EQ(r.rc, 0) << r.err;
    size_t records = 0;
    for (size_t start = 0; start < r.out.size();) {
      const size_t end = r.out.find('\n', start);
      const auto j = nlohmann::json::parse(r.out.substr(start, end - start));
      start = end == std::string::npos ? r.out.size() : end + 1;
      ++records;
      EXPECT_EQ(j["backends"], "Vulkan");
      EXPECT_NE(j["gpu_backend"].get<std::string>().find(kernels + " kernels"), std::string::npos) << j["gpu_backend"];
      const auto& c = j["gpu_census"];
      ASSERT_TRUE(c.is_object()) << j.dump();
      EXPECT_GT(c["per_token"]["dispatches"].get<double>(), 0.0);
      EXPECT_GT(c["per_token"]["submits"].get<double>(), 0.0);
      EXPECT_GT(c["per_token"]["weight_bytes"].get<double>(), 0.0);
      bool matvec = false, matmul = false;
      for (const auto& op : c["ops"]) {
        matvec = matvec || op["shader"].get<std::string>().rfind("matvec_", 0) == 0;
        matmul = matmul || op["shader"].get<std::string>().rfind("matmul_", 0) == 0;
      }
      EXPECT_EQ(matvec, kernels == "fast");
      EXPECT_EQ(matmul, kernels == "exact");
    }
    EXPECT_EQ(records, 2u);  // pp16 and tg2
    EXPECT_NE(r.err.find("GPU census of tg2"), std::string::npos) << r.err;
  }
  const auto bad = testing::run_moetier("bench -m '" + model + "' -dev 0 -ngl 99 --gpu-kernels fastest");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--gpu-kernels"), std::string::npos) << bad.err;
  const auto bad_run = testing::run_moetier("run -m '" + model + "' -p hi -n 1 --gpu-kernels slow");
  EXPECT_EQ(bad_run.rc, 2);
  EXPECT_NE(bad_run.err.find("--gpu-kernels"), std::string::npos) << bad_run.err;
}

// bench's VRAM figure (peak - idle): from the driver's budget where it reports one, else
// from moetier's own allocations, which are a function of the placement and the test alone,
// so two identical runs give the same number of bytes (lavapipe reports no budget: the
// allocator's figure, compared exactly; a driver's figure includes other processes and is
// only checked to be there).
// The VRAM expert cache as a user meets it: the load says how big it is, `run` gives the CPU's
// greedy text (the F32 model's arithmetic differs only in summation order) and says what share
// of the pairs the GPU computed; `bench` records it; `inspect --plan` shows the slots.
TEST(GpuCli, GpuExpertCacheIsReportedAndKeepsTheText) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string model = kRef + "/models/qwen35moe-tiny-f32.gguf";
  const std::string common = "run -m '" + model + "' -f '" + kRef + "/prompts/p2_short.txt' -n 32 --temp 0 --ignore-eos -t 2 -ctk f32 -ctv f32";
  const auto cpu = testing::run_moetier(common + " -ngl 0");
  ASSERT_EQ(cpu.rc, 0) << cpu.err;
  const auto cached = testing::run_moetier(common + " -dev 0 -ngl all -cmoe --gpu-expert-cache 2");
  ASSERT_EQ(cached.rc, 0) << cached.err;
  EXPECT_EQ(cached.out, cpu.out);
  EXPECT_NE(cached.err.find("VRAM expert cache: 2 of 8 routed experts per layer"), std::string::npos) << cached.err;
  EXPECT_NE(cached.err.find("of the routed pairs computed on the GPU"), std::string::npos) << cached.err;
  // A software device's memory is system RAM: no cache unless asked for.
  const auto plain = testing::run_moetier(common + " -dev 0 -ngl all -cmoe");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_EQ(plain.err.find("VRAM expert cache"), std::string::npos) << plain.err;
  const auto bad = testing::run_moetier(common + " -dev 0 -ngl all -cmoe --gpu-expert-cache -5");
  EXPECT_EQ(bad.rc, 2) << bad.err;
  const auto bench = testing::run_moetier("bench -m '" + model + "' -dev 0 -ngl 99 -ncmoe 99 --gpu-expert-cache 2 -p 0 -n 16 "
                                          "-r 1 -t 2 -o jsonl");
  ASSERT_EQ(bench.rc, 0) << bench.err;
  const auto row = nlohmann::json::parse(bench.out.substr(0, bench.out.find('\n')));
  ASSERT_TRUE(row["expert_gpu_hit_rate"].is_number()) << bench.out;
  EXPECT_GT(row["expert_gpu_hit_rate"].get<double>(), 0.0);
  EXPECT_LT(row["expert_gpu_hit_rate"].get<double>(), 1.0);
  EXPECT_TRUE(row["expert_gpu_copies_per_token"].is_number()) << bench.out;
}

TEST(GpuCli, BenchVramPeakMinusIdleIsReproducible) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string model = kRef + "/models/qwen35moe-tiny-f32.gguf";
  std::vector<nlohmann::json> records;
  for (int run = 0; run < 2; ++run) {
    const auto r = testing::run_moetier("bench -m '" + model + "' -dev 0 -ngl 99 -p 0 -n 2 -d 8 -r 1 -t 2 -o jsonl");
    ASSERT_EQ(r.rc, 0) << r.err;
    records.push_back(nlohmann::json::parse(r.out.substr(0, r.out.find('\n'))));
  }
  for (const auto& j : records) {
    EXPECT_EQ(j["backends"], "Vulkan");
    ASSERT_TRUE(j["vram_source"] == "allocator" || j["vram_source"] == "driver") << j.dump();
    EXPECT_GT(j["vram_peak_minus_idle_bytes"].get<int64_t>(), 0);
    EXPECT_FALSE(j["gpu_info"].get<std::string>().empty());
  }
  EXPECT_EQ(records[0]["vram_source"], records[1]["vram_source"]);
  if (records[0]["vram_source"] == "allocator") {
    const int64_t sum = records[0]["gpu_weight_bytes"].get<int64_t>() + records[0]["gpu_kv_bytes"].get<int64_t>() +
                        records[0]["gpu_state_bytes"].get<int64_t>() + records[0]["gpu_scratch_bytes"].get<int64_t>();
    EXPECT_EQ(records[0]["vram_peak_minus_idle_bytes"].get<int64_t>(), sum);
    EXPECT_EQ(records[0]["vram_peak_minus_idle_bytes"], records[1]["vram_peak_minus_idle_bytes"]);
  }
}

TEST(GpuCli, ServeWithGpuLayersAnswersLikeTheCpuServer) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string model = kRef + "/models/qwen35moe-small-ud_mix.gguf";
  const auto cpu = testing::run_moetier("run -m '" + model + "' -p 'The river' -n 12 --temp 0 -t 2");
  ASSERT_EQ(cpu.rc, 0) << cpu.err;
  testing::ServerProcess server({"-m", model, "-t", "2", "-dev", "0", "-ngl", "all", "-cmoe", "-np", "2"});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  auto r = testing::post_json(c, "/v1/completions", {{"prompt", "The river"}, {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  // Quantized model: GPU and CPU agree to the noise floor; the first greedy tokens of this
  // prompt have wide margins, so the text is the same.
  EXPECT_EQ(r.json["choices"][0]["text"].get<std::string>(), cpu.out.substr(0, cpu.out.size() - 1));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Slot save / erase / restore through the server with every layer on the GPU: the restored
// slot serves the same prompt from its cache and gives the same greedy text.
TEST(GpuCli, SlotSaveRestoreWithTheStateOnTheGpu) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string dir = testing::temp_file("gpu-slots");
  testing::ServerProcess server({"-m", kRef + "/models/qwen3moe-tiny-f32.gguf", "-t", "2", "-dev", "0", "-ngl", "all",
                                 "--slot-save-path", dir});
  ASSERT_TRUE(server.ready()) << server.log();
  auto c = server.client();
  const nlohmann::json req = {{"prompt", "The slot keeps this"}, {"n_predict", 4}, {"temperature", 0}, {"id_slot", 0}};
  auto r = testing::post_json(c, "/completion", req);
  ASSERT_EQ(r.status, 200) << r.body;
  auto save = testing::post_json(c, "/slots/0?action=save", {{"filename", "gpu.bin"}});
  ASSERT_EQ(save.status, 200) << save.body;
  ASSERT_EQ(testing::post_raw(c, "/slots/0?action=erase", "").status, 200);
  auto restore = testing::post_json(c, "/slots/0?action=restore", {{"filename", "gpu.bin"}});
  ASSERT_EQ(restore.status, 200) << restore.body;
  EXPECT_EQ(restore.json["n_restored"], save.json["n_saved"]);
  auto again = testing::post_json(c, "/completion", req);
  EXPECT_EQ(again.json["content"], r.json["content"]);
  EXPECT_GT(again.json["timings"]["cache_n"].get<int64_t>(), 0) << again.body;
  EXPECT_EQ(server.stop(), 0) << server.log();
  std::filesystem::remove_all(dir);
}

// -ngld: the draft model's layers on the model's GPU (lavapipe here); the text is the plain
// run's, since drafts only decide what is verified.
TEST(GpuSpeculative, DraftModelLayersOnTheGpu) {
  GPU_OR_SKIP(probe);
  probe.reset();
  const std::string models = kRef + "/models/";
  const std::string base = fmt::format("run -m '{}qwen35moe-tiny-f32.gguf' -p 'Once upon a time' -n 12 --temp 0 -t 2 "
                                       "-dev 0 -ngl 99 --cpu-moe --gpu-kernels exact",
                                       models);
  const auto plain = testing::run_moetier(base);
  const auto spec = testing::run_moetier(base + fmt::format(" -md '{}qwen35moe-tiny-mixed.gguf' -ngld 99", models));
  ASSERT_EQ(plain.rc, 0) << plain.err;
  ASSERT_EQ(spec.rc, 0) << spec.err;
  EXPECT_EQ(spec.out, plain.out);
  EXPECT_NE(spec.err.find("speculative (draft-simple)"), std::string::npos) << spec.err;
  EXPECT_NE(spec.err.find("draft model: 5 of 5 layers on the GPU"), std::string::npos) << spec.err;
}

}  // namespace
}  // namespace moetier
#endif
