// Fill-in-the-middle prompts for POST /infill (code editors): the code before and after the
// cursor, and optionally other files of the project, in the repository-level FIM layout that
// Qwen2.5-Coder-style vocabularies define:
//   <|repo_name|>myproject\n
//   <|file_sep|>FILENAME\nTEXT          one per input_extra file
//   <|file_sep|>filename\n
//   <|fim_prefix|>PREFIX<|fim_suffix|>SUFFIX<|fim_middle|>PROMPT
// (the repository and file markers only when the vocabulary has them). What does not fit
// the budget is dropped: extra files first (the last ones are kept, being nearest to the
// cursor in an editor's list), then the prefix from its start and the suffix from its end,
// in the ratio 3:1.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace moetier::server {

struct FimTokens {
  int32_t prefix = -1;
  int32_t suffix = -1;
  int32_t middle = -1;
  int32_t repo = -1;      // -1: none
  int32_t file_sep = -1;  // -1: none
};

// The vocabulary's FIM tokens (Qwen's <|fim_prefix|> … or StarCoder's <fim_prefix> …);
// nullopt when it has no prefix/suffix/middle triple.
std::optional<FimTokens> find_fim_tokens(const text::Tokenizer& tokenizer);

struct InfillFile {
  std::string filename;
  std::string text;
};

struct InfillInput {
  std::string prefix;   // code before the cursor
  std::string suffix;   // code after it
  std::string prompt;   // text that follows <|fim_middle|> (already typed at the cursor)
  std::vector<InfillFile> extra;
};

struct InfillPrompt {
  std::vector<int32_t> tokens;
  bool truncated = false;  // something was dropped to fit `max_tokens`
};

InfillPrompt build_infill_prompt(const text::Tokenizer& tokenizer, const FimTokens& fim, const InfillInput& input,
                                 int64_t max_tokens);

}  // namespace moetier::server
