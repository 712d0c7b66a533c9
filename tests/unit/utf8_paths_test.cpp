// Paths that are not ASCII, on every OS (the Windows build runs this under Wine): a GGUF
// file named "模型-ü.gguf" in a folder named likewise is written by the Writer, read by the
// header reader and loaded (mapped and --no-mmap) by ModelFile; a prompt file of that name
// is read by --file's reader; the SHA-256 cache lives in such a folder; and moetier itself
// is given such paths and Chinese text as arguments. On Windows each of these once went
// through the ANSI code page and could not open the file. Also the texts that tell a
// Windows user what --mlock and huge pages need, which are pure functions.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli/prompt_input.h"
#include "core/utf8_path.h"
#include "gguf/expert_pages.h"
#include "gguf/gguf.h"
#include "gguf/model_file.h"
#include "gguf/sha256_cache.h"
#include "gguf/writer.h"
#include "platform/file.h"
#include "platform/memory.h"
#include "platform/process.h"

namespace moetier {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A fresh folder "moetier-模型-ü-<pid>-<test>" in the temp folder; removed afterwards.
class Utf8Paths : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = fmt_name();
    dir_ = path_utf8(fs::temp_directory_path()) + "/" + name;
    std::error_code ec;
    fs::remove_all(utf8_path(dir_), ec);
    ASSERT_TRUE(fs::create_directories(utf8_path(dir_)));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(utf8_path(dir_), ec);
  }
  static std::string fmt_name() {
    return "moetier-模型-ü-" + std::to_string(platform::process_id()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  std::string dir_;  // UTF-8
};

TEST(Utf8Path, RoundTripsAndIsTheSameFileAsTheWideName) {
  const std::string text = "C:/模型/ü.gguf";
  EXPECT_EQ(path_utf8(utf8_path(text)), text);
  EXPECT_EQ(path_utf8(utf8_path(text).filename()), "ü.gguf");
  // The path made from UTF-8 is the one made from the same characters as char8_t (what a
  // Windows program must pass to the wide-character calls).
  EXPECT_EQ(utf8_path(text), fs::path(u8"C:/模型/ü.gguf"));
}

TEST_F(Utf8Paths, GgufWrittenReadAndLoadedUnderANonAsciiName) {
  const std::string path = dir_ + "/模型-ü.gguf";
  {
    auto w = gguf::Writer::create(path);
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    (*w)->set("general.name", gguf::Value::make_string("模型"));
    ASSERT_TRUE((*w)->add_tensor("t", DType::F32, {8}).is_ok());
    ASSERT_TRUE((*w)->write_header().is_ok());
    const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8};
    ASSERT_TRUE((*w)->write_tensor_data(values.data(), sizeof(float) * values.size()).is_ok());
    const Status st = (*w)->finish();
    ASSERT_TRUE(st.is_ok()) << st.message();
  }
  // The file has exactly that name (not one in the ANSI code page's "??-?.gguf").
  ASSERT_TRUE(fs::is_regular_file(utf8_path(path)));
  bool listed = false;
  for (const auto& entry : fs::directory_iterator(utf8_path(dir_))) {
    listed = listed || path_utf8(entry.path().filename()) == "模型-ü.gguf";
  }
  EXPECT_TRUE(listed);

  auto header = gguf::read_header(path);
  ASSERT_TRUE(header.is_ok()) << header.status().message();
  EXPECT_EQ(header->get_string_or("general.name", ""), "模型");
  ASSERT_EQ(header->tensors.size(), 1u);
  for (const gguf::LoadMode mode : {gguf::LoadMode::kMmap, gguf::LoadMode::kRead}) {
    auto mf = gguf::ModelFile::open(path, {.mode = mode, .progress = false, .verbose = false});
    ASSERT_TRUE(mf.is_ok()) << mf.status().message();
    float got[8];
    std::memcpy(got, (*mf)->tensor_data((*mf)->header().tensors[0]), sizeof(got));
    EXPECT_EQ(got[0], 1.0f);
    EXPECT_EQ(got[7], 8.0f);
  }
}

TEST_F(Utf8Paths, PromptFileAndSha256CacheUnderNonAsciiNames) {
  const std::string prompt = dir_ + "/提示-ü.txt";
  std::ofstream(utf8_path(prompt), std::ios::binary) << "你好, wörld\r\n";
  const Result<std::string> text = read_text_file(prompt);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_EQ(*text, "你好, wörld\r\n");  // byte for byte
  EXPECT_FALSE(read_text_file(dir_ + "/缺-ü.txt").is_ok());

  const std::string cache = dir_ + "/缓存";
  const Result<CachedSha256> first = cached_file_sha256(prompt, {.cache_dir = cache});
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_FALSE(first->from_cache);
  const Result<CachedSha256> second = cached_file_sha256(prompt, {.cache_dir = cache});
  ASSERT_TRUE(second.is_ok()) << second.status().message();
  EXPECT_TRUE(second->from_cache);  // the cache file was written and read back under its name
  EXPECT_EQ(second->sha256, first->sha256);

  std::FILE* f = platform::open_stdio_file(dir_ + "/写-ü.bin", "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("x", f);
  std::fclose(f);
  EXPECT_TRUE(fs::is_regular_file(utf8_path(dir_ + "/写-ü.bin")));
}

// The whole way in: moetier started with non-ASCII paths on its command line (Windows
// hands main() its arguments in the ANSI code page; the program reads them again as UTF-16).
TEST_F(Utf8Paths, MoetierOpensNonAsciiPathsGivenOnItsCommandLine) {
  const std::string model = dir_ + "/模型-ü.gguf";
  fs::copy_file(fs::path(MOETIER_REF_DIR) / "tokenizer" / "qwen3-vocab.gguf", utf8_path(model));
  // The copy keeps the reference file's read-only mode, and Windows deletes no read-only file:
  // without this the folder outlives the test and the next run (same pid under Wine) fails.
  fs::permissions(utf8_path(model), fs::perms::owner_write, fs::perm_options::add);
  const std::string prompt = dir_ + "/提示-ü.txt";
  std::ofstream(utf8_path(prompt), std::ios::binary) << "你好，世界";
  const std::string log = dir_ + "/日志.txt";
  const auto read_log = [&] {
    std::ifstream in(utf8_path(log), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };

  auto inspect = platform::ChildProcess::spawn({.args = {MOETIER_BINARY, "inspect", model}, .output_path = log});
  ASSERT_TRUE(inspect.is_ok()) << inspect.status().message();
  EXPECT_TRUE(inspect->wait().success()) << read_log();
  EXPECT_TRUE(contains(read_log(), "模型-ü.gguf")) << read_log();

  auto tokenize = platform::ChildProcess::spawn(
      {.args = {MOETIER_BINARY, "tokenize", "-m", model, "-f", prompt, "--ids"}, .output_path = log});
  ASSERT_TRUE(tokenize.is_ok()) << tokenize.status().message();
  EXPECT_TRUE(tokenize->wait().success()) << read_log();
  // The same text given as an argument gives the same ids.
  const std::string from_file = read_log();
  auto direct = platform::ChildProcess::spawn(
      {.args = {MOETIER_BINARY, "tokenize", "-m", model, "-p", "你好，世界", "--ids"}, .output_path = log});
  ASSERT_TRUE(direct.is_ok()) << direct.status().message();
  EXPECT_TRUE(direct->wait().success()) << read_log();
  EXPECT_EQ(read_log(), from_file);
  EXPECT_TRUE(contains(from_file, "[")) << from_file;
}

TEST(WindowsMessages, MlockNamesWhatIsMissing) {
  const uint64_t gib = uint64_t{1} << 30;
  const std::string right = platform::windows_lock_error_message(
      {.bytes = 3 * gib, .working_set_refused = true, .privilege_missing = true, .reason = "A required privilege is "
       "not held by the client", .min_working_set = 3 * gib, .max_working_set = 4 * gib});
  EXPECT_TRUE(contains(right, "cannot lock 3.00 GiB in RAM")) << right;
  EXPECT_TRUE(contains(right, "'Increase a process working set'")) << right;
  EXPECT_TRUE(contains(right, "secpol.msc")) << right;
  const std::string quota = platform::windows_lock_error_message(
      {.bytes = 3 * gib, .working_set_refused = false, .privilege_missing = false,
       .reason = "Insufficient quota to complete the requested service", .min_working_set = 3 * gib,
       .max_working_set = 4 * gib});
  EXPECT_TRUE(contains(quota, "VirtualLock failed with the minimum working set raised to 3.00 GiB")) << quota;
  EXPECT_TRUE(contains(quota, "Insufficient quota")) << quota;
  EXPECT_TRUE(contains(quota, "working-set quota")) << quota;
  EXPECT_EQ(quota.find('\n'), std::string::npos);
}

TEST(WindowsMessages, NoLargePagesSaysWhatItCostsAndHowToGrantIt) {
  using platform::HugePageMode;
  const platform::HugePageHelp windows = platform::huge_page_help(platform::OsFamily::kWindows);
  const gguf::ExpertPagesDecision d = gguf::decide_expert_pages(
      {.expert_bytes = uint64_t{17} << 30,
       .mem = {.total = uint64_t{64} << 30, .available = uint64_t{48} << 30},
       .thp = HugePageMode::kUnavailable,
       .help = windows});
  EXPECT_TRUE(d.move);  // into 4 KiB anonymous memory: repacked, unlike the mapping
  const std::string line = gguf::moved_message(uint64_t{17} << 30, 4, HugePageMode::kUnavailable, 0, false, windows);
  EXPECT_TRUE(contains(line, "large pages unavailable: 4 KiB pages")) << line;
  EXPECT_TRUE(contains(line, "up to ~40% slower")) << line;
  EXPECT_TRUE(contains(line, "'Lock pages in memory'")) << line;
  EXPECT_TRUE(contains(line, "sign out and in")) << line;
  EXPECT_FALSE(contains(line, "THP")) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);

  const std::string read = gguf::read_without_huge_pages_message(HugePageMode::kUnavailable, windows);
  EXPECT_TRUE(contains(read, "--no-mmap")) << read;
  EXPECT_TRUE(contains(read, "up to ~40% slower")) << read;
  EXPECT_TRUE(contains(read, "'Lock pages in memory'")) << read;
  EXPECT_EQ(gguf::read_without_huge_pages_message(HugePageMode::kMadvise, windows), "");
  EXPECT_TRUE(contains(gguf::moved_message(uint64_t{1} << 30, 1, HugePageMode::kMadvise, uint64_t{1} << 30, false,
                                           windows),
                       "large pages: 100% in 2 MiB pages"));

  // Linux's words stay Linux's.
  const platform::HugePageHelp linux_help = platform::huge_page_help(platform::OsFamily::kLinux);
  const std::string linux_read = gguf::read_without_huge_pages_message(HugePageMode::kNever, linux_help);
  EXPECT_TRUE(contains(linux_read, "transparent huge pages are disabled system-wide")) << linux_read;
  EXPECT_TRUE(contains(linux_read, "madvise")) << linux_read;
}

}  // namespace
}  // namespace moetier
