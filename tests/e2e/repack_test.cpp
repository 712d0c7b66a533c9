// Repacking the CPU's weights at load (engine/repack.h, cpu/interleave.h): the interleaved
// routed experts and dense matrices (attention, DeltaNet, shared expert, LM head) give the
// file layout's logits bit for bit (the x8 tile kernels are bit-identical to the scalar
// reference, as the row kernels are), prompt and decode alike; only weights in memory the
// process owns are repacked; GPU layers that may stream their experts keep the file's
// layout, and a GPU layer's dense matrices always do; the commands say what was done and
// -nr turns it off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "cpu/dot.h"
#include "engine/repack.h"
#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

namespace moetier {
namespace {

using moetier::testing::run_moetier;

bool have_x8_kernels() {
  const cpu::DotKernel* k = cpu::best_dot_kernel(DType::Q4_K, cpu_features());
  return k != nullptr && k->tile_x8 != nullptr;
}

std::unique_ptr<gguf::ModelFile> open_read(const std::string& path) {
  auto f = gguf::ModelFile::open(path, {.mode = gguf::LoadMode::kRead, .progress = false, .verbose = false});
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return f ? std::move(f).value() : nullptr;
}

std::vector<std::string> experts_of(const gguf::ModelFile& f) {
  auto hp = read_hparams(f.header());
  EXPECT_TRUE(hp.is_ok());
  return hp ? routed_expert_tensors(f.header(), *hp) : std::vector<std::string>{};
}

// What the loader repacks with every tensor on the CPU: routed experts and dense matrices.
std::vector<std::string> all_candidates(const gguf::GgufFile& header) {
  auto hp = read_hparams(header);
  EXPECT_TRUE(hp.is_ok());
  if (!hp) return {};
  PlacementDecision d;
  d.plan.tensor_devices.assign(header.tensors.size(), kCpuDevice);
  return repack_candidates(header, *hp, d);
}

// All positions' logits of a prompt, then the logits of 4 decoded tokens one at a time.
std::vector<float> prompt_and_decode_logits(gguf::ModelFile& file, const std::vector<int32_t>& tokens) {
  auto model = load_model(file, {.n_ubatch = 512});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (!model) return {};
  auto seq = (*model)->new_sequence({.n_ctx = static_cast<int64_t>(tokens.size()) + 8});
  EXPECT_TRUE(seq.is_ok());
  ThreadPool pool(2);
  std::vector<float> all, step;
  const Status st = (*model)->forward(tokens, *seq, {.all_logits = true}, all, pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  for (size_t i = 0; i < 4 && i < tokens.size(); ++i) {  // the prompt's first tokens again, one at a time
    const int32_t token[] = {tokens[i]};
    EXPECT_TRUE((*model)->forward(token, *seq, {}, step, pool).is_ok());
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

TEST(EngineRepack, InterleavedWeightsGiveTheFileLayoutsLogitsBitForBit) {
  if (!have_x8_kernels()) GTEST_SKIP() << "no interleaved kernels on this CPU (needs AVX-VNNI or AVX512-VNNI)";
  // K-quant mixes, IQ4_XS, and the per-tensor type mix (its experts include types without
  // the layout, which must keep the file's rows beside repacked ones).
  for (const char* name :
       {"qwen35moe-small-q4_k_m", "qwen3moe-small-q4_k_m", "qwen35moe-small-iq4_xs", "qwen35moe-small-ud_mix",
        "qwen35moe-tiny-mixed"}) {
    SCOPED_TRACE(name);
    const std::string path = moetier::testing::ref_model_path(name);
    const std::vector<int32_t> tokens = moetier::testing::ref_prompt_tokens(name, "p5_long");
    ASSERT_FALSE(tokens.empty());
    auto plain = open_read(path);
    auto repacked = open_read(path);
    ASSERT_TRUE(plain && repacked);
    const std::vector<std::string> experts = experts_of(*repacked);
    const std::vector<std::string> names = all_candidates(repacked->header());
    ASSERT_GT(names.size(), experts.size());  // the dense matrices are candidates too
    const RepackResult result = repack_weights(*repacked, names, 2);
    const std::string& note = result.note;
    int n_interleaved = 0, n_experts_interleaved = 0, n_dense_interleaved = 0, n_with_kernel = 0;
    for (const std::string& e : names) {
      const gguf::TensorInfo& t = *repacked->header().find_tensor(e);
      const bool expert = std::find(experts.begin(), experts.end(), e) != experts.end();
      const cpu::DotKernel* k = cpu::best_dot_kernel(t.type, cpu_features());
      n_with_kernel += expert && k != nullptr && k->tile_x8 != nullptr;
      if (!repacked->interleaved(t)) continue;
      ++n_interleaved;
      (expert ? n_experts_interleaved : n_dense_interleaved) += 1;
      EXPECT_NE(0, std::memcmp(repacked->tensor_data(t), plain->tensor_data(t), t.n_bytes)) << e << " did not change";
    }
    EXPECT_EQ(result.tensors, n_interleaved);
    if (std::string(name) != "qwen35moe-tiny-mixed" && n_with_kernel == static_cast<int>(experts.size())) {
      EXPECT_EQ(n_experts_interleaved, static_cast<int>(experts.size())) << note;
      EXPECT_EQ(note.rfind("repacked ", 0), 0u) << note;
    }
    if (std::string(name).ends_with("q4_k_m") && n_with_kernel == static_cast<int>(experts.size())) {
      EXPECT_GT(n_dense_interleaved, 0) << note;  // Q4_K / Q6_K attention and LM head
      EXPECT_NE(note.find(" of other weights ("), std::string::npos) << note;
      EXPECT_NE(note.find("attention"), std::string::npos) << note;
    }
    const auto expected = prompt_and_decode_logits(*plain, tokens);
    const auto got = prompt_and_decode_logits(*repacked, tokens);
    ASSERT_EQ(expected.size(), got.size());
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(0, std::memcmp(expected.data(), got.data(), got.size() * sizeof(float)));
  }
}

// Dense matrices alone (routed experts on the GPU): the note names what they are and no
// experts.
TEST(EngineRepack, DenseMatricesAloneAreNamedInTheNote) {
  if (!have_x8_kernels()) GTEST_SKIP() << "no interleaved kernels on this CPU";
  auto f = open_read(moetier::testing::ref_model_path("qwen3moe-small-q4_k_m"));
  ASSERT_TRUE(f);
  const std::vector<std::string> experts = experts_of(*f);
  std::vector<std::string> dense;
  for (const std::string& name : all_candidates(f->header())) {
    if (std::find(experts.begin(), experts.end(), name) == experts.end()) dense.push_back(name);
  }
  ASSERT_FALSE(dense.empty());
  const RepackResult r = repack_weights(*f, dense, 1);
  EXPECT_GT(r.tensors, 0);
  EXPECT_EQ(r.note.rfind("repacked ", 0), 0u) << r.note;
  EXPECT_NE(r.note.find(" of weights ("), std::string::npos) << r.note;
  EXPECT_NE(r.note.find("attention"), std::string::npos) << r.note;
  EXPECT_EQ(r.note.find("routed experts"), std::string::npos) << r.note;
}

TEST(EngineRepack, MappedExpertsKeepTheFilesLayoutAndSayHowToRepack) {
  if (!have_x8_kernels()) GTEST_SKIP() << "no interleaved kernels on this CPU";
  const std::string path = moetier::testing::ref_model_path("qwen3moe-small-q4_k_m");
  auto f = gguf::ModelFile::open(path, {.mode = gguf::LoadMode::kMmap, .progress = false, .verbose = false,
                                        .expert_pages = gguf::ExpertPages::kFile});
  ASSERT_TRUE(f.is_ok());
  const std::vector<std::string> experts = experts_of(**f);
  const std::string note = repack_weights(**f, experts, 1).note;
  EXPECT_EQ(note.rfind("weights keep the file's layout: ", 0), 0u) << note;
  EXPECT_NE(note.find("file mapping"), std::string::npos) << note;
  for (const std::string& e : experts) EXPECT_FALSE((*f)->interleaved(*(*f)->header().find_tensor(e)));
  EXPECT_EQ(repack_weights(**f, {}, 1).note, "");
}

// From the placement: CPU experts of CPU layers always; of GPU layers only when prompt
// batches cannot stream them to the GPU (--no-op-offload); never GPU-resident ones. Dense
// matrices (attention, LM head) of CPU layers; never a GPU layer's; never the token
// embedding, norms or router.
TEST(RepackCandidates, FollowThePlacementAndOpOffload) {
  const std::string path = moetier::testing::ref_model_path("qwen3moe-small-q4_k_m");
  auto header = gguf::read_header(path);
  ASSERT_TRUE(header.is_ok());
  auto hp = read_hparams(*header);
  ASSERT_TRUE(hp.is_ok());
  ASSERT_GE(hp->n_layer, 2);
  PlacementDecision d;
  d.plan.tensor_devices.assign(header->tensors.size(), kCpuDevice);
  const auto all = repack_candidates(*header, *hp, d);
  const auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const std::string& e : routed_expert_tensors(*header, *hp)) EXPECT_TRUE(has(all, e)) << e;
  for (const char* dense : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight"}) {
    EXPECT_TRUE(has(all, dense)) << dense;
  }
  EXPECT_EQ(has(all, "output.weight"), header->find_tensor("output.weight") != nullptr);
  for (const char* never : {"token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_gate_inp.weight"}) {
    EXPECT_FALSE(has(all, never)) << never;
  }
  // Layer 0 on the GPU (its dense part there, its experts on the CPU); layer 1's experts on the GPU.
  d.gpu_part = true;
  d.gpu.layer_on_gpu.assign(static_cast<size_t>(hp->n_layer), false);
  d.gpu.layer_on_gpu[0] = true;
  for (size_t i = 0; i < header->tensors.size(); ++i) {
    if (tensor_layer_index(header->tensors[i].name) == 1 && header->tensors[i].name.find("_exps") != std::string::npos) {
      d.plan.tensor_devices[i] = kGpuDevice;
    }
  }
  // Candidates in a layer: routed experts (kExperts) or the rest.
  enum Kind { kExperts, kDense };
  auto in_layer = [](const std::vector<std::string>& names, int layer, Kind kind) {
    int n = 0;
    for (const auto& s : names) {
      n += tensor_layer_index(s) == layer && (s.find("_exps") != std::string::npos) == (kind == kExperts);
    }
    return n;
  };
  d.gpu.op_offload = true;
  auto c = repack_candidates(*header, *hp, d);
  EXPECT_EQ(in_layer(c, 0, kExperts), 0);  // may be streamed to the GPU
  EXPECT_EQ(in_layer(c, 0, kDense), 0);    // a GPU layer's
  EXPECT_EQ(in_layer(c, 1, kExperts), 0);  // on the GPU
  EXPECT_EQ(in_layer(c, 1, kDense), in_layer(all, 1, kDense));
  EXPECT_EQ(in_layer(c, 2, kExperts), 3);
  EXPECT_EQ(in_layer(all, 1, kDense), 4);  // q, k, v, output
  d.gpu.op_offload = false;
  c = repack_candidates(*header, *hp, d);
  EXPECT_EQ(in_layer(c, 0, kExperts), 3);
  EXPECT_EQ(in_layer(c, 0, kDense), 0);
  EXPECT_EQ(in_layer(c, 1, kExperts), 0);
}

std::string quoted(const std::string& name) {
  std::string q = "'";  // (built up: GCC 12 reports a false -Wrestrict on "'" + path + "'")
  q += moetier::testing::ref_model_path(name);
  q += "'";
  return q;
}

TEST(CliRepack, RunSaysWhatWasRepackedAndNoRepackKeepsTheLayout) {
  const std::string base = "run -m " + quoted("qwen35moe-small-q4_k_m") + " -p hi -n 4 --temp 0 -t 2 --no-mmap";
  const auto on = run_moetier(base);
  ASSERT_EQ(on.rc, 0) << on.err;
  const auto off = run_moetier(base + " -nr");
  ASSERT_EQ(off.rc, 0) << off.err;
  EXPECT_EQ(on.out, off.out);  // the same greedy text
  EXPECT_EQ(off.err.find("repacked"), std::string::npos) << off.err;
  EXPECT_EQ(off.err.find("keep the file's layout"), std::string::npos) << off.err;
  if (have_x8_kernels()) {
    EXPECT_NE(on.err.find("moetier: repacked "), std::string::npos) << on.err;
    EXPECT_NE(on.err.find(" of routed experts ("), std::string::npos) << on.err;
  } else {
    EXPECT_NE(on.err.find("moetier: weights keep the file's layout: "), std::string::npos) << on.err;
  }
  const auto mapped = run_moetier("run -m " + quoted("qwen35moe-small-q4_k_m") + " -p hi -n 2 -t 2 --expert-pages file");
  ASSERT_EQ(mapped.rc, 0) << mapped.err;
  EXPECT_NE(mapped.err.find("moetier: weights keep the file's layout: "), std::string::npos) << mapped.err;
}

// The users' tier (AVX2 + AVX-VNNI) repacks every K-quant and IQ4_XS expert and prints the
// same greedy text as the file's layout; so does plain AVX2 (VPDPBUSD emulated exactly).
TEST(CliRepack, EveryKernelTierGivesTheSameText) {
  const std::string base = "run -m " + quoted("qwen35moe-small-iq4_xs") + " -p hi -n 8 --temp 0 -t 2 --no-mmap";
  const auto plain = run_moetier(base + " -nr");
  ASSERT_EQ(plain.rc, 0) << plain.err;
  const auto vnni = run_moetier(base + " --cpu-isa avx2");
  ASSERT_EQ(vnni.rc, 0) << vnni.err;
  EXPECT_EQ(vnni.out, plain.out);
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx2 && cpu.fma && cpu.f16c && cpu.avxvnni) {
    EXPECT_NE(vnni.err.find("moetier: repacked "), std::string::npos) << vnni.err;
    EXPECT_EQ(vnni.err.find("not repacked"), std::string::npos) << vnni.err;
  }
  const auto novnni = run_moetier(base + " --cpu-isa avx2-novnni");
  ASSERT_EQ(novnni.rc, 0) << novnni.err;
  EXPECT_EQ(novnni.out, plain.out);
  if (cpu.has_avx2_set()) {
    EXPECT_NE(novnni.err.find("moetier: repacked "), std::string::npos) << novnni.err;
    EXPECT_EQ(novnni.err.find("not repacked"), std::string::npos) << novnni.err;
  }
}

TEST(CliRepack, HelpDocumentsTheFlag) {
  for (const char* cmd : {"run", "chat", "serve", "bench"}) {
    const auto r = run_moetier(std::string(cmd) + " --help");
    EXPECT_EQ(r.rc, 0) << cmd;
    EXPECT_NE(r.out.find("-nr, --no-repack"), std::string::npos) << cmd << "\n" << r.out;
  }
  // bench: the records say how many bytes were repacked at load; -nr: none.
  const std::string bench = "bench -m " + quoted("qwen35moe-small-q4_k_m") + " -p 0 -n 2 -r 1 -t 1 -mmp 0 -o jsonl";
  const auto b = run_moetier(bench + " -nr");
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_EQ(b.err.find("repacked"), std::string::npos) << b.err;
  EXPECT_NE(b.out.find("\"repacked_bytes\": 0,"), std::string::npos) << b.out;
  if (have_x8_kernels()) {
    const auto on = run_moetier(bench);
    ASSERT_EQ(on.rc, 0) << on.err;
    EXPECT_NE(on.err.find("moetier bench: repacked "), std::string::npos) << on.err;
    EXPECT_EQ(on.out.find("\"repacked_bytes\": 0,"), std::string::npos) << on.out;
    EXPECT_NE(on.out.find("\"repacked_bytes\": "), std::string::npos) << on.out;
  }
}

}  // namespace
}  // namespace moetier
