// Moving the routed experts into huge-page memory at load (--expert-pages): the moved bytes
// are the file's bytes, the logits with the move equal those without it exactly (same
// kernels, same bytes), and the commands print one line on what was done.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "engine/placement.h"
#include "gguf/model_file.h"
#include "model/arch.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/ref_data.h"
#include "support/ref_model.h"

namespace moetier {
namespace {

using gguf::ExpertPages;
using gguf::LoadMode;
using gguf::ModelFile;
const std::string kRef = moetier::testing::kRefDir;

std::string model_path(const std::string& name) { return testing::ref_model_path(name); }

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> all_experts(const std::string& path) {
  auto header = gguf::read_header(path);
  EXPECT_TRUE(header.is_ok()) << header.status().message();
  if (!header) return {};
  auto hp = read_hparams(*header);
  EXPECT_TRUE(hp.is_ok()) << hp.status().message();
  if (!hp) return {};
  return routed_expert_tensors(*header, *hp);
}

std::unique_ptr<ModelFile> open_file(const std::string& path, ExpertPages pages, const std::vector<std::string>& experts,
                                     LoadMode mode = LoadMode::kMmap, bool mlock = false) {
  auto f = ModelFile::open(path, {.mode = mode,
                                  .mlock = mlock,
                                  .progress = false,
                                  .verbose = false,
                                  .expert_tensors = experts,
                                  .expert_pages = pages});
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return f ? std::move(f).value() : nullptr;
}

const char* const kModels[] = {"qwen35moe-small-q4_k_m", "qwen3moe-small-q4_k_m", "qwen35moe-tiny-mixed"};

TEST(GgufExpertMove, EveryMovedTensorIsTheFilesBytes) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const std::string path = model_path(name);
    const std::vector<std::string> experts = all_experts(path);
    ASSERT_FALSE(experts.empty());
    auto mf = open_file(path, ExpertPages::kHuge, experts);
    ASSERT_NE(mf, nullptr);
    const std::string& note = mf->stats().expert_pages_note;
    EXPECT_EQ(note.rfind("moved ", 0), 0u) << note;
    const std::set<std::string> moved_names(experts.begin(), experts.end());
    const std::vector<uint8_t> bytes = file_bytes(path);
    uint64_t moved_bytes = 0;
    size_t n_moved = 0;
    for (const gguf::TensorInfo& t : mf->header().tensors) {
      const bool expect_moved = moved_names.count(t.name) > 0;
      EXPECT_EQ(mf->moved(t), expect_moved) << t.name;
      ASSERT_LE(t.file_offset + t.n_bytes, bytes.size());
      ASSERT_EQ(0, std::memcmp(mf->tensor_data(t), bytes.data() + t.file_offset, t.n_bytes)) << t.name;
      if (expect_moved) {
        moved_bytes += t.n_bytes;
        ++n_moved;
        // A copy of its own (not the mapping), aligned as the file aligns tensors.
        EXPECT_EQ(reinterpret_cast<uintptr_t>(mf->tensor_data(t)) % mf->header().alignment, 0u) << t.name;
      }
      // A copy of the TensorInfo finds the same data (lookup by offset, not by address).
      const gguf::TensorInfo copy = t;
      EXPECT_EQ(mf->tensor_data(copy), mf->tensor_data(t)) << t.name;
    }
    EXPECT_EQ(n_moved, experts.size());
    EXPECT_EQ(mf->stats().moved_bytes, moved_bytes);
  }
}

TEST(GgufExpertMove, FileAutoAndReadPolicies) {
  const std::string path = model_path("qwen35moe-small-q4_k_m");
  const std::vector<std::string> experts = all_experts(path);
  ASSERT_FALSE(experts.empty());
  {
    auto mf = open_file(path, ExpertPages::kFile, experts);
    ASSERT_NE(mf, nullptr);
    EXPECT_EQ(mf->stats().moved_bytes, 0u);
    EXPECT_NE(mf->stats().expert_pages_note.find("--expert-pages file"), std::string::npos)
        << mf->stats().expert_pages_note;
    EXPECT_FALSE(mf->moved(*mf->header().find_tensor(experts[0])));
  }
  {
    // auto: moves on any machine with RAM for a 19 MB model and THP on; otherwise says why.
    auto mf = open_file(path, ExpertPages::kAuto, experts);
    ASSERT_NE(mf, nullptr);
    const std::string& note = mf->stats().expert_pages_note;
    if (mf->stats().moved_bytes > 0) {
      EXPECT_EQ(note.rfind("moved ", 0), 0u) << note;
      EXPECT_TRUE(mf->moved(*mf->header().find_tensor(experts[0])));
    } else {
      EXPECT_NE(note.find("stay in the file mapping"), std::string::npos) << note;
    }
  }
  {
    // --no-mmap already reads everything into huge-page memory: nothing to move, nothing said
    // (where the OS gives no huge pages, one line on what that costs).
    auto mf = open_file(path, ExpertPages::kHuge, experts, LoadMode::kRead);
    ASSERT_NE(mf, nullptr);
    EXPECT_EQ(mf->stats().moved_bytes, 0u);
    EXPECT_EQ(mf->stats().expert_pages_note, gguf::read_without_huge_pages_message(platform::huge_page_mode()));
  }
  {
    // With mlock the moved region is locked too.
    auto mf = open_file(path, ExpertPages::kHuge, experts, LoadMode::kMmap, /*mlock=*/true);
    if (mf) {
      EXPECT_NE(mf->stats().expert_pages_note.find("; locked)"), std::string::npos) << mf->stats().expert_pages_note;
      const uint8_t* p = mf->tensor_data(*mf->header().find_tensor(experts[0]));
      unsigned char resident = 0;
      const auto page = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
      ASSERT_EQ(::mincore(reinterpret_cast<void*>(page), 4096, &resident), 0);
      EXPECT_TRUE(resident & 1);
    }
  }
}

TEST(GgufExpertMove, UnknownTensorIsAnError) {
  auto mf = ModelFile::open(model_path("qwen35moe-tiny-mixed"), {.progress = false,
                                                                  .verbose = false,
                                                                  .expert_tensors = {"blk.99.ffn_up_exps.weight"},
                                                                  .expert_pages = ExpertPages::kHuge});
  ASSERT_FALSE(mf.is_ok());
  EXPECT_NE(mf.status().message().find("blk.99.ffn_up_exps.weight"), std::string::npos) << mf.status().message();
}

TEST(GgufExpertMove, OnlyComputeLayersExpertsAreListed) {
  const std::string path = model_path("qwen35moe-small-q4_k_m");
  auto header = gguf::read_header(path);
  ASSERT_TRUE(header.is_ok());
  auto hp = read_hparams(*header);
  ASSERT_TRUE(hp.is_ok());
  const auto all = routed_expert_tensors(*header, *hp);
  EXPECT_EQ(all.size(), static_cast<size_t>(3 * hp->n_layer));
  for (const auto& n : all) EXPECT_NE(n.find("_exps."), std::string::npos) << n;
  std::vector<bool> first_only(static_cast<size_t>(hp->n_layer), false);
  first_only[0] = true;
  const auto some = routed_expert_tensors(*header, *hp, first_only);
  ASSERT_EQ(some.size(), 3u);
  for (const auto& n : some) EXPECT_EQ(n.rfind("blk.0.", 0), 0u) << n;
}

// What mmap moves with everything on the CPU: every tensor of the compute blocks (routed
// experts and dense) and the output layer; not the token embedding (one row per token) while
// output.weight exists, nor MTP blocks.
TEST(GgufExpertMove, CpuWeightsAreEveryComputeTensorButTheEmbedding) {
  for (const char* name : {"qwen35moe-small-q4_k_m", "qwen3moe-small-q4_k_m"}) {
    SCOPED_TRACE(name);
    auto header = gguf::read_header(model_path(name));
    ASSERT_TRUE(header.is_ok());
    auto hp = read_hparams(*header);
    ASSERT_TRUE(hp.is_ok());
    auto d = decide_placement(*header, *hp, {.fit = "off", .progress = false});
    ASSERT_TRUE(d.is_ok()) << d.status().message();
    const auto names = cpu_weight_tensors(*header, *hp, d->plan);
    const std::set<std::string> moved(names.begin(), names.end());
    const bool has_output = header->find_tensor("output.weight") != nullptr;
    for (const gguf::TensorInfo& t : header->tensors) {
      const int layer = tensor_layer_index(t.name);
      const bool expected = layer >= hp->n_layer                ? false
                            : t.name == "token_embd.weight"     ? !has_output
                                                                : true;
      EXPECT_EQ(moved.count(t.name) > 0, expected) << t.name;
    }
    for (const auto& e : routed_expert_tensors(*header, *hp)) EXPECT_EQ(moved.count(e), 1u) << e;
  }
}

// Same bytes, same kernels: the logits of every position are bit for bit the same.
TEST(EngineExpertMove, LogitsWithTheMoveEqualThoseWithout) {
  for (const char* name : {"qwen35moe-small-q4_k_m", "qwen3moe-small-q4_k_m"}) {
    SCOPED_TRACE(name);
    const std::string path = model_path(name);
    const std::vector<std::string> experts = all_experts(path);
    const std::vector<int32_t> tokens = moetier::testing::ref_prompt_tokens(name, "p3_mixed");
    ASSERT_FALSE(tokens.empty());
    std::vector<float> logits[2];
    for (int moved = 0; moved < 2; ++moved) {
      auto mf = open_file(path, moved ? ExpertPages::kHuge : ExpertPages::kFile, experts);
      ASSERT_NE(mf, nullptr);
      EXPECT_EQ(mf->stats().moved_bytes > 0, moved == 1);
      auto model = load_model(*mf, {.n_ubatch = 512});
      ASSERT_TRUE(model.is_ok()) << model.status().message();
      auto seq = (*model)->new_sequence({.n_ctx = 256});
      ASSERT_TRUE(seq.is_ok()) << seq.status().message();
      ThreadPool pool(2);
      ASSERT_TRUE((*model)->forward(tokens, *seq, {.all_logits = true}, logits[moved], pool).is_ok());
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    ASSERT_FALSE(logits[0].empty());
    EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
  }
}

// ---- the commands --------------------------------------------------------------------

using moetier::testing::run_moetier;

std::string quoted_model(const std::string& name) { return fmt::format("'{}'", model_path(name)); }

// The stderr line starting with "moetier: " + `start` (or "" when none).
std::string line_starting(const std::string& err, const std::string& start) {
  const size_t at = err.find(start);
  if (at == std::string::npos) return "";
  return err.substr(at, err.find('\n', at) - at);
}

TEST(CliExpertPages, RunPrintsOneLineForEachPolicy) {
  const std::string base = "run -m " + quoted_model("qwen35moe-small-q4_k_m") + " -p hi -n 2 --temp 0 -t 2";
  {
    const auto r = run_moetier(base + " --expert-pages huge");
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string line = line_starting(r.err, "moetier: moved ");
    EXPECT_NE(line.find("of the CPU's weights into"), std::string::npos) << r.err;
    EXPECT_NE(line.find(" GB/s; "), std::string::npos) << r.err;
  }
  {
    const auto r = run_moetier(base + " --expert-pages file");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err.find("moetier: moved "), std::string::npos) << r.err;
    const std::string line = line_starting(r.err, "moetier: the CPU's weights (");
    EXPECT_NE(line.find("stay in the file mapping (--expert-pages file); "), std::string::npos) << r.err;
    // What it costs, from the pages the kernel gave the mapping.
    EXPECT_TRUE(line.find("slower") != std::string::npos || line.find("little speed is lost") != std::string::npos)
        << r.err;
  }
  {
    // auto (the default): moved, or one line saying why not.
    const auto r = run_moetier(base);
    ASSERT_EQ(r.rc, 0) << r.err;
    const bool moved = r.err.find("moetier: moved ") != std::string::npos;
    const bool kept = r.err.find("stay in the file mapping") != std::string::npos;
    EXPECT_TRUE(moved != kept) << r.err;
  }
  {
    // --no-mmap: unchanged, nothing to move.
    const auto r = run_moetier(base + " --no-mmap --expert-pages huge");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err.find("the CPU's weights"), std::string::npos) << r.err;
  }
}

TEST(CliExpertPages, BadValueIsExitTwoWithOneLine) {
  const auto r = run_moetier("run -m " + quoted_model("qwen35moe-tiny-mixed") + " -p hi --expert-pages big");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--expert-pages takes auto, huge or file, not 'big'"), std::string::npos) << r.err;
  const auto b = run_moetier("bench -m " + quoted_model("qwen35moe-tiny-mixed") + " --expert-pages 2");
  EXPECT_EQ(b.rc, 2) << b.err;
  EXPECT_NE(b.err.find("--expert-pages takes auto, huge or file, not '2'"), std::string::npos) << b.err;
}

TEST(CliExpertPages, HelpDocumentsTheFlag) {
  for (const char* cmd : {"run", "chat", "serve", "logits", "bench"}) {
    const auto r = run_moetier(std::string(cmd) + " --help");
    EXPECT_EQ(r.rc, 0) << cmd;
    EXPECT_NE(r.out.find("--expert-pages auto|huge|file"), std::string::npos) << cmd << "\n" << r.out;
  }
}

TEST(CliExpertPages, BenchMovesForMmapTestsOnly) {
  const auto r = run_moetier("bench -m " + quoted_model("qwen35moe-tiny-mixed") +
                             " -p 0 -n 2 -r 1 -t 2 -mmp 0,1 --expert-pages huge -o jsonl");
  ASSERT_EQ(r.rc, 0) << r.err;
  size_t moved = 0;
  for (size_t pos = r.err.find("moetier bench: moved "); pos != std::string::npos;
       pos = r.err.find("moetier bench: moved ", pos + 1)) {
    ++moved;
  }
  EXPECT_EQ(moved, 1u) << r.err;
}

}  // namespace
}  // namespace moetier
