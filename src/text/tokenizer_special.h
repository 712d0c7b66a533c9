// Special-token split: the first tokenization step, on raw bytes. Tokens whose text must
// never go through BPE (CONTROL, USER_DEFINED, UNKNOWN) are cut out of the text wherever
// their exact bytes occur. Candidates are tried longest text first over the whole text (then
// by id), so "<|im_start|>" wins over any shorter token it contains. No whitespace is
// stripped around them (no lstrip/rstrip attributes are supported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "text/tokenizer_vocab.h"

namespace moetier::text {

struct TextFragment {
  int32_t token = kNoToken;  // a special token, or kNoToken for a stretch of ordinary text
  size_t begin = 0;          // byte range in the input text (ordinary text only)
  size_t size = 0;
};

class SpecialTokenSplitter {
 public:
  SpecialTokenSplitter() = default;
  // Keeps views into `vocab`'s texts: `vocab` must outlive the splitter.
  explicit SpecialTokenSplitter(const Vocab& vocab);

  // Clears and fills `out`. With parse_special = false only USER_DEFINED tokens are cut out;
  // CONTROL and UNKNOWN texts stay ordinary text (llama.cpp's parse_special semantics).
  void split(std::string_view text, bool parse_special, std::vector<TextFragment>& out) const;

 private:
  struct Candidate {
    int32_t id;
    std::string_view text;
    bool needs_parse_special;  // CONTROL or UNKNOWN
  };
  std::vector<Candidate> candidates_;  // longest text first
};

}  // namespace moetier::text
