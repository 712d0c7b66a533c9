#include "server/infill.h"

#include <algorithm>

namespace moetier::server {

namespace {

int32_t find(const text::Tokenizer& tok, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (auto id = tok.find_token(n)) return *id;
  }
  return -1;
}

std::vector<int32_t> plain(const text::Tokenizer& tok, const std::string& text) {
  // Code is text: special-token strings inside it are not control tokens.
  return tok.encode(text, {.parse_special = false, .add_special = false});
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& more) { out.insert(out.end(), more.begin(), more.end()); }

}  // namespace

std::optional<FimTokens> find_fim_tokens(const text::Tokenizer& tok) {
  FimTokens f{.prefix = find(tok, {"<|fim_prefix|>", "<fim_prefix>", "<|fim_begin|>"}),
              .suffix = find(tok, {"<|fim_suffix|>", "<fim_suffix>", "<|fim_hole|>"}),
              .middle = find(tok, {"<|fim_middle|>", "<fim_middle>", "<|fim_end|>"}),
              .repo = find(tok, {"<|repo_name|>", "<reponame>"}),
              .file_sep = find(tok, {"<|file_sep|>", "<file_sep>"})};
  if (f.prefix < 0 || f.suffix < 0 || f.middle < 0) return std::nullopt;
  return f;
}

InfillPrompt build_infill_prompt(const text::Tokenizer& tok, const FimTokens& fim, const InfillInput& in,
                                 int64_t max_tokens) {
  InfillPrompt out;
  std::vector<int32_t> prefix = plain(tok, in.prefix);
  std::vector<int32_t> suffix = plain(tok, in.suffix);
  const std::vector<int32_t> prompt = plain(tok, in.prompt);
  // The cursor block: <|fim_prefix|>PREFIX<|fim_suffix|>SUFFIX<|fim_middle|>PROMPT.
  const int64_t fixed = 3 + static_cast<int64_t>(prompt.size());
  int64_t room = std::max<int64_t>(0, max_tokens - fixed);
  if (static_cast<int64_t>(prefix.size() + suffix.size()) > room) {
    out.truncated = true;
    const int64_t suffix_take = std::min<int64_t>(static_cast<int64_t>(suffix.size()), room / 4);
    const int64_t prefix_take = std::min<int64_t>(static_cast<int64_t>(prefix.size()), room - suffix_take);
    prefix.erase(prefix.begin(), prefix.end() - prefix_take);
    suffix.resize(static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(suffix.size()), room - prefix_take)));
  }
  room -= static_cast<int64_t>(prefix.size() + suffix.size());

  // The project context, newest (last) files first until the room runs out.
  std::vector<int32_t> context;
  if (fim.repo >= 0 || fim.file_sep >= 0 || !in.extra.empty()) {
    std::vector<int32_t> head;
    if (fim.repo >= 0) {
      head.push_back(fim.repo);
      append(head, plain(tok, "myproject\n"));
    }
    std::vector<int32_t> tail;
    if (fim.file_sep >= 0) {
      tail.push_back(fim.file_sep);
      append(tail, plain(tok, "filename\n"));
    }
    int64_t used = static_cast<int64_t>(head.size() + tail.size());
    std::vector<std::vector<int32_t>> files;
    for (auto it = in.extra.rbegin(); it != in.extra.rend(); ++it) {
      std::vector<int32_t> f;
      if (fim.file_sep >= 0) {
        f.push_back(fim.file_sep);
        append(f, plain(tok, (it->filename.empty() ? "tmp" : it->filename) + "\n"));
      } else {
        append(f, plain(tok, "\n\n--- snippet ---\n\n"));
      }
      append(f, plain(tok, it->text));
      if (used + static_cast<int64_t>(f.size()) > room) {
        out.truncated = true;
        break;
      }
      used += static_cast<int64_t>(f.size());
      files.push_back(std::move(f));
    }
    if (used <= room) {
      context = std::move(head);
      for (auto it = files.rbegin(); it != files.rend(); ++it) append(context, *it);
      append(context, tail);
    } else {
      out.truncated = true;
    }
  }
  out.tokens = std::move(context);
  out.tokens.push_back(fim.prefix);
  append(out.tokens, prefix);
  out.tokens.push_back(fim.suffix);
  append(out.tokens, suffix);
  out.tokens.push_back(fim.middle);
  append(out.tokens, prompt);
  return out;
}

}  // namespace moetier::server
