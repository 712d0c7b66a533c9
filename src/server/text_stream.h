// What happens to generated text between the detokenizer and the client, in order:
//   Detokenizer (complete UTF-8 only)  →  StopMatcher (cut at a stop string)  →
//   ReasoningSplitter (<think>…</think> into reasoning_content, the rest into content).
// Each stage holds back only what it cannot decide yet (an incomplete character, a
// possible start of a stop string or of a tag) and emits everything else at once, so a
// stream shows text as soon as it is certain; finish() releases what is held at the end.
// Every stage keeps its output valid UTF-8 when its input is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moetier::server {

// Stop strings (OpenAI `stop`): the output ends just before the first occurrence of any of
// them, which is not emitted.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Text now certain not to be part of a stop string. After a match, returns the text
  // before it and stopped() becomes true; later calls return nothing.
  std::string push(std::string_view text);
  // What is still held back (a tail that could have started a stop string). Empty after a
  // match.
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string* matched() const { return stopped_ ? &stops_[matched_index_] : nullptr; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  size_t matched_index_ = 0;
};

// Splits a model's reply into reasoning and answer, for templates whose models think in
// <think> … </think> (Qwen3, Qwen3.5/3.6, DeepSeek-R1 style):
//   * when the prompt already opened the block (the generation prompt ends in "<think>\n"),
//     the reply starts inside it;
//   * otherwise a reply that begins (after white space) with "<think>" enters it;
//   * "</think>" ends it; everything after is the answer, its leading white space dropped.
// White space at the start and end of the reasoning is dropped (the template strips it too
// when the reasoning goes back into a later prompt).
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool starts_in_reasoning = false);

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta push(std::string_view text);
  Delta finish();

  // Inside the think block (the reasoning budget counts the tokens generated here).
  bool in_reasoning() const { return state_ == State::kReasoning; }
  // The reply thought and the block is closed.
  bool reasoning_closed() const { return closed_; }

 private:
  enum class State { kStart, kReasoning, kContent };
  State state_;
  bool closed_ = false;
  bool reasoning_started_ = false;  // non-white-space reasoning emitted
  bool content_started_ = false;    // non-white-space content emitted (after a think block)
  std::string held_;
};

// True when `prompt` ends inside an open <think> block: its last "<think>" comes after its
// last "</think>" and only white space follows it.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace moetier::server
