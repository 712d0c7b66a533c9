// The chat page at GET / (src/server/webui/, server/webui.h): served from the binary with
// Content-Type and ETag, public while the API needs the key, off with --no-ui; and the page
// itself in headless Chromium (tests/node/webui_test.mjs, puppeteer-core). scripts/test.sh
// installs Chromium and the npm packages and sets MOETIER_REQUIRE_NODE=1 and
// MOETIER_REQUIRE_CHROMIUM=1, so there a missing browser is a failure, not a skip.
// The screenshots go to $MOETIER_WEBUI_SCREENSHOT (default BUILD_DIR/test-artifacts/webui.png, and
// webui-mobile.png beside it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "server/webui.h"
#include "support/cli.h"
#include "support/ref_data.h"
#include "support/server_process.h"

namespace moetier {
namespace {

const std::string kModel = std::string(testing::kRefDir) + "/models/qwen35moe-small-ud_mix.gguf";

TEST(WebUi, EveryFileIsEmbeddedWithAnEtag) {
  std::vector<std::string> names;
  for (const server::WebUiFile& f : server::webui_files()) {
    names.emplace_back(f.name);
    EXPECT_FALSE(f.body.empty()) << f.name;
    EXPECT_EQ(f.etag.size(), 22u) << f.name;  // 20 hex digits of the SHA-256, quoted
    EXPECT_EQ(f.etag.front(), '"');
  }
  for (const char* want : {"index.html", "app.js", "markdown.js", "style.css"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
}

TEST(WebUi, PageIsPublicAndCachedWhileTheApiNeedsTheKey) {
  testing::ServerProcess server({"-m", kModel, "-t", "2", "--api-key", "test-key"});
  ASSERT_TRUE(server.ready()) << server.log();
  httplib::Client c = server.client();

  auto page = c.Get("/");
  ASSERT_TRUE(page) << server.log();
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<title>moetier</title>"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  const std::string etag = page->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_EQ(page->get_header_value("Cache-Control"), "no-cache");

  auto same = c.Get("/index.html", {{"If-None-Match", etag}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 304);
  EXPECT_TRUE(same->body.empty());
  auto changed = c.Get("/", {{"If-None-Match", "\"stale\""}});
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->status, 200);
  EXPECT_EQ(changed->body, page->body);

  for (auto [path, type] : {std::pair{"/app.js", "text/javascript; charset=utf-8"},
                            std::pair{"/markdown.js", "text/javascript; charset=utf-8"},
                            std::pair{"/style.css", "text/css; charset=utf-8"}}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), type) << path;
    EXPECT_NE(r->get_header_value("ETag"), etag) << path;
  }

  // Only the page's files are open: the API and unknown paths still want the key.
  for (const char* path : {"/v1/models", "/props", "/nothing.js"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
  }
  auto post = c.Post("/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
  auto models = c.Get("/v1/models", {{"Authorization", "Bearer test-key"}});
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
}

TEST(WebUi, NoUiAnswersANoteAtTheRoot) {
  testing::ServerProcess server({"-m", kModel, "-t", "2", "--no-ui"});
  ASSERT_TRUE(server.ready()) << server.log();
  httplib::Client c = server.client();
  auto root = c.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 404);
  EXPECT_NE(root->body.find("the web UI is off (--no-ui)"), std::string::npos) << root->body;
  auto script = c.Get("/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 404);
  EXPECT_EQ(script->body.find("moetierChat"), std::string::npos);
}

std::string find_chromium() {
  if (const char* env = std::getenv("MOETIER_CHROMIUM")) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

TEST(WebUiBrowser, ChatInHeadlessChromium) {
  const std::filesystem::path dir = std::filesystem::path(MOETIER_SOURCE_DIR) / "tests" / "node";
  const bool have_package = std::filesystem::exists(dir / "node_modules" / "puppeteer-core" / "package.json");
  const bool have_node = std::system("node --version >/dev/null 2>&1") == 0;
  if (!have_node || !have_package) {
    if (std::getenv("MOETIER_REQUIRE_NODE")) FAIL() << "Node.js or puppeteer-core is missing (run: cd tests/node && npm ci)";
    GTEST_SKIP() << "Node.js or tests/node/node_modules missing; scripts/test.sh installs them";
  }
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    if (std::getenv("MOETIER_REQUIRE_CHROMIUM")) FAIL() << "Chromium is missing (apt-get install chromium)";
    GTEST_SKIP() << "Chromium missing (set MOETIER_CHROMIUM or apt-get install chromium); scripts/setup.sh installs it";
  }
  const char* shot_env = std::getenv("MOETIER_WEBUI_SCREENSHOT");
  const std::string screenshot =
      shot_env ? shot_env
               : (std::filesystem::path(MOETIER_TEST_MODEL_DIR).parent_path() / "test-artifacts" / "webui.png").string();

  testing::ServerProcess server(
      {"-m", kModel, "-t", "2", "-np", "2", "--api-key", "test-key", "--alias", "moetier-small"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string out = testing::temp_file("webui.out");
  const std::string cmd = fmt::format("cd '{}' && CHROMIUM_PATH='{}' timeout 300 node webui_test.mjs http://127.0.0.1:{} test-key '{}' >'{}' 2>&1",
                                      dir.string(), chromium, server.port(), screenshot, out);
  const int rc = std::system(cmd.c_str());
  const std::string log = testing::slurp_file(out);
  std::filesystem::remove(out);
  EXPECT_EQ(rc, 0) << log << "\nserver:\n" << server.log();
  EXPECT_NE(log.find("all checks passed"), std::string::npos) << log;
  EXPECT_TRUE(std::filesystem::exists(screenshot)) << screenshot;
}

}  // namespace
}  // namespace moetier
