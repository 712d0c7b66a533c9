#include <gtest/gtest.h>

#include "core/args.h"

namespace moetier {

TEST(ArgParser, ParsesLlamaCppStyleFlags) {
  ArgParser p("test", "test");
  int64_t ngl = 0;
  std::string model;
  bool json = false;
  p.option({"-ngl", "--n-gpu-layers"}, "N", "layers on GPU", &ngl);
  p.flag({"--json"}, &json, "json");
  p.positional("MODEL", "model", &model);
  const char* argv[] = {"test", "m.gguf", "-ngl", "99", "--json"};
  ASSERT_TRUE(p.parse(5, const_cast<char**>(argv)).is_ok());
  EXPECT_EQ(ngl, 99);
  EXPECT_TRUE(json);
  EXPECT_EQ(model, "m.gguf");
}

TEST(ArgParser, LongFlagsTakeUnderscoresForDashes) {
  ArgParser p("test", "test");
  int64_t ctx = 0;
  bool sampling = false;
  p.option({"-c", "--ctx-size"}, "N", "ctx", &ctx);
  p.flag({"--backend-sampling"}, &sampling, "b");
  const char* argv[] = {"test", "--ctx_size=64", "--backend_sampling"};
  ASSERT_TRUE(p.parse(3, const_cast<char**>(argv)).is_ok());
  EXPECT_EQ(ctx, 64);
  EXPECT_TRUE(sampling);
  EXPECT_TRUE(p.given("--ctx-size"));
  const char* short_flag[] = {"test", "-ctx_size", "1"};  // only long flags
  EXPECT_FALSE(p.parse(3, const_cast<char**>(short_flag)).is_ok());
}

TEST(ArgParser, RejectsUnknownFlagAndBadInteger) {
  ArgParser p("test", "test");
  int64_t c = 0;
  p.option({"-c"}, "N", "ctx", &c);
  const char* bad1[] = {"test", "--nope"};
  auto st = p.parse(2, const_cast<char**>(bad1));
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(st.exit_code(), 2);
  EXPECT_NE(st.message().find("unknown flag '--nope'"), std::string::npos);
  const char* bad2[] = {"test", "-c", "12x"};
  st = p.parse(3, const_cast<char**>(bad2));
  EXPECT_NE(st.message().find("not an integer"), std::string::npos);
  const char* bad3[] = {"test", "-c"};
  st = p.parse(2, const_cast<char**>(bad3));
  EXPECT_NE(st.message().find("needs a value"), std::string::npos);
}

}  // namespace moetier
