#include "synth/vocab.h"

#include <unordered_set>

#include <fmt/format.h>

namespace moetier::synth {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool byte_maps_to_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// Builds the merge list: each merge joins two existing tokens into a new, unique one.
class MergeBuilder {
 public:
  MergeBuilder(SyntheticVocab& vocab, size_t n_merges) : vocab_(vocab), n_merges_(n_merges) {
    for (const auto& t : vocab_.tokens) known_.insert(t);
  }
  bool full() const { return merges_done_ >= n_merges_; }
  // Adds left+right when both are tokens and the result is new; returns whether it did.
  bool add(const std::string& left, const std::string& right) {
    if (full() || !known_.count(left) || !known_.count(right)) return false;
    std::string joined = left + right;
    if (!known_.insert(joined).second) return false;
    vocab_.merges.push_back(left + " " + right);
    vocab_.tokens.push_back(std::move(joined));
    vocab_.token_types.push_back(1);
    ++merges_done_;
    return true;
  }

 private:
  SyntheticVocab& vocab_;
  size_t n_merges_;
  size_t merges_done_ = 0;
  std::unordered_set<std::string> known_;
};

}  // namespace

std::string byte_to_unicode(uint8_t byte) {
  if (byte_maps_to_itself(byte)) return utf8(byte);
  uint32_t n = 0;  // rank of this byte among the bytes that do not map to themselves
  for (uint32_t b = 0; b < byte; ++b) {
    if (!byte_maps_to_itself(b)) ++n;
  }
  return utf8(256 + n);
}

Result<SyntheticVocab> make_synthetic_vocab(int64_t n_vocab) {
  if (n_vocab < kMinSyntheticVocab) {
    return Status::bad_input(fmt::format("a synthetic vocabulary needs at least {} tokens, got {}",
                                         kMinSyntheticVocab, n_vocab));
  }
  SyntheticVocab v;
  v.tokens.reserve(static_cast<size_t>(n_vocab));
  v.token_types.reserve(static_cast<size_t>(n_vocab));
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
    v.token_types.push_back(1);
  }
  const size_t n_merges = static_cast<size_t>(n_vocab - 256 - kNumSpecialTokens);
  v.merges.reserve(n_merges);
  MergeBuilder builder(v, n_merges);

  // A few common English merges first, so small vocabularies still tokenize text into
  // recognisable pieces ("Ġ" is the space byte).
  const std::pair<const char*, const char*> kCommon[] = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"e", "r"}, {"o", "n"}, {"Ġ", "a"}, {"r", "e"},
      {"a", "t"}, {"e", "n"}, {"o", "r"}, {"Ġ", "s"}, {"Ġ", "c"}, {"Ġ", "w"}, {"Ġ", "o"}, {"Ġ", "f"},
      {"i", "s"}, {"Ġ", "b"}, {"e", "s"}, {"i", "t"}, {"Ġ", "i"}, {"Ġ", "p"}, {"a", "n"}, {"a", "l"},
      {"Ġ", "m"}, {"e", "d"}, {"Ġ", "d"}, {"in", "g"}, {"a", "r"}, {"o", "u"}, {"Ġt", "o"}, {"Ġa", "nd"},
      {"n", "d"}, {"Ġo", "f"}, {"Ġi", "n"}, {"l", "l"}, {"Ġ", "h"}, {"l", "e"}, {"s", "t"}, {"Ġ", "l"}};
  for (const auto& [l, r] : kCommon) builder.add(l, r);

  // Then words: an optional leading space and letters, grown one letter at a time in
  // breadth-first order (all 2-character words, then 3, ...), letters by English frequency.
  const std::string kFirst = "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ";
  const std::string kNext = "etaoinshrdlcumwfgypbvkjxqz";
  std::vector<std::string> frontier;
  frontier.push_back("Ġ");
  for (char c : kFirst) frontier.emplace_back(1, c);
  while (!builder.full() && !frontier.empty()) {
    std::vector<std::string> grown;
    for (const auto& prefix : frontier) {
      for (char c : kNext) {
        if (builder.full()) break;
        const std::string letter(1, c);
        builder.add(prefix, letter);
        grown.push_back(prefix + letter);  // a token now (added here or earlier)
      }
      if (builder.full()) break;
    }
    frontier = std::move(grown);
  }
  CHECK(builder.full());

  v.bos_id = static_cast<uint32_t>(v.tokens.size());      // <|endoftext|>
  v.eos_id = static_cast<uint32_t>(v.tokens.size() + 2);  // <|im_end|>
  for (const char* special : kSpecialTokens) {
    v.tokens.emplace_back(special);
    v.token_types.push_back(3);  // control
  }
  CHECK(static_cast<int64_t>(v.tokens.size()) == n_vocab);
  return v;
}

MetadataList synthetic_vocab_metadata(const SyntheticVocab& vocab, const std::string& pre) {
  MetadataList md;
  md.emplace_back("tokenizer.ggml.model", gguf::Value::make_string("gpt2"));
  md.emplace_back("tokenizer.ggml.pre", gguf::Value::make_string(pre));
  md.emplace_back("tokenizer.ggml.tokens", gguf::Value::make_string_array(vocab.tokens));
  md.emplace_back("tokenizer.ggml.token_type", gguf::Value::make_i32_array(vocab.token_types));
  md.emplace_back("tokenizer.ggml.merges", gguf::Value::make_string_array(vocab.merges));
  md.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::make_u32(vocab.bos_id));
  md.emplace_back("tokenizer.ggml.eos_token_id", gguf::Value::make_u32(vocab.eos_id));
  md.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::make_bool(false));
  return md;
}

Result<CopiedVocab> copy_vocab_metadata(const std::string& path) {
  ASSIGN_OR_RETURN(gguf::GgufFile file, gguf::read_header(path));
  CopiedVocab out;
  for (const auto& [key, value] : file.metadata) {
    if (key.rfind("tokenizer.", 0) == 0) out.metadata.emplace_back(key, value);
  }
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array() || tokens->elem_type != gguf::ValueType::STRING) {
    return Status::bad_input(fmt::format("{}: no tokenizer.ggml.tokens string array, not a vocabulary", path));
  }
  out.n_tokens = static_cast<int64_t>(tokens->array_size());
  if (out.n_tokens == 0) return Status::bad_input(fmt::format("{}: tokenizer.ggml.tokens is empty", path));
  return out;
}

}  // namespace moetier::synth
