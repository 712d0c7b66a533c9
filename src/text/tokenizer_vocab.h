// The vocabulary part of a GGUF tokenizer: token texts, their stored types, the attributes
// llama.cpp derives from them at load time, the special ids and the end-of-generation set.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace moetier::text {

// Values of the GGUF array tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Attribute bits, numbered like llama.cpp's llama_token_attr so values can be compared with its
// output (the tokenizer reference files list them as `llama_attr`). A token may carry several:
// `</s>` in Qwen3 is NORMAL | CONTROL after load.
namespace token_attr {
inline constexpr uint32_t kUnknown = 1u << 0;
inline constexpr uint32_t kUnused = 1u << 1;
inline constexpr uint32_t kNormal = 1u << 2;
inline constexpr uint32_t kControl = 1u << 3;
inline constexpr uint32_t kUserDefined = 1u << 4;
inline constexpr uint32_t kByte = 1u << 5;
}  // namespace token_attr

inline constexpr int32_t kNoToken = -1;

// Special token ids; kNoToken where the vocabulary has none.
struct SpecialTokenIds {
  int32_t bos = kNoToken;
  int32_t eos = kNoToken;
  int32_t eot = kNoToken;  // end of turn (<|im_end|> for Qwen)
  int32_t eom = kNoToken;  // end of message
  int32_t unk = kNoToken;
  int32_t sep = kNoToken;
  int32_t pad = kNoToken;
  int32_t mask = kNoToken;
  int32_t fim_pre = kNoToken;
  int32_t fim_suf = kNoToken;
  int32_t fim_mid = kNoToken;
  int32_t fim_pad = kNoToken;
  int32_t fim_rep = kNoToken;
  int32_t fim_sep = kNoToken;
};

struct Vocab {
  // Token texts as stored (byte-level form for NORMAL tokens, plain text for added tokens),
  // concatenated: token i is text_arena[text_offset[i], text_offset[i + 1]).
  std::string text_arena;
  std::vector<uint32_t> text_offset;       // n_tokens + 1 entries
  std::vector<TokenType> types;            // as stored (NORMAL when the file has no types)
  std::vector<uint32_t> attrs;             // token_attr bits after llama.cpp's fix-ups
  // Text -> id. Keys view into text_arena, so a Vocab must not be copied (Tokenizer keeps
  // it behind a shared pointer). With duplicate texts the highest id wins, as in llama.cpp.
  std::unordered_map<std::string_view, int32_t> text_to_id;

  SpecialTokenIds special;
  std::vector<int32_t> eog_ids;            // sorted, unique
  bool add_bos = false;
  bool add_eos = false;

  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  int32_t size() const { return static_cast<int32_t>(types.size()); }
  std::string_view text(int32_t id) const {
    return std::string_view(text_arena).substr(text_offset[id], text_offset[id + 1] - text_offset[id]);
  }
  int32_t find(std::string_view text) const {
    const auto it = text_to_id.find(text);
    return it == text_to_id.end() ? kNoToken : it->second;
  }
};

// Reads tokenizer.ggml.tokens / token_type / the special-id keys / add_bos_token /
// add_eos_token into `vocab` and applies llama.cpp's load-time fix-ups (see the .cpp).
// Errors are kBadInput naming the key.
Status load_vocab(const gguf::GgufFile& file, Vocab& vocab);

}  // namespace moetier::text
