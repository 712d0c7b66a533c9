// The SHA-256 cache of `moetier bench`'s provenance (gguf/sha256_cache.h): where it lives,
// a digest computed once and then read back, and recomputed when the file changes; the
// digests themselves against known vectors.
#include <gtest/gtest.h>

#include <sys/time.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gguf/file_sha256.h"
#include "gguf/sha256_cache.h"
#include "support/cli.h"

namespace moetier {
namespace {

TEST(Sha256Cache, ComputedOnceThenTakenFromTheCacheUntilTheFileChanges) {
  // The user's cache folder is platform's (tested there); moetier keeps its own inside.
  const std::string user_dir = default_cache_dir();
  EXPECT_TRUE(user_dir.empty() || std::filesystem::path(user_dir).filename() == "moetier") << user_dir;
  const std::filesystem::path dir = testing::temp_file("shacache");
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "model.bin").string();
  std::ofstream(file) << "abc";
  const Sha256CacheOptions options{.cache_dir = (dir / "cache").string(), .log = nullptr, .progress = false};
  // SHA-256("abc"), FIPS 180-2 appendix B.1.
  const std::string abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
  auto first = cached_file_sha256(file, options);
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_EQ(first->sha256, abc);
  EXPECT_FALSE(first->from_cache);
  auto second = cached_file_sha256(file, options);
  ASSERT_TRUE(second.is_ok());
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->sha256, abc);
  // Same size, new content and mtime: hashed again.
  std::ofstream(file) << "abd";
  struct timeval times[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimes(file.c_str(), times), 0);
  auto third = cached_file_sha256(file, options);
  ASSERT_TRUE(third.is_ok());
  EXPECT_FALSE(third->from_cache);
  EXPECT_NE(third->sha256, abc);
  EXPECT_FALSE(cached_file_sha256((dir / "missing").string(), options).is_ok());
  std::filesystem::remove_all(dir);
}

// FIPS 180-2's test vectors: the in-memory digest and the file digest agree with them.
TEST(Sha256, KnownDigestsOfBytesAndOfAFile) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string million_a(1000000, 'a');
  EXPECT_EQ(sha256_hex(million_a), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "moetier_sha256_known.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << million_a;
  }
  auto digest = file_sha256(path.string(), {.progress = false});
  ASSERT_TRUE(digest.is_ok()) << digest.status().message();
  EXPECT_EQ(*digest, sha256_hex(million_a));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace moetier
