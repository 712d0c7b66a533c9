#include "text/tokenizer.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "text/pretokenize.h"
#include "text/tokenizer_bpe.h"
#include "text/tokenizer_byte_level.h"
#include "text/tokenizer_special.h"
#include "text/utf8.h"

namespace moetier::text {

// Everything a Tokenizer needs, built once and never modified (shared between copies).
// Not movable: the splitter and the text -> id map keep views into `vocab`.
struct Tokenizer::Impl {
  explicit Impl(PreTokenizer pre) : pre_tokenizer(std::move(pre)) {}
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  PreTokenizer pre_tokenizer;
  Vocab vocab;
  BpeMerges merges;
  BpeModel bpe;
  ByteLevelAlphabet alphabet;
  SpecialTokenSplitter splitter;
};

namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  const gguf::Value* model = file.find(kModelKey);
  if (model == nullptr) {
    return Status::bad_input(fmt::format("missing metadata key '{}' (the file has no tokenizer)", kModelKey));
  }
  const auto model_name = model->as_string();
  if (!model_name) return Status::bad_input(fmt::format("metadata key '{}' must be a string", kModelKey));
  if (*model_name != "gpt2") {
    return Status::bad_input(fmt::format("unsupported tokenizer model '{}' ({}); supported: gpt2 (byte-level BPE)",
                                         *model_name, kModelKey));
  }
  const gguf::Value* pre = file.find(kPreKey);
  if (pre == nullptr) {
    return Status::bad_input(fmt::format("missing metadata key '{}' (the pre-tokenizer); supported: {}", kPreKey,
                                         PreTokenizer::supported_names()));
  }
  const auto pre_name = pre->as_string();
  if (!pre_name) return Status::bad_input(fmt::format("metadata key '{}' must be a string", kPreKey));
  ASSIGN_OR_RETURN(PreTokenizer pre_tokenizer, PreTokenizer::create(*pre_name));

  auto impl = std::make_shared<Impl>(std::move(pre_tokenizer));
  RETURN_IF_ERROR(load_vocab(file, impl->vocab));
  ASSIGN_OR_RETURN(impl->merges, BpeMerges::from_gguf(file, impl->vocab));
  impl->bpe.merges = &impl->merges;
  impl->bpe.unk = impl->vocab.special.unk;
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    impl->bpe.byte_token[b] = impl->vocab.find(impl->alphabet.encode(std::string_view(&byte, 1)));
  }
  impl->splitter = SpecialTokenSplitter(impl->vocab);
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  return encode(text, EncodeOptions{.parse_special = parse_special});
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& im = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);  // ~4 bytes per token in English; a guess, not a bound
  if (options.add_special && im.vocab.add_bos && im.vocab.special.bos != kNoToken) ids.push_back(im.vocab.special.bos);

  std::vector<TextFragment> fragments;
  im.splitter.split(text, options.parse_special, fragments);
  PreTokens pre;
  BpeScratch scratch;
  for (const TextFragment& frag : fragments) {
    if (frag.token != kNoToken) {
      ids.push_back(frag.token);
      continue;
    }
    im.pre_tokenizer.split(text.substr(frag.begin, frag.size), pre);
    for (size_t i = 0; i < pre.pieces.size(); ++i) {
      std::string_view piece = pre.piece(i);
      // The merge loop indexes symbols with int32; a longer piece (a 2 GiB run of letters)
      // is encoded in chunks, which is the only place we knowingly differ from llama.cpp.
      constexpr size_t kMaxPiece = INT32_MAX / 2;
      while (piece.size() > kMaxPiece) {
        bpe_encode_piece(piece.substr(0, kMaxPiece), im.bpe, scratch, ids);
        piece.remove_prefix(kMaxPiece);
      }
      bpe_encode_piece(piece, im.bpe, scratch, ids);
    }
  }
  if (options.add_special && im.vocab.add_eos && im.vocab.special.eos != kNoToken) ids.push_back(im.vocab.special.eos);
  return ids;
}

void Tokenizer::append_piece(int32_t id, bool render_special, std::string& out) const {
  const Impl& im = *impl_;
  if (id < 0 || id >= im.vocab.size()) return;
  const uint32_t attr = im.vocab.attrs[id];
  constexpr uint32_t kHidden = token_attr::kControl | token_attr::kUnknown;
  if ((attr & kHidden) != 0 && !render_special) return;
  if ((attr & (kHidden | token_attr::kUserDefined)) != 0) {
    out += im.vocab.text(id);  // added tokens are stored as plain text, not byte-level
    return;
  }
  if ((attr & (token_attr::kNormal | token_attr::kByte)) != 0) {
    im.alphabet.decode(im.vocab.text(id), out);
  }
  // UNUSED / undefined tokens render as nothing.
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
  std::string out;
  append_piece(id, render_special, out);
  return out;
}

std::string Tokenizer::detokenize(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (const int32_t id : ids) append_piece(id, render_special, out);
  return out;
}

std::vector<std::string> Tokenizer::pretokenize(std::string_view text) const {
  PreTokens pre;
  impl_->pre_tokenizer.split(text, pre);
  std::vector<std::string> pieces;
  pieces.reserve(pre.pieces.size());
  for (size_t i = 0; i < pre.pieces.size(); ++i) pieces.emplace_back(pre.piece(i));
  return pieces;
}

int32_t Tokenizer::n_vocab() const { return impl_->vocab.size(); }

std::string_view Tokenizer::token_text(int32_t id) const {
  return (id >= 0 && id < n_vocab()) ? impl_->vocab.text(id) : std::string_view();
}

TokenType Tokenizer::token_type(int32_t id) const {
  return (id >= 0 && id < n_vocab()) ? impl_->vocab.types[id] : TokenType::kUndefined;
}

uint32_t Tokenizer::token_attr(int32_t id) const { return (id >= 0 && id < n_vocab()) ? impl_->vocab.attrs[id] : 0; }

bool Tokenizer::is_control(int32_t id) const { return (token_attr(id) & token_attr::kControl) != 0; }

bool Tokenizer::is_eog(int32_t id) const {
  const auto& eog = impl_->vocab.eog_ids;
  return std::binary_search(eog.begin(), eog.end(), id);
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = impl_->vocab.find(text);
  return id == kNoToken ? std::nullopt : std::optional<int32_t>(id);
}

const SpecialTokenIds& Tokenizer::special_ids() const { return impl_->vocab.special; }
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->vocab.eog_ids; }
bool Tokenizer::add_bos() const { return impl_->vocab.add_bos; }
bool Tokenizer::add_eos() const { return impl_->vocab.add_eos; }
const std::string& Tokenizer::pre_tokenizer_name() const { return impl_->pre_tokenizer.name(); }
bool Tokenizer::regex_jit_enabled() const { return impl_->pre_tokenizer.jit_enabled(); }

}  // namespace moetier::text
