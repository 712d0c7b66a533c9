// The official `openai` npm package against `moetier serve`: what an application sees
// (tests/node/openai_client.mjs). scripts/test.sh installs the package (npm ci) and sets
// MOETIER_REQUIRE_NODE=1, so in CI a missing Node.js or package is a failure, not a skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "support/cli.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

TEST(ServerOpenAiClient, NodeOpenAiPackageTalksToTheServer) {
  const std::filesystem::path dir = std::filesystem::path(MOETIER_SOURCE_DIR) / "tests" / "node";
  const bool required = std::getenv("MOETIER_REQUIRE_NODE") != nullptr;
  const bool have_package = std::filesystem::exists(dir / "node_modules" / "openai" / "package.json");
  const bool have_node = std::system("node --version >/dev/null 2>&1") == 0;
  if (!have_node || !have_package) {
    if (required) FAIL() << "Node.js or the openai package is missing (run: cd tests/node && npm ci)";
    GTEST_SKIP() << "Node.js or tests/node/node_modules missing; scripts/test.sh installs them";
  }
  testing::ServerProcess server({"-m", std::string(testing::kRefDir) + "/models/qwen35moe-small-ud_mix.gguf", "-t", "2",
                                 "-np", "2", "--api-key", "test-key", "--alias", "moetier-small"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string out = testing::temp_file("node.out");
  const std::string cmd = fmt::format("cd '{}' && node openai_client.mjs http://127.0.0.1:{}/v1 test-key >'{}' 2>&1",
                                      dir.string(), server.port(), out);
  const int rc = std::system(cmd.c_str());
  const std::string log = testing::slurp_file(out);
  std::filesystem::remove(out);
  EXPECT_EQ(rc, 0) << log << "\nserver:\n" << server.log();
  EXPECT_NE(log.find("all checks passed"), std::string::npos) << log;
}

}  // namespace
}  // namespace moetier
