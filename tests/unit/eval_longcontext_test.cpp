// longcontext-v1: the item generator (determinism, lengths, needle placement), the scoring
// and drift detector on crafted answers, and the table / heat map.
#include <gtest/gtest.h>

#include <regex>

#include "eval/longcontext_items.h"
#include "eval/longcontext_report.h"
#include "eval/longcontext_score.h"
#include "gguf/gguf.h"
#include "platform/sha256.h"
#include "support/ref_data.h"
#include "text/tokenizer.h"

namespace moetier::eval {
namespace {

// The real Qwen3 tokenizer (the vocab-only reference file).
const text::Tokenizer& qwen3() {
  static const text::Tokenizer tok = [] {
    auto header = gguf::read_header(std::string(testing::kRefDir) + "/tokenizer/qwen3-vocab.gguf");
    EXPECT_TRUE(header.is_ok());
    auto t = text::Tokenizer::from_gguf(*header);
    EXPECT_TRUE(t.is_ok());
    return std::move(*t);
  }();
  return tok;
}

int64_t count(std::string_view s) { return static_cast<int64_t>(qwen3().encode(s, {.parse_special = false}).size()); }

std::string sha256(const std::string& s) {
  auto hex = platform::sha256_hex(s);
  EXPECT_TRUE(hex.is_ok());
  return hex.is_ok() ? *hex : std::string();
}

TEST(LongContextItems, DefaultGridIs26ItemsIn13Cells) {
  auto cells = longcontext_cells({});
  ASSERT_TRUE(cells.is_ok());
  EXPECT_EQ(cells->size(), 13u);
  auto product = longcontext_cells({.lengths = {1024, 2048}, .depths = {0, 50, 100}});
  ASSERT_TRUE(product.is_ok());
  EXPECT_EQ(product->size(), 6u);
  EXPECT_FALSE(longcontext_cells({.depths = {101}}).is_ok());
  EXPECT_FALSE(longcontext_cells({.lengths = {10}}).is_ok());
}

// The default set, generated with the Qwen3 tokenizer: its bytes are fixed (hash), every
// length is within 1% of its target (and not above it), the needle occurs once, at the
// depth asked for.
TEST(LongContextItems, DefaultSetIsFixedAndMeasured) {
  auto items = make_longcontext_items({}, count);
  ASSERT_TRUE(items.is_ok()) << items.status().message();
  ASSERT_EQ(items->size(), 26u);
  std::string all;
  int zh = 0;
  for (const LongContextItem& it : *items) {
    all += it.id + "\n" + it.needle + "\n" + it.prompt + '\0';
    zh += it.lang == "zh";
    EXPECT_EQ(it.prompt_tokens, count(it.prompt)) << it.id;
    EXPECT_LE(it.prompt_tokens, it.target_tokens) << it.id;
    EXPECT_GE(it.prompt_tokens, it.target_tokens * 0.99) << it.id;
    const size_t first = it.prompt.find(it.needle);
    ASSERT_NE(first, std::string::npos) << it.id;
    EXPECT_EQ(it.prompt.find(it.needle, first + 1), std::string::npos) << it.id;
    EXPECT_TRUE(std::regex_match(it.needle, std::regex("[A-Z]{3}-[0-9]{4}-[A-Z]{3}"))) << it.needle;
    EXPECT_NEAR(it.needle_depth, it.depth_percent / 100.0, 0.02) << it.id;
  }
  EXPECT_EQ(zh, 13);
  // Changes only when the generator or the word lists change (then say so in the docs: it
  // is a new version of the set, not longcontext-v1).
  EXPECT_EQ(sha256(all), "a2d4d74aa69c33aebd3143f847dc50978ffc97d2adcbd0c44f34efb60f1d38eb");
}

TEST(LongContextItems, AnItemDoesNotDependOnTheRestOfTheSet) {
  auto alone = make_longcontext_item(kLongContextDefaultSeed, "zh", 8192, 25, count);
  auto subset = make_longcontext_items({.lengths = {4096, 8192}, .depths = {25}, .langs = {"zh"}}, count);
  ASSERT_TRUE(alone.is_ok() && subset.is_ok());
  ASSERT_EQ(subset->size(), 2u);
  EXPECT_EQ((*subset)[1].prompt, alone->prompt);
  EXPECT_EQ((*subset)[1].needle, alone->needle);
  auto other_seed = make_longcontext_item(kLongContextDefaultSeed + 1, "zh", 8192, 25, count);
  ASSERT_TRUE(other_seed.is_ok());
  EXPECT_NE(other_seed->prompt, alone->prompt);
  EXPECT_FALSE(make_longcontext_item(1, "fr", 4096, 50, count).is_ok());
  EXPECT_FALSE(make_longcontext_item(1, "en", 40, 50, count).is_ok());
}

// ---- scoring

const std::string kHay =
    "The old ferryman described the empty harbour while children played nearby. A quiet librarian looked for a long "
    "time at the wooden fence because it had always been done that way. The fishermen drew a map of the empty harbour "
    "and nobody seemed to mind. Remember this: the access code for the mountain hut is UAH-1717-EQV. A family of "
    "farmers swept the path beside the bakery window and the work took longer than expected.";
const std::string kNeedle = "UAH-1717-EQV";

Verdict v(const std::string& answer, const std::string& finish = "stop") {
  return classify_answer(answer, finish, kNeedle, kHay).verdict;
}

TEST(LongContextScore, CraftedAnswers) {
  EXPECT_EQ(v("UAH-1717-EQV"), Verdict::kCorrect);
  EXPECT_EQ(v("The access code for the mountain hut is UAH-1717-EQV."), Verdict::kCorrect);
  EXPECT_EQ(v("<think>Let me look for the code.</think>\n\nUAH-1717-EQV"), Verdict::kCorrect);
  EXPECT_EQ(v("通行码是 UAH-1717-EQV。"), Verdict::kCorrect);
  EXPECT_EQ(v("UAH-1717-EQV or maybe QRS-1234-TUV"), Verdict::kWrong);
  EXPECT_EQ(v("UAH-1717-EQX"), Verdict::kWrong);
  EXPECT_EQ(v("The code is 1717."), Verdict::kWrong);
  EXPECT_EQ(v(""), Verdict::kEmpty);
  EXPECT_EQ(v("   \n"), Verdict::kEmpty);
  EXPECT_EQ(v("<think>I should check every sentence", "length"), Verdict::kEmpty);  // reasoning never closed
  EXPECT_EQ(v("The text does not mention an access code."), Verdict::kEmpty);
  EXPECT_EQ(v("抱歉，文中没有提到通行码。"), Verdict::kEmpty);
  EXPECT_EQ(v("To find the code I will go through the text paragraph by paragraph and", "length"), Verdict::kTruncated);
}

TEST(LongContextScore, EnumerationDrift) {
  // (a) copying long runs of the haystack, even with the needle inside.
  const std::string copy = kHay + " " + kHay.substr(0, 200);
  const Classification c = classify_answer(copy, "stop", kNeedle, kHay);
  EXPECT_EQ(c.verdict, Verdict::kDrift) << c.reason;
  EXPECT_TRUE(c.needle_present);
  EXPECT_GT(c.haystack_copy, 0.9);
  // (b) listing words until the budget runs out.
  std::string list;
  for (int i = 0; i < 30; ++i) list += (i % 3 == 0 ? "harbour" : i % 3 == 1 ? "fence" : "bakery") + std::string(", ");
  EXPECT_EQ(v(list, "length"), Verdict::kDrift);
  std::string zh_list;
  for (int i = 0; i < 25; ++i) zh_list += "码头、";
  EXPECT_EQ(v(zh_list, "length"), Verdict::kDrift);
  // The same list that ended on its own is not drift (the model stopped).
  EXPECT_EQ(v(list, "stop"), Verdict::kWrong);
  // A long answer in the model's own words is not copying.
  std::string own;
  for (int i = 0; i < 20; ++i) own += "I could not find any code in this passage at all, sorry about that. ";
  EXPECT_NE(v(own), Verdict::kDrift);
  // A short quote of the needle sentence is not copying (below the answer-length floor).
  EXPECT_EQ(v("Remember this: the access code for the mountain hut is UAH-1717-EQV."), Verdict::kCorrect);
}

// ---- report

TEST(LongContextReport, TableAndHeatMap) {
  std::vector<nlohmann::json> results = {
      {{"length", 4096}, {"depth", 10}, {"verdict", "correct"}}, {{"length", 4096}, {"depth", 10}, {"verdict", "wrong"}},
      {{"length", 4096}, {"depth", 90}, {"verdict", "correct"}}, {{"length", 4096}, {"depth", 90}, {"verdict", "correct"}},
      {{"length", 8192}, {"depth", 10}, {"verdict", "drift"}},   {{"length", 8192}, {"depth", 10}, {"verdict", "empty"}}};
  const auto cells = score_cells(results);
  ASSERT_EQ(cells.size(), 3u);
  const std::string md = table_markdown(cells);
  EXPECT_NE(md.find("| 4096 | 1/2 | 2/2 | 3/4 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 8192 | 0/2 | — | 0/2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Correct: 3/6"), std::string::npos) << md;
  EXPECT_NE(md.find("drift 1"), std::string::npos) << md;
  EXPECT_NE(md.find("Samples per cell: 2"), std::string::npos) << md;
  const nlohmann::json j = table_json(cells);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_DOUBLE_EQ(j[0]["accuracy"].get<double>(), 0.5);
  // The heat map holds one cell element per scored cell with its numbers, plus one grey
  // square for the missing (8192, 90%).
  const std::string svg = heatmap_svg(cells, "test <run>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("test &lt;run&gt;"), std::string::npos);
  std::regex cell("class=\"cell\" data-length=\"([0-9]+)\" data-depth=\"([0-9]+)\" data-correct=\"([0-9]+)\" data-n=\"([0-9]+)\"");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), cell); it != std::sregex_iterator(); ++it) {
    found.push_back((*it)[1].str() + "/" + (*it)[2].str() + ":" + (*it)[3].str() + "/" + (*it)[4].str());
  }
  EXPECT_EQ(found, (std::vector<std::string>{"4096/10:1/2", "4096/90:2/2", "8192/10:0/2"}));
  EXPECT_NE(svg.find("#eeeeee"), std::string::npos);
}

}  // namespace
}  // namespace moetier::eval
