// longcontext-v1 scoring: exact match of the needle, and the failure classes users' reports
// saw, each defined precisely so that the same answer always gets the same class.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace moetier::eval {

enum class Verdict {
  kCorrect,    // the needle, and no other identifier of its shape, in the answer
  kWrong,      // an answer that does not contain the needle (or names other identifiers too)
  kEmpty,      // nothing, or a refusal ("not mentioned", "无法回答", ...) without the needle
  kTruncated,  // stopped by the token budget (finish_reason "length"), no needle, not drift
  kDrift,      // enumeration drift: see classify_answer
};
std::string_view verdict_name(Verdict v);  // "correct", "wrong", "empty", "truncated", "drift"

struct Classification {
  Verdict verdict = Verdict::kWrong;
  std::string reason;            // one line: why this class
  bool needle_present = false;   // the needle occurs in the answer (even when drift)
  double haystack_copy = 0;      // fraction of the answer's bytes inside runs copied from the haystack
  int64_t list_items = 0;        // short list items in the answer (see below)
};

// Thresholds of the drift detector (bytes; UTF-8, so a Chinese character is 3).
struct DriftThresholds {
  int64_t copy_window = 24;        // a copied run: a window of this many bytes found verbatim in the haystack
  int64_t copy_min_answer = 400;   // answers shorter than this are never "copying"
  double copy_fraction = 0.5;      // ≥ this share of the answer's bytes inside copied windows
  int64_t list_item_max = 60;      // a list item: a segment of at most this many bytes
  int64_t list_min_items = 20;     // ≥ this many items ...
  // ... and the answer ran out of budget (finish_reason "length"): listing until the end.
};

// Classifies an answer (the message content; a leading <think>…</think> block is removed
// first). Order: empty → drift → correct → refusal → truncated → wrong.
// Enumeration drift is either
//   (a) haystack copying: the answer is ≥ copy_min_answer bytes and ≥ copy_fraction of its
//       bytes lie inside copy_window-byte windows that occur verbatim in the haystack; or
//   (b) listing until the budget ran out: finish_reason is "length" and the answer splits
//       (at newlines and , ; ， 、 ；) into ≥ list_min_items non-empty segments of at most
//       list_item_max bytes.
// A drifting answer counts as drift even when the needle is somewhere in it.
Classification classify_answer(std::string_view answer, std::string_view finish_reason, std::string_view needle,
                               std::string_view haystack, const DriftThresholds& thresholds = {});

// The answer with a leading reasoning block (<think> … </think>) removed, trimmed.
std::string strip_reasoning(std::string_view answer);

}  // namespace moetier::eval
