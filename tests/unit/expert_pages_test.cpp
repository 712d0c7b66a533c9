// --expert-pages decision (gguf/expert_pages.h) as a pure function: the RAM rule, THP modes,
// the policies, the messages. No system state is read (the readers of it are platform's,
// tested in platform_test.cpp).
#include <gtest/gtest.h>

#include "gguf/expert_pages.h"
#include "platform/memory.h"

namespace moetier::gguf {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

using platform::HugePageMode;

// These tests check Linux's wording (THP, madvise) on every OS; Windows' own words are checked
// in utf8_paths_test.cpp's messages tests.
const platform::HugePageHelp kLinuxHelp = platform::huge_page_help(platform::OsFamily::kLinux);

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ExpertPagesQuery query(ExpertPages policy, uint64_t experts, uint64_t available,
                       HugePageMode thp = HugePageMode::kMadvise) {
  return {.policy = policy,
          .expert_bytes = experts,
          .mapped_bytes = 1 * kGiB,
          .working_bytes = 512 * kMiB,
          .mem = {.total = 24 * kGiB, .available = available},
          .thp = thp,
          .help = kLinuxHelp};
}

TEST(ExpertPagesDecision, AutoMovesWhenEverythingFitsWithTheReserve) {
  // 17 GiB experts + 1 GiB mapped + 0.5 GiB working + reserve max(1 GiB, 24/32 GiB) = 19.5 GiB.
  const auto d = decide_expert_pages(query(ExpertPages::kAuto, 17 * kGiB, 20 * kGiB));
  EXPECT_TRUE(d.move);
  EXPECT_TRUE(d.error.is_ok());
  EXPECT_TRUE(d.reason.empty()) << d.reason;
  EXPECT_EQ(d.reserve_bytes, kGiB);
  EXPECT_EQ(d.needed_bytes, 17 * kGiB + kGiB + 512 * kMiB + kGiB);
  // Exactly at the limit still moves; a byte short does not.
  EXPECT_TRUE(decide_expert_pages(query(ExpertPages::kAuto, 17 * kGiB, d.needed_bytes)).move);
  EXPECT_FALSE(decide_expert_pages(query(ExpertPages::kAuto, 17 * kGiB, d.needed_bytes - 1)).move);
}

TEST(ExpertPagesDecision, ReserveGrowsWithRam) {
  ExpertPagesQuery q = query(ExpertPages::kAuto, 100 * kGiB, 200 * kGiB);
  q.mem.total = 256 * kGiB;
  EXPECT_EQ(decide_expert_pages(q).reserve_bytes, 8 * kGiB);  // 1/32 of RAM
}

TEST(ExpertPagesDecision, AutoShortOfRamSaysNeededAvailableAndCost) {
  const auto d = decide_expert_pages(query(ExpertPages::kAuto, 17 * kGiB, 18 * kGiB));
  EXPECT_FALSE(d.move);
  EXPECT_TRUE(d.error.is_ok());
  const std::string line = kept_message(d, std::nullopt);
  EXPECT_TRUE(contains(line, "stay in the file mapping")) << line;
  EXPECT_TRUE(contains(line, "needs 19.50 GiB")) << line;
  EXPECT_TRUE(contains(line, "18.00 GiB is available")) << line;
  EXPECT_TRUE(contains(line, "up to ~40% slower")) << line;
  // The experts alone fit: huge is offered.
  EXPECT_TRUE(contains(line, "--expert-pages huge")) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // They do not: it is not.
  const auto e = decide_expert_pages(query(ExpertPages::kAuto, 17 * kGiB, 10 * kGiB));
  EXPECT_FALSE(e.move);
  EXPECT_FALSE(contains(kept_message(e, std::nullopt), "--expert-pages huge")) << kept_message(e, std::nullopt);
}

TEST(ExpertPagesDecision, TheCostFollowsThePagesTheKernelGaveTheMapping) {
  const auto d = decide_expert_pages(query(ExpertPages::kFile, 17 * kGiB, 200 * kGiB));
  EXPECT_EQ(kept_message(d, std::nullopt),
            "the CPU's weights (17.00 GiB) stay in the file mapping (--expert-pages file); page-cache pages are usually 4 "
            "KiB: generation may be up to ~40% slower than with huge pages; --expert-pages auto moves them when RAM "
            "allows");
  EXPECT_TRUE(contains(kept_message(d, 0.25), "75% of the mapping is in 4 KiB pages: generation may be up to ~40% slower"))
      << kept_message(d, 0.25);
  // Large page-cache folios mapped with 2 MiB entries (recent kernels): little is lost.
  EXPECT_TRUE(contains(kept_message(d, 0.95), "maps 95% of the file with 2 MiB page-cache folios, so little speed is lost"))
      << kept_message(d, 0.95);
}

// Without huge pages the copy still pays: only a copy is repacked into the kernels' layout.
TEST(ExpertPagesDecision, AutoWithoutThpStillMovesWhenRamAllows) {
  for (HugePageMode thp : {HugePageMode::kNever, HugePageMode::kUnavailable}) {
    EXPECT_TRUE(decide_expert_pages(query(ExpertPages::kAuto, kGiB, 20 * kGiB, thp)).move);
    const auto d = decide_expert_pages(query(ExpertPages::kAuto, 17 * kGiB, 18 * kGiB, thp));
    EXPECT_FALSE(d.move);
    EXPECT_TRUE(contains(d.reason, "moving them into anonymous memory needs")) << d.reason;
    const std::string moved = moved_message(kGiB, 1, thp, 0, false, kLinuxHelp);
    EXPECT_TRUE(contains(moved, "up to ~40% slower")) << moved;
    EXPECT_TRUE(contains(moved, "madvise")) << moved;
  }
  EXPECT_TRUE(decide_expert_pages(query(ExpertPages::kAuto, kGiB, 20 * kGiB, HugePageMode::kAlways)).move);
}

TEST(ExpertPagesDecision, AutoWithUnknownMemoryKeepsTheMapping) {
  ExpertPagesQuery q = query(ExpertPages::kAuto, kGiB, 0);
  q.mem = {};
  const auto d = decide_expert_pages(q);
  EXPECT_FALSE(d.move);
  EXPECT_TRUE(contains(d.reason, std::string(kLinuxHelp.available))) << d.reason;
  q.policy = ExpertPages::kHuge;
  EXPECT_TRUE(decide_expert_pages(q).move);
}

TEST(ExpertPagesDecision, HugeMovesWhenTheExpertsAloneFitElseErrors) {
  // Within the reserve: auto would not, huge does.
  const auto d = decide_expert_pages(query(ExpertPages::kHuge, 17 * kGiB, 18 * kGiB));
  EXPECT_TRUE(d.move);
  EXPECT_TRUE(d.reason.empty());
  // Even with THP off (the move line then says 4 KiB pages).
  EXPECT_TRUE(decide_expert_pages(query(ExpertPages::kHuge, kGiB, 20 * kGiB, HugePageMode::kNever)).move);
  const auto e = decide_expert_pages(query(ExpertPages::kHuge, 17 * kGiB, 16 * kGiB));
  EXPECT_FALSE(e.move);
  ASSERT_FALSE(e.error.is_ok());
  EXPECT_EQ(e.error.kind(), ErrorKind::kRuntime);
  EXPECT_TRUE(contains(e.error.message(), "--expert-pages huge")) << e.error.message();
  EXPECT_TRUE(contains(e.error.message(), "17.00 GiB")) << e.error.message();
  EXPECT_TRUE(contains(e.error.message(), "16.00 GiB")) << e.error.message();
}

TEST(ExpertPagesDecision, FileNeverMovesAndSaysWhatItCosts) {
  const auto d = decide_expert_pages(query(ExpertPages::kFile, 17 * kGiB, 200 * kGiB));
  EXPECT_FALSE(d.move);
  EXPECT_TRUE(contains(d.reason, "--expert-pages file")) << d.reason;
  EXPECT_TRUE(contains(kept_message(d, std::nullopt), "slower")) << kept_message(d, std::nullopt);
}

TEST(ExpertPagesDecision, NothingToMoveSaysNothing) {
  for (ExpertPages p : {ExpertPages::kAuto, ExpertPages::kHuge, ExpertPages::kFile}) {
    const auto d = decide_expert_pages(query(p, 0, 0));
    EXPECT_FALSE(d.move);
    EXPECT_TRUE(d.error.is_ok());
    EXPECT_TRUE(d.reason.empty());
  }
}

TEST(ExpertPagesDecision, MovedMessage) {
  EXPECT_EQ(moved_message(17 * kGiB + 300 * kMiB, 4.1, HugePageMode::kMadvise, (17 * kGiB + 300 * kMiB) / 100 * 98,
                          false, kLinuxHelp),
            "moved 17.29 GiB of the CPU's weights into huge-page memory in 4.1 s (4.5 GB/s; THP: 98% in 2 MiB pages)");
  EXPECT_TRUE(contains(moved_message(kGiB, 1, HugePageMode::kNever, 0, true, kLinuxHelp), "anonymous memory"));
  EXPECT_TRUE(
      contains(moved_message(kGiB, 1, HugePageMode::kNever, 0, true, kLinuxHelp), "THP disabled system-wide: 4 KiB pages"));
  EXPECT_TRUE(contains(moved_message(kGiB, 1, HugePageMode::kNever, 0, true, kLinuxHelp), "; locked)"));
  EXPECT_TRUE(contains(moved_message(kGiB, 1, HugePageMode::kAlways, std::nullopt, false, kLinuxHelp), "THP coverage unknown"));
}

TEST(ExpertPagesParse, FlagValues) {
  EXPECT_EQ(*parse_expert_pages("auto"), ExpertPages::kAuto);
  EXPECT_EQ(*parse_expert_pages("huge"), ExpertPages::kHuge);
  EXPECT_EQ(*parse_expert_pages("file"), ExpertPages::kFile);
  const auto bad = parse_expert_pages("big");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(bad.status().message(), "--expert-pages takes auto, huge or file, not 'big'");
  for (ExpertPages p : {ExpertPages::kAuto, ExpertPages::kHuge, ExpertPages::kFile}) {
    EXPECT_EQ(*parse_expert_pages(expert_pages_name(p)), p);
  }
}

}  // namespace
}  // namespace moetier::gguf
