// platform/sha256.h against the FIPS 180-2 test vectors, whole and fed in pieces.
#include <gtest/gtest.h>

#include <string>

#include "platform/sha256.h"

namespace moetier::platform {
namespace {

TEST(PlatformSha256, KnownDigests) {
  EXPECT_EQ(*sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(*sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(*sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(PlatformSha256, PiecesOfAnySizeGiveTheWholeDigest) {
  // One million 'a': the long FIPS vector, fed in uneven pieces (and an empty one).
  const std::string a(1'000'000, 'a');
  auto digest = Sha256::start();
  ASSERT_TRUE(digest.is_ok());
  size_t done = 0;
  for (size_t piece = 0; done < a.size(); piece = (piece * 7 + 13) % 65'537) {
    const size_t n = std::min(piece, a.size() - done);
    ASSERT_TRUE(digest->update(a.data() + done, n).is_ok());
    done += n;
  }
  auto hex = digest->finish_hex();
  ASSERT_TRUE(hex.is_ok());
  EXPECT_EQ(*hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_FALSE(digest->finish_hex().is_ok());  // spent
}

}  // namespace
}  // namespace moetier::platform
