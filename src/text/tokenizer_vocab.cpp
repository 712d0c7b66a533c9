// Vocabulary loading and llama.cpp's load-time fix-ups.
//
// llama.cpp does not take the GGUF's token types and special ids at face value: it recognises
// a number of well-known token texts (end-of-turn, fill-in-the-middle, end-of-generation
// markers), forces CONTROL on them and derives the end-of-generation (EOG) set from them. We
// reproduce that here because token ids and stopping behaviour must match llama.cpp. For Qwen3
// this promotes the ordinary BPE token `</s>` (128247) to CONTROL + EOG, so with special-token
// parsing the text "</s>" becomes that single id (tokenizer reference case c061).
#include "text/tokenizer_vocab.h"

#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>

namespace moetier::text {

namespace {

constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kTokenTypeKey = "tokenizer.ggml.token_type";

// Texts llama.cpp recognises, per role. When the GGUF does not name the role's id, the first
// text of the list present in the vocabulary is taken. (llama.cpp takes the first match in
// hash-map order; list order is our deterministic choice, and gives the same ids for Qwen.)
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
constexpr std::string_view kEomTexts[] = {"<|eom_id|>"};
constexpr std::string_view kFimPreTexts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>",
                                             "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSufTexts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>",
                                             "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMidTexts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
                                             "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};
// Every token with one of these texts ends generation (and is made CONTROL).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["};
// gpt-oss formatting tokens that llama.cpp always renders (forced to USER_DEFINED).
constexpr std::string_view kAlwaysRenderedTexts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case static_cast<int64_t>(TokenType::kNormal): return token_attr::kNormal;
    case static_cast<int64_t>(TokenType::kUnknown): return token_attr::kUnknown;
    case static_cast<int64_t>(TokenType::kControl): return token_attr::kControl;
    case static_cast<int64_t>(TokenType::kUserDefined): return token_attr::kUserDefined;
    case static_cast<int64_t>(TokenType::kUnused): return token_attr::kUnused;
    case static_cast<int64_t>(TokenType::kByte): return token_attr::kByte;
    default: return 0;  // undefined
  }
}

Status read_tokens(const gguf::GgufFile& file, Vocab& vocab) {
  const gguf::Value* tokens = file.find(kTokensKey);
  if (tokens == nullptr) return Status::bad_input(fmt::format("missing metadata key '{}'", kTokensKey));
  if (!tokens->is_array() || tokens->elem_type != gguf::ValueType::STRING) {
    return Status::bad_input(fmt::format("metadata key '{}' must be an array of strings", kTokensKey));
  }
  const std::vector<std::string>& texts = tokens->arr_s;
  if (texts.empty()) return Status::bad_input(fmt::format("metadata key '{}' is empty", kTokensKey));
  if (texts.size() >= static_cast<size_t>(INT32_MAX)) {
    return Status::bad_input(fmt::format("metadata key '{}' has too many tokens ({})", kTokensKey, texts.size()));
  }
  size_t total = 0;
  for (const auto& t : texts) total += t.size();
  if (total >= UINT32_MAX) return Status::bad_input(fmt::format("metadata key '{}' is too large", kTokensKey));

  const size_t n = texts.size();
  vocab.text_arena.reserve(total);
  vocab.text_offset.resize(n + 1);
  for (size_t i = 0; i < n; ++i) {
    vocab.text_offset[i] = static_cast<uint32_t>(vocab.text_arena.size());
    vocab.text_arena += texts[i];
  }
  vocab.text_offset[n] = static_cast<uint32_t>(vocab.text_arena.size());

  vocab.types.assign(n, TokenType::kNormal);
  vocab.attrs.assign(n, token_attr::kNormal);
  if (const gguf::Value* types = file.find(kTokenTypeKey)) {
    const auto ints = types->as_int_array();
    if (!ints) return Status::bad_input(fmt::format("metadata key '{}' must be an array of integers", kTokenTypeKey));
    if (ints->size() < n) {
      return Status::bad_input(fmt::format("metadata key '{}' has {} entries for {} tokens", kTokenTypeKey,
                                           ints->size(), n));
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*ints)[i];
      vocab.types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::kUndefined;
      vocab.attrs[i] = attr_from_type(t);
    }
  }

  vocab.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) vocab.text_to_id[vocab.text(static_cast<int32_t>(i))] = static_cast<int32_t>(i);
  return Status::ok();
}

// Special ids named in the metadata. An id outside the vocabulary is ignored (llama.cpp warns
// and keeps its default), so a sloppy converter cannot make us index out of range.
Status read_special_ids(const gguf::GgufFile& file, Vocab& vocab) {
  SpecialTokenIds& s = vocab.special;
  // llama.cpp's defaults for "gpt2" vocabularies (GPT-2's <|endoftext|> was id 11 in its
  // original ordering); they only matter when the file names no bos/eos.
  s.bos = 11;
  s.eos = 11;
  const std::initializer_list<std::pair<std::string_view, int32_t*>> keys = {
      {"tokenizer.ggml.bos_token_id", &s.bos},        {"tokenizer.ggml.eos_token_id", &s.eos},
      {"tokenizer.ggml.eot_token_id", &s.eot},        {"tokenizer.ggml.eom_token_id", &s.eom},
      {"tokenizer.ggml.unknown_token_id", &s.unk},    {"tokenizer.ggml.seperator_token_id", &s.sep},
      {"tokenizer.ggml.padding_token_id", &s.pad},    {"tokenizer.ggml.mask_token_id", &s.mask},
      {"tokenizer.ggml.fim_pre_token_id", &s.fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &s.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &s.fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &s.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &s.fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &s.fim_sep},
      // deprecated spellings of the FIM keys
      {"tokenizer.ggml.prefix_token_id", &s.fim_pre}, {"tokenizer.ggml.suffix_token_id", &s.fim_suf},
      {"tokenizer.ggml.middle_token_id", &s.fim_mid},
  };
  for (const auto& [key, id] : keys) {
    if (*id >= vocab.size()) *id = kNoToken;
    const gguf::Value* v = file.find(key);
    if (v == nullptr) continue;
    const auto value = v->as_int();
    if (!value) return Status::bad_input(fmt::format("metadata key '{}' must be an integer", key));
    if (*value >= 0 && *value < vocab.size()) *id = static_cast<int32_t>(*value);
  }
  for (const auto& [key, flag] : {std::pair{"tokenizer.ggml.add_bos_token", &vocab.add_bos},
                                  std::pair{"tokenizer.ggml.add_eos_token", &vocab.add_eos}}) {
    const gguf::Value* v = file.find(key);
    if (v == nullptr) continue;
    const auto value = v->as_int();  // bool is stored as 0/1
    if (!value) return Status::bad_input(fmt::format("metadata key '{}' must be a bool", key));
    *flag = *value != 0;
  }
  return Status::ok();
}

void make_control(Vocab& vocab, int32_t id) { vocab.attrs[id] |= token_attr::kControl; }

// Fills `id` (when unset) with the first token whose text is in `texts`, and makes it CONTROL.
template <size_t N>
void detect_by_text(Vocab& vocab, int32_t& id, const std::string_view (&texts)[N]) {
  if (id != kNoToken) return;
  for (const std::string_view text : texts) {
    const int32_t found = vocab.find(text);
    if (found == kNoToken) continue;
    id = found;
    make_control(vocab, found);
    return;
  }
}

void apply_fixups(Vocab& vocab) {
  SpecialTokenIds& s = vocab.special;
  detect_by_text(vocab, s.eot, kEotTexts);
  detect_by_text(vocab, s.eom, kEomTexts);
  detect_by_text(vocab, s.fim_pre, kFimPreTexts);
  detect_by_text(vocab, s.fim_suf, kFimSufTexts);
  detect_by_text(vocab, s.fim_mid, kFimMidTexts);
  detect_by_text(vocab, s.fim_pad, kFimPadTexts);
  detect_by_text(vocab, s.fim_rep, kFimRepTexts);
  detect_by_text(vocab, s.fim_sep, kFimSepTexts);

  // CONTROL tokens named like "<unused12>" are placeholders: mark them UNUSED.
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if ((vocab.attrs[id] & token_attr::kControl) && vocab.text(id).find("unused") != std::string_view::npos) {
      vocab.attrs[id] |= token_attr::kUnused;
    }
  }

  std::vector<int32_t> eog;
  for (const int32_t id : {s.fim_pad, s.fim_rep, s.fim_sep}) {
    if (id != kNoToken) eog.push_back(id);
  }
  for (const std::string_view text : kEogTexts) {
    const int32_t id = vocab.find(text);
    if (id == kNoToken) continue;
    eog.push_back(id);
    make_control(vocab, id);
  }
  for (const std::string_view text : kAlwaysRenderedTexts) {
    const int32_t id = vocab.find(text);
    if (id != kNoToken) vocab.attrs[id] = token_attr::kUserDefined;
  }
  for (const int32_t id : {s.eos, s.eot, s.eom}) {
    if (id != kNoToken) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  auto eog_text_id = [&](std::string_view text) {
    for (const int32_t id : eog) {
      if (vocab.text(id) == text) return id;
    }
    return kNoToken;
  };
  // Harmony-style vocabularies (gpt-oss, solar-open) end turns with <|return|>/<|call|>;
  // their <|end|> only separates messages and must not stop generation.
  const int32_t end_id = eog_text_id("<|end|>");
  const bool has_call = eog_text_id("<|call|>") != kNoToken || eog_text_id("<|calls|>") != kNoToken;
  if (end_id != kNoToken && has_call &&
      (eog_text_id("<|return|>") != kNoToken || eog_text_id("<|flush|>") != kNoToken)) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    vocab.attrs[end_id] = token_attr::kUserDefined;
  }
  // Gemma 4 / PaddleOCR: with <|tool_response> present, </s> is ordinary text.
  const int32_t s_id = eog_text_id("</s>");
  if (s_id != kNoToken && eog_text_id("<|tool_response>") != kNoToken) {
    eog.erase(std::find(eog.begin(), eog.end(), s_id));
    vocab.attrs[s_id] = token_attr::kNormal;
  }
  vocab.eog_ids = std::move(eog);
}

}  // namespace

Status load_vocab(const gguf::GgufFile& file, Vocab& vocab) {
  RETURN_IF_ERROR(read_tokens(file, vocab));
  RETURN_IF_ERROR(read_special_ids(file, vocab));
  apply_fixups(vocab);
  return Status::ok();
}

}  // namespace moetier::text
