// The grammar matcher on the real Qwen3 vocabulary (151,936 tokens, MOETIER_REF_DIR/tokenizer):
// the trie mask against token-by-token acceptance, a tokenized JSON text fed step by step, a
// greedy walk over random logits that must produce valid JSON, and the mask's cost (printed,
// not asserted: the machine is shared).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "grammar/gbnf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "support/json_gbnf.h"
#include "text/tokenizer.h"

namespace moetier::grammar {
namespace {

const std::string kRefDir = MOETIER_REF_DIR;

constexpr const char* kJson = testing::kJsonGbnf;

// JSON of a fixed shape with bounded lengths, so that any walk ends.
constexpr const char* kRecord = R"(
root ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"tags\"" ws ":" ws "[" ws ( str ( ws "," ws str ){0,3} )? ws "]" ws "," ws "\"n\"" ws ":" ws num ws "}"
str  ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\nt] ){0,12} "\""
num  ::= "-"? [0-9]{1,6}
ws   ::= " "?
)";

class GrammarVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = gguf::read_header(kRefDir + "/tokenizer/qwen3-vocab.gguf");
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    auto tok = text::Tokenizer::from_gguf(*file);
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    tokenizer_ = new text::Tokenizer(std::move(tok).value());
    const auto t0 = std::chrono::steady_clock::now();
    vocab_ = new TokenVocabulary(*tokenizer_);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ vocab    ] %d tokens, %zu trie nodes, built in %.1f ms\n", vocab_->size(), vocab_->trie().size(), ms);
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete tokenizer_;
    vocab_ = nullptr;
    tokenizer_ = nullptr;
  }

  static std::shared_ptr<const Grammar> grammar(const char* text) {
    auto g = Grammar::parse(text);
    EXPECT_TRUE(g.is_ok()) << g.status().message();
    return std::make_shared<const Grammar>(std::move(g).value());
  }

  // The mask from the trie walk must equal accepting each token on its own after `prefix`.
  static void expect_mask_matches_brute_force(const std::shared_ptr<const Grammar>& g, std::string_view prefix) {
    auto m = GrammarMatcher::create(g);
    ASSERT_TRUE(m->accept_bytes(prefix)) << prefix;
    std::vector<uint8_t> allowed;
    m->fill_allowed(*vocab_, allowed);
    auto probe = GrammarMatcher::create(g);
    int n_allowed = 0;
    for (int32_t id = 0; id < vocab_->size(); ++id) {
      probe->reset();
      ASSERT_TRUE(probe->accept_bytes(prefix));
      const bool want = probe->accept_token(id, *vocab_);
      ASSERT_EQ(allowed[static_cast<size_t>(id)] != 0, want)
          << "token " << id << " '" << vocab_->piece(id) << "' after '" << prefix << "'";
      n_allowed += want;
    }
    std::printf("[ mask     ] after '%s': %d tokens allowed\n", std::string(prefix).c_str(), n_allowed);
    EXPECT_GT(n_allowed, 0);
  }

  static text::Tokenizer* tokenizer_;
  static TokenVocabulary* vocab_;
};

text::Tokenizer* GrammarVocab::tokenizer_ = nullptr;
TokenVocabulary* GrammarVocab::vocab_ = nullptr;

TEST_F(GrammarVocab, VocabularyFromTokenizer) {
  ASSERT_EQ(vocab_->size(), 151936);
  EXPECT_TRUE(vocab_->is_eog(151645));   // <|im_end|>
  EXPECT_TRUE(vocab_->is_eog(151643));   // <|endoftext|>
  EXPECT_FALSE(vocab_->is_eog(151644));  // <|im_start|>: control, never allowed
  EXPECT_EQ(vocab_->piece(151644), "");
  EXPECT_EQ(vocab_->piece(220), " ");
  EXPECT_EQ(vocab_->piece(151667), "<think>");  // USER_DEFINED: matched by its text
}

TEST_F(GrammarVocab, MaskEqualsTokenByTokenAcceptance) {
  const auto g = grammar(kJson);
  for (const char* prefix : {"", "{\"k", "{\"key\": [1, 2", "[\"\xE4\xBD", "{\"a\": tr", "[1.5e"}) {
    expect_mask_matches_brute_force(g, prefix);
  }
}

TEST_F(GrammarVocab, TokenizedJsonIsAllowedStepByStep) {
  const auto g = grammar(kJson);
  auto m = GrammarMatcher::create(g);
  const std::string text =
      "{\"name\": \"h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x8A\", \"list\": [1, -2.5e3, true, null],\n"
      "  \"nested\": {\"deep\": [[], {}], \"esc\": \"a\\\"b\\u00e9\\n\"}}";
  const std::vector<int32_t> ids = tokenizer_->encode(text, false);
  std::vector<float> logits(static_cast<size_t>(vocab_->size()));
  double total_ms = 0;
  double max_ms = 0;
  for (const int32_t id : ids) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    m->mask_logits(logits, *vocab_);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total_ms += ms;
    max_ms = std::max(max_ms, ms);
    ASSERT_EQ(logits[static_cast<size_t>(id)], 0.0f) << "token " << id << " '" << vocab_->piece(id) << "' masked";
    EXPECT_EQ(logits[151645], m->can_end() ? 0.0f : -INFINITY);
    ASSERT_TRUE(m->accept_token(id, *vocab_));
  }
  EXPECT_TRUE(m->can_end());
  std::fill(logits.begin(), logits.end(), 0.0f);
  m->mask_logits(logits, *vocab_);
  EXPECT_EQ(logits[151645], 0.0f);  // complete: EOG allowed
  EXPECT_EQ(logits[151643], 0.0f);
  EXPECT_EQ(logits[151644], -INFINITY);  // <|im_start|> never
  std::printf("[ timing   ] JSON text, %zu tokens: mask %.2f ms mean, %.2f ms max (first use of each state included)\n",
              ids.size(), total_ms / static_cast<double>(ids.size()), max_ms);
}

TEST_F(GrammarVocab, GreedyWalkOverMaskProducesValidJson) {
  const auto g = grammar(kRecord);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto m = GrammarMatcher::create(g);
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> logits(static_cast<size_t>(vocab_->size()));
    std::string out;
    bool ended = false;
    for (int step = 0; step < 400 && !ended; ++step) {
      for (float& x : logits) x = normal(rng);
      m->mask_logits(logits, *vocab_);
      const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ASSERT_GT(logits[static_cast<size_t>(best)], -INFINITY) << "nothing allowed after '" << out << "'";
      ASSERT_TRUE(m->accept_token(best, *vocab_));
      if (vocab_->is_eog(best)) ended = true;
      else out += vocab_->piece(best);
    }
    ASSERT_TRUE(ended) << out;
    std::printf("[ walk     ] seed %u: %s\n", seed, out.c_str());
    const auto parsed = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << out;
    EXPECT_TRUE(parsed.contains("name") && parsed.contains("tags") && parsed.contains("n")) << out;
    EXPECT_TRUE(parsed["n"].is_number_integer()) << out;
  }
}

TEST_F(GrammarVocab, MaskTiming) {
  const auto g = grammar(kJson);
  std::vector<float> logits(static_cast<size_t>(vocab_->size()));
  for (const char* prefix : {"", "{\"", "{\"key\": \"some text ", "[1, 2, {\"a\": [", "{\"a\": 12"}) {
    auto m = GrammarMatcher::create(g);
    ASSERT_TRUE(m->accept_bytes(prefix));
    double cold = 0;
    double warm = 1e9;
    for (int rep = 0; rep < 4; ++rep) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const auto t0 = std::chrono::steady_clock::now();
      m->mask_logits(logits, *vocab_);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (rep == 0) cold = ms;
      else warm = std::min(warm, ms);
    }
    const auto n = std::count(logits.begin(), logits.end(), 0.0f);
    std::printf("[ timing   ] after '%s': %ld allowed, mask %.2f ms first, %.2f ms again\n", prefix,
                static_cast<long>(n), cold, warm);
  }
}

}  // namespace
}  // namespace moetier::grammar
