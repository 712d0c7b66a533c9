#include "server/text_stream.h"

#include <algorithm>

namespace moetier::server {

namespace {

constexpr std::string_view kOpenTag = "<think>";
constexpr std::string_view kCloseTag = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t first_non_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Length of the longest proper prefix of `tag` that `s` ends with.
size_t partial_suffix(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k) {
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = held_.find(stops_[i]);
    if (pos < best) {
      best = pos;
      matched_index_ = i;
    }
  }
  if (best != std::string::npos) {
    std::string out = held_.substr(0, best);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest tail that could still grow into a stop string. Stop strings are
  // valid UTF-8, so the tail starts on a character boundary.
  size_t keep = 0;
  for (const auto& s : stops_) keep = std::max(keep, partial_suffix(held_, s));
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::finish() {
  std::string out;
  out.swap(held_);
  return out;
}

ReasoningSplitter::ReasoningSplitter(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text) {
  held_.append(text);
  Delta d;
  // Emits reasoning text: white space before the first visible character is dropped.
  auto emit_reasoning = [&](std::string_view s) {
    if (!reasoning_started_) {
      s.remove_prefix(first_non_space(s));
      if (s.empty()) return;
      reasoning_started_ = true;
    }
    d.reasoning.append(s);
  };
  for (;;) {
    switch (state_) {
      case State::kStart: {
        const size_t i = first_non_space(held_);
        if (i == held_.size()) return d;  // only white space so far: undecided
        const std::string_view rest = std::string_view(held_).substr(i);
        if (rest.substr(0, kOpenTag.size()) == kOpenTag) {
          held_.erase(0, i + kOpenTag.size());
          state_ = State::kReasoning;
          continue;
        }
        if (kOpenTag.substr(0, rest.size()) == rest) return d;  // "<thi": undecided
        state_ = State::kContent;  // a reply without a think block: all of it is content
        continue;
      }
      case State::kReasoning: {
        const size_t close = held_.find(kCloseTag);
        if (close != std::string::npos) {
          std::string_view r = std::string_view(held_).substr(0, close);
          while (!r.empty() && is_space(r.back())) r.remove_suffix(1);
          emit_reasoning(r);
          held_.erase(0, close + kCloseTag.size());
          state_ = State::kContent;
          closed_ = true;
          continue;
        }
        // Hold back a possible start of "</think>" and the white space before it (dropped
        // if the block ends there).
        size_t cut = held_.size() - partial_suffix(held_, kCloseTag);
        while (cut > 0 && is_space(held_[cut - 1])) --cut;
        emit_reasoning(std::string_view(held_).substr(0, cut));
        held_.erase(0, cut);
        return d;
      }
      case State::kContent: {
        if (closed_ && !content_started_) {
          const size_t i = first_non_space(held_);
          held_.erase(0, i);
          if (held_.empty()) return d;
          content_started_ = true;
        }
        d.content.append(held_);
        held_.clear();
        return d;
      }
    }
  }
}

ReasoningSplitter::Delta ReasoningSplitter::finish() {
  Delta d;
  std::string_view rest = held_;
  switch (state_) {
    case State::kStart:
      d.content.assign(rest);
      break;
    case State::kReasoning:
      if (!reasoning_started_) rest.remove_prefix(first_non_space(rest));
      while (!rest.empty() && is_space(rest.back())) rest.remove_suffix(1);
      d.reasoning.assign(rest);
      break;
    case State::kContent:
      if (closed_ && !content_started_) rest.remove_prefix(first_non_space(rest));
      d.content.assign(rest);
      break;
  }
  held_.clear();
  return d;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kOpenTag);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kCloseTag);
  if (close != std::string_view::npos && close > open) return false;
  const std::string_view after = prompt.substr(open + kOpenTag.size());
  return first_non_space(after) == after.size();
}

}  // namespace moetier::server
