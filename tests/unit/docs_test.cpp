// The docs name what exists: every repository path a doc mentions in backquotes is a file or
// folder of the repository, every moetier symbol it names (`Type`, `Type::member`,
// `function()`) is defined somewhere in src/, and docs/architecture.md's layer table is the
// build's (CMakeLists.txt's moetier_layer lines, written to the build folder's
// generated/layers.txt). Renaming a file or a function without the doc fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace moetier {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = MOETIER_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> doc_files() {
  std::vector<fs::path> docs{kRoot / "README.md"};
  for (const auto& e : fs::directory_iterator(kRoot / "docs")) {
    if (e.path().extension() == ".md") docs.push_back(e.path());
  }
  std::sort(docs.begin(), docs.end());
  return docs;
}

// Backquoted spans of a Markdown text, outside fenced code blocks.
std::vector<std::string> code_spans(const std::string& text) {
  std::vector<std::string> spans;
  bool fenced = false;
  std::istringstream lines(text);
  std::string paragraph, line;
  auto flush = [&] {
    for (size_t i = paragraph.find('`'); i != std::string::npos; i = paragraph.find('`', i)) {
      const size_t end = paragraph.find('`', i + 1);
      if (end == std::string::npos) break;
      spans.push_back(paragraph.substr(i + 1, end - i - 1));
      i = end + 1;
    }
    paragraph.clear();
  };
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) {
      flush();
      fenced = !fenced;
      continue;
    }
    if (!fenced) paragraph += line + "\n";
  }
  flush();
  return spans;
}

// All of src/ (and tests/, scripts/) as one text, for symbol lookups.
const std::string& code_text() {
  static const std::string text = [] {
    std::string all;
    for (const char* dir : {"src", "tests", "scripts", "app", "cmake"}) {
      for (const auto& e : fs::recursive_directory_iterator(kRoot / dir)) {
        if (!e.is_regular_file() || e.path().string().find("node_modules") != std::string::npos) continue;
        all += read_text(e.path());
        all += '\n';
      }
    }
    all += read_text(kRoot / "CMakeLists.txt");
    return all;
  }();
  return text;
}

bool word_in_code(const std::string& word) {
  const std::string& text = code_text();
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = text.find(word); i != std::string::npos; i = text.find(word, i + 1)) {
    const bool left = i == 0 || !is_word(text[i - 1]);
    const bool right = i + word.size() >= text.size() || !is_word(text[i + word.size()]);
    if (left && right) return true;
  }
  return false;
}

// The moetier folders a doc path may start with (src/ may be left out, as the docs do).
const std::vector<std::string>& repo_roots() {
  static const std::vector<std::string> roots = [] {
    std::vector<std::string> r{"src/", "tests/", "scripts/", "docs/", "cmake/", "app/", "tools/eval/", ".ci/"};
    for (const auto& e : fs::directory_iterator(kRoot / "src")) {
      if (e.is_directory()) r.push_back(e.path().filename().string() + "/");
    }
    return r;
  }();
  return roots;
}

TEST(Docs, PathsNameFilesThatExist) {
  const std::regex path_like(R"(^[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*/?$)");
  std::vector<std::string> missing;
  for (const fs::path& doc : doc_files()) {
    for (std::string span : code_spans(read_text(doc))) {
      if (span.find('/') == std::string::npos || !std::regex_match(span, path_like)) continue;
      const bool ours = std::any_of(repo_roots().begin(), repo_roots().end(),
                                    [&](const std::string& r) { return span.rfind(r, 0) == 0; });
      if (!ours) continue;
      if (span.rfind("tools/", 0) == 0 && span.rfind("tools/eval/", 0) != 0) continue;
      const bool exists = fs::exists(kRoot / span) || fs::exists(kRoot / "src" / span);
      if (!exists) missing.push_back(doc.filename().string() + ": `" + span + "`");
    }
  }
  EXPECT_TRUE(missing.empty()) << "paths in docs that do not exist:\n" << [&] {
    std::string s;
    for (const auto& m : missing) s += "  " + m + "\n";
    return s;
  }();
}

TEST(Docs, SymbolsNameCodeThatExists) {
  // `Type::member`, `function()` and CamelCase type names.
  const std::regex qualified(R"(^([A-Z][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)(\(\))?$)");
  const std::regex call(R"(^([a-z_][a-z0-9_]*)\(\)$)");
  const std::regex type(R"(^[A-Z][a-z0-9]+([A-Z][a-z0-9]+)+$)");
  std::vector<std::string> missing;
  for (const fs::path& doc : doc_files()) {
    for (const std::string& span : code_spans(read_text(doc))) {
      std::smatch m;
      std::vector<std::string> words;
      if (std::regex_match(span, m, qualified)) {
        words = {m[1].str(), m[2].str()};
      } else if (std::regex_match(span, m, call)) {
        words = {m[1].str()};
      } else if (std::regex_match(span, type)) {
        words = {span};
      }
      for (const std::string& w : words) {
        if (!word_in_code(w)) missing.push_back(doc.filename().string() + ": `" + span + "` (" + w + ")");
      }
    }
  }
  EXPECT_TRUE(missing.empty()) << "symbols in docs that no code defines:\n" << [&] {
    std::string s;
    for (const auto& m : missing) s += "  " + m + "\n";
    return s;
  }();
}

// "layer=dep1,dep2" lines → layer → sorted deps.
std::map<std::string, std::set<std::string>> parse_layer_lines(const std::string& text) {
  std::map<std::string, std::set<std::string>> table;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    auto& deps = table[line.substr(0, eq)];
    std::istringstream list(line.substr(eq + 1));
    for (std::string d; std::getline(list, d, ',');) {
      if (!d.empty()) deps.insert(d);
    }
  }
  return table;
}

TEST(Docs, ArchitectureLayerTableIsTheBuilds) {
  const std::string built = read_text(fs::path(MOETIER_BUILD_DIR) / "generated" / "layers.txt");
  ASSERT_FALSE(built.empty()) << "no generated/layers.txt in the build folder";
  const auto build_table = parse_layer_lines(built);
  // Rows "| `src/NAME/` | what | dep, dep |" of the "Layers" table.
  std::map<std::string, std::set<std::string>> doc_table;
  const std::regex row(R"(^\| `src/([a-z_]+)/` \|.*\| ([^|]*) \|\s*$)");
  std::istringstream lines(read_text(kRoot / "docs" / "architecture.md"));
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    auto& deps = doc_table[m[1].str()];
    std::istringstream list(m[2].str());
    for (std::string d; std::getline(list, d, ',');) {
      d.erase(0, d.find_first_not_of(" `"));
      d.erase(d.find_last_not_of(" `") + 1);
      if (!d.empty() && d != "—") deps.insert(d);
    }
  }
  EXPECT_EQ(doc_table, build_table) << "docs/architecture.md's layer table differs from CMakeLists.txt's moetier_layer lines";
}

// The drawing "The layers by rank": each layer on the line of its rank, where a layer without
// dependencies has rank 0 and any other 1 + the highest rank among its dependencies.
TEST(Docs, ArchitectureRanksFollowTheBuild) {
  const auto build_table = parse_layer_lines(read_text(fs::path(MOETIER_BUILD_DIR) / "generated" / "layers.txt"));
  ASSERT_FALSE(build_table.empty());
  std::map<std::string, int> rank;
  const std::function<int(const std::string&)> rank_of = [&](const std::string& layer) -> int {
    if (auto it = rank.find(layer); it != rank.end()) return it->second;
    int r = 0;
    for (const std::string& d : build_table.at(layer)) r = std::max(r, 1 + rank_of(d));
    return rank[layer] = r;
  };
  for (const auto& [layer, deps] : build_table) rank_of(layer);

  const std::string doc = read_text(kRoot / "docs" / "architecture.md");
  const size_t start = doc.find("The layers by rank");
  ASSERT_NE(start, std::string::npos) << "docs/architecture.md has no drawing of the layers by rank";
  const size_t open = doc.find("```\n", start);
  const size_t close = doc.find("```\n", open + 4);
  ASSERT_TRUE(open != std::string::npos && close != std::string::npos);
  std::map<std::string, int> drawn;
  std::istringstream lines(doc.substr(open + 4, close - open - 4));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    int r = -1;
    if (!(words >> r)) continue;
    // The layer names come first; the description after them names no layer.
    for (std::string w; words >> w && build_table.count(w);) drawn[w] = r;
  }
  EXPECT_EQ(drawn, rank) << "docs/architecture.md's drawing of the layers by rank differs from the build's layers";
}

}  // namespace
}  // namespace moetier
