// longcontext-v1: single-needle retrieval items (RULER's S-NIAH shape), generated from a
// fixed seed. An item is a long filler text (English or Chinese) with one random identifier
// (the needle) inserted at a relative depth, followed by a question asking for it; its
// length is measured with the model's own tokenizer.
//
// Determinism: every item draws from its own random stream, seeded from (seed, language,
// target length, depth), with a hand-written generator (splitmix64; no std distribution,
// whose output differs between standard libraries). So the same seed and tokenizer give
// byte-identical items on every machine, and an item is the same whether it is generated
// alone (--lengths / --depths / --lang subsets) or with the whole set.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace moetier::eval {

inline constexpr uint64_t kLongContextDefaultSeed = 20260922;  // the date of the report the suite reproduces

struct LongContextItem {
  std::string id;             // "en-16384-d50"
  std::string lang;           // "en" or "zh"
  int64_t target_tokens = 0;  // the length asked for
  int64_t depth_percent = 0;  // where the needle goes, % of the filler
  std::string needle;         // the identifier, e.g. "KQM-4827-TZR"
  std::string prompt;         // the whole user message: instructions, filler with the needle, question
  int64_t prompt_tokens = 0;  // tokens of `prompt` (the tokenizer's count; no chat template)
  double needle_depth = 0;    // tokens before the needle / prompt_tokens, as placed
};

// The test set: (length, depth) cells × languages. Without explicit lists the default
// longcontext-v1 grid is used: lengths 4096, 8192, 16384, 32768, 65536, each with depths
// {10, 50, 90} (the 1st, 3rd and 5th length) or {25, 75} (the 2nd and 4th): 13 cells × 2
// languages = 26 items, 2 per cell. Explicit --lengths / --depths give the full product
// (a list not given keeps its default values).
struct LongContextSpec {
  uint64_t seed = kLongContextDefaultSeed;
  std::vector<int64_t> lengths;     // empty: default
  std::vector<int64_t> depths;      // percent, 0..100; empty: default
  std::vector<std::string> langs;   // "en", "zh"; empty: both
};

struct LongContextCell {
  int64_t length = 0;
  int64_t depth = 0;
};
// The cells the spec selects, in generation order (length, then depth).
Result<std::vector<LongContextCell>> longcontext_cells(const LongContextSpec& spec);

// Token count of a text with the model's tokenizer (no BOS, no template).
using TokenCounter = std::function<int64_t(std::string_view text)>;

// One item; kBadInput if the length is too small to hold the question (< 64 tokens).
Result<LongContextItem> make_longcontext_item(uint64_t seed, std::string_view lang, int64_t target_tokens,
                                              int64_t depth_percent, const TokenCounter& count);

// Items for every cell and language, in order. `progress` (may be empty) is called after
// each item with (done, total).
Result<std::vector<LongContextItem>> make_longcontext_items(
    const LongContextSpec& spec, const TokenCounter& count,
    const std::function<void(size_t done, size_t total)>& progress = {});

// Lengths are within this fraction of the target (the generator stops adjusting there).
inline constexpr double kLengthTolerance = 0.005;

}  // namespace moetier::eval
