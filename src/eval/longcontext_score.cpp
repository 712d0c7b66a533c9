#include "eval/longcontext_score.h"

#include <algorithm>
#include <array>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace moetier::eval {

namespace {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

uint64_t window_hash(std::string_view w) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : w) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Share of the answer's bytes covered by windows that occur in the haystack.
double copied_fraction(std::string_view answer, std::string_view haystack, int64_t window) {
  const auto w = static_cast<size_t>(window);
  if (answer.size() < w || haystack.size() < w) return 0;
  std::unordered_set<uint64_t> windows;
  windows.reserve(haystack.size());
  for (size_t i = 0; i + w <= haystack.size(); ++i) windows.insert(window_hash(haystack.substr(i, w)));
  std::vector<bool> covered(answer.size(), false);
  for (size_t i = 0; i + w <= answer.size(); ++i) {
    if (windows.count(window_hash(answer.substr(i, w))) && haystack.find(answer.substr(i, w)) != std::string_view::npos) {
      std::fill(covered.begin() + static_cast<std::ptrdiff_t>(i), covered.begin() + static_cast<std::ptrdiff_t>(i + w), true);
    }
  }
  return static_cast<double>(std::count(covered.begin(), covered.end(), true)) / static_cast<double>(answer.size());
}

// Non-empty segments of at most max_bytes between separators (newline , ; ， 、 ；).
int64_t short_segments(std::string_view s, int64_t max_bytes) {
  static constexpr std::array<std::string_view, 6> kSeparators = {"\n", ",", ";", "，", "、", "；"};
  int64_t n = 0;
  size_t start = 0, i = 0;
  const auto close = [&](size_t end) {
    const std::string_view seg = trim(s.substr(start, end - start));
    if (!seg.empty() && static_cast<int64_t>(seg.size()) <= max_bytes) ++n;
  };
  while (i < s.size()) {
    size_t sep_len = 0;
    for (std::string_view sep : kSeparators) {
      if (s.substr(i, sep.size()) == sep) {
        sep_len = sep.size();
        break;
      }
    }
    if (sep_len) {
      close(i);
      i += sep_len;
      start = i;
    } else {
      ++i;
    }
  }
  close(s.size());
  return n;
}

// Identifiers of the needle's shape (AAA-0000-AAA) in the text.
std::vector<std::string_view> identifiers(std::string_view s) {
  std::vector<std::string_view> out;
  const auto upper = [](char c) { return c >= 'A' && c <= 'Z'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  for (size_t i = 0; i + 12 <= s.size(); ++i) {
    const std::string_view t = s.substr(i, 12);
    bool ok = t[3] == '-' && t[8] == '-';
    for (int k : {0, 1, 2, 9, 10, 11}) ok = ok && upper(t[static_cast<size_t>(k)]);
    for (int k : {4, 5, 6, 7}) ok = ok && digit(t[static_cast<size_t>(k)]);
    if (ok) out.push_back(t);
  }
  return out;
}

bool is_refusal(std::string_view s) {
  static constexpr std::array<std::string_view, 16> kPhrases = {
      "not mentioned", "no access code", "does not mention", "doesn't mention", "cannot find", "can't find",
      "unable to", "i cannot", "i can't", "not provided", "没有提到", "未提及", "无法", "找不到", "抱歉", "没有提供"};
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (std::string_view p : kPhrases) {
    if (lower.find(p) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kCorrect: return "correct";
    case Verdict::kWrong: return "wrong";
    case Verdict::kEmpty: return "empty";
    case Verdict::kTruncated: return "truncated";
    case Verdict::kDrift: return "drift";
  }
  return "wrong";
}

std::string strip_reasoning(std::string_view answer) {
  std::string_view s = trim(answer);
  if (s.substr(0, 7) == "<think>") {
    const size_t end = s.find("</think>");
    // An unclosed block is all reasoning: the answer never came.
    s = end == std::string_view::npos ? std::string_view{} : s.substr(end + 8);
  }
  return std::string(trim(s));
}

Classification classify_answer(std::string_view raw_answer, std::string_view finish_reason, std::string_view needle,
                               std::string_view haystack, const DriftThresholds& t) {
  const std::string answer = strip_reasoning(raw_answer);
  Classification c;
  c.needle_present = !needle.empty() && answer.find(needle) != std::string::npos;
  if (answer.empty()) {
    c.verdict = Verdict::kEmpty;
    c.reason = finish_reason == "length" ? "no answer before the token budget ran out" : "empty answer";
    return c;
  }
  const bool out_of_budget = finish_reason == "length";
  c.list_items = short_segments(answer, t.list_item_max);
  if (static_cast<int64_t>(answer.size()) >= t.copy_min_answer) {
    c.haystack_copy = copied_fraction(answer, haystack, t.copy_window);
  }
  if (static_cast<int64_t>(answer.size()) >= t.copy_min_answer && c.haystack_copy >= t.copy_fraction) {
    c.verdict = Verdict::kDrift;
    c.reason = fmt::format("{:.0f}% of {} bytes copied from the text", 100 * c.haystack_copy, answer.size());
    return c;
  }
  if (out_of_budget && c.list_items >= t.list_min_items) {
    c.verdict = Verdict::kDrift;
    c.reason = fmt::format("listed {} items until the token budget ran out", c.list_items);
    return c;
  }
  if (c.needle_present) {
    for (std::string_view id : identifiers(answer)) {
      if (id != needle) {
        c.verdict = Verdict::kWrong;
        c.reason = fmt::format("names another identifier too ({})", id);
        return c;
      }
    }
    c.verdict = Verdict::kCorrect;
    c.reason = "the needle";
    return c;
  }
  if (is_refusal(answer)) {
    c.verdict = Verdict::kEmpty;
    c.reason = "refusal";
    return c;
  }
  if (out_of_budget) {
    c.verdict = Verdict::kTruncated;
    c.reason = "token budget ran out without the needle";
    return c;
  }
  c.verdict = Verdict::kWrong;
  const std::vector<std::string_view> ids = identifiers(answer);
  c.reason = ids.empty() ? "no identifier in the answer" : fmt::format("answered {}", ids.front());
  return c;
}

}  // namespace moetier::eval
