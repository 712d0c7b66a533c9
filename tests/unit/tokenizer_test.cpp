// Tokenizer tests: UTF-8 helpers, byte-level alphabet, pre-tokenizer, BPE, error cases on
// in-memory GGUF metadata, and the llama.cpp goldens in MOETIER_REF_DIR (tokenizer/*.json,
// llama.cpp's own test vectors, and the reference models' prompt tokens).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/tokenizer_byte_level.h"
#include "text/utf8.h"

namespace moetier::text {
namespace {

using json = nlohmann::json;

const std::string kRefDir = MOETIER_REF_DIR;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json read_json(const std::string& path) { return json::parse(read_bytes(path)); }

std::string to_hex(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return out;
}

Tokenizer load_tokenizer(const std::string& path) {
  auto file = gguf::read_header(path);
  if (!file.is_ok()) ADD_FAILURE() << file.status().message();
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok.is_ok()) ADD_FAILURE() << tok.status().message();
  return std::move(tok).value();
}

// ---------------------------------------------------------------------------------------
// A small in-memory vocabulary: the 256 byte tokens in byte order (like the reference
// models' synthetic vocabularies), a few merges, and added tokens.

struct SyntheticVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;

  SyntheticVocab() {
    const ByteLevelAlphabet alphabet;
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      tokens.push_back(alphabet.encode(std::string_view(&c, 1)));
      types.push_back(1);
    }
  }
  int32_t add(std::string text, int32_t type = 1) {
    tokens.push_back(std::move(text));
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
  // Adds "left right" and, unless told otherwise, the merged token.
  int32_t merge(const std::string& left, const std::string& right, bool add_result = true) {
    merges.push_back(left + " " + right);
    return add_result ? add(left + right) : kNoToken;
  }
  gguf::GgufFile file(std::string_view pre = "qwen2", std::string_view model = "gpt2") const {
    gguf::GgufFile f;
    f.metadata.emplace_back("tokenizer.ggml.model", gguf::Value::make_string(std::string(model)));
    f.metadata.emplace_back("tokenizer.ggml.pre", gguf::Value::make_string(std::string(pre)));
    f.metadata.emplace_back("tokenizer.ggml.tokens", gguf::Value::make_string_array(tokens));
    f.metadata.emplace_back("tokenizer.ggml.token_type", gguf::Value::make_i32_array(types));
    f.metadata.emplace_back("tokenizer.ggml.merges", gguf::Value::make_string_array(merges));
    f.index();
    return f;
  }
};

void erase_key(gguf::GgufFile& f, std::string_view key) {
  std::erase_if(f.metadata, [&](const auto& kv) { return kv.first == key; });
  f.index();
}

void set_key(gguf::GgufFile& f, std::string key, gguf::Value v) {
  erase_key(f, key);
  f.metadata.emplace_back(std::move(key), std::move(v));
  f.index();
}

// ---------------------------------------------------------------------------------------

TEST(TokenizerUtf8, EncodeAndStrictValidation) {
  std::string s;
  for (const char32_t cp : {U'A', U'\u00e9', U'\u4eca', U'\U0001F600'}) append_utf8(cp, s);
  EXPECT_EQ(to_hex(s), "41c3a9e4bb8af09f9880");
  EXPECT_TRUE(is_valid_utf8(s));
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe4\xbd"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\x80"));
}

TEST(TokenizerUtf8, StrictDecodingOfOneCodePoint) {
  // Every scalar value round-trips through append_utf8 / decode_strict.
  for (char32_t cp : {U'\0', U'A', U'\u00E9', U'\u07FF', U'\u0800', U'\uFFFD', U'\U00010000', U'\U0010FFFF'}) {
    std::string bytes;
    text::append_utf8(cp, bytes);
    size_t pos = 0;
    EXPECT_EQ(text::decode_strict(bytes, pos), std::optional<char32_t>(cp));
    EXPECT_EQ(pos, bytes.size());
  }
  // Overlong, surrogate, above U+10FFFF, stray continuation, cut short: refused, pos kept.
  for (const std::string bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "\xE2\x82"}) {
    size_t pos = 0;
    EXPECT_FALSE(text::decode_strict(bad, pos).has_value()) << bad.size();
    EXPECT_EQ(pos, 0u);
  }
}

TEST(TokenizerUtf8, LenientDecodingFollowsLlamaCpp) {
  auto decode_all = [](std::string_view bytes) {
    std::vector<char32_t> cps;
    for (size_t pos = 0; pos < bytes.size();) cps.push_back(decode_lenient(bytes, pos));
    return cps;
  };
  EXPECT_EQ(decode_all("\xc0\xaf"), std::vector<char32_t>{U'/'});           // overlong accepted
  EXPECT_EQ(decode_all("\xed\xa0\x80"), std::vector<char32_t>{0xD800});     // surrogate kept
  EXPECT_EQ(decode_all("\xe4\xbd"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));  // one U+FFFD per byte
  EXPECT_EQ(decode_all("\xff\xfe"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_all("\xc3" "a"), (std::vector<char32_t>{0xFFFD, U'a'}));
}

TEST(TokenizerUtf8, CompletePrefixAndSanitizing) {
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("ab\xe4\xbd"), 2u);           // held back: E4 BD needs one more
  EXPECT_EQ(complete_utf8_prefix("ab\xf0\x9f\x98"), 2u);
  EXPECT_EQ(complete_utf8_prefix("ab\xf0\x9f\x98\x80"), 6u);
  EXPECT_EQ(complete_utf8_prefix("ab\xff"), 3u);               // never valid: released (to be replaced)
  EXPECT_EQ(complete_utf8_prefix("ab\xed\xa0"), 4u);           // surrogate prefix: never valid
  std::string out;
  append_utf8_sanitized("a\xe4\xbd" "b\xff\xc0\xaf", out);
  EXPECT_EQ(out, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(TokenizerByteLevel, AlphabetMatchesGpt2Table) {
  const ByteLevelAlphabet a;
  EXPECT_EQ(a.char_for_byte(' '), U'\u0120');
  EXPECT_EQ(a.char_for_byte('\n'), U'\u010A');
  EXPECT_EQ(a.char_for_byte('\t'), U'\u0109');
  EXPECT_EQ(a.char_for_byte('\r'), U'\u010D');
  EXPECT_EQ(a.char_for_byte(0x7F), U'\u0121');
  EXPECT_EQ(a.char_for_byte(0xAD), U'\u0143');
  EXPECT_EQ(a.char_for_byte('A'), U'A');
  EXPECT_EQ(a.char_for_byte(0xE9), U'\u00E9');
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  EXPECT_TRUE(a.decode(a.encode(all), back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(a.byte_for_char(U'\u0144').has_value());
}

TEST(TokenizerPreTokenizer, UnknownNameListsSupported) {
  const auto r = PreTokenizer::create("llama3");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().exit_code(), 2);
  EXPECT_NE(r.status().message().find("'llama3'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("qwen2, qwen35"), std::string::npos) << r.status().message();
}

TEST(TokenizerPreTokenizer, WhitespaceClassIsUnicodeWhiteSpace) {
  const std::string p = spell_out_whitespace_classes(R"(\s+(?!\S)|[^\s\p{L}])");
  EXPECT_EQ(p.find("\\s"), std::string::npos);
  EXPECT_EQ(p.find("\\S"), std::string::npos);
  EXPECT_NE(p.find("[^\\t-\\r"), std::string::npos) << p;
  EXPECT_NE(p.find("\\x{85}"), std::string::npos) << p;
}

TEST(TokenizerPreTokenizer, SplitsLikeTheRegex) {
  auto pt = PreTokenizer::create("qwen2");
  ASSERT_TRUE(pt.is_ok()) << pt.status().message();
  auto pieces = [&](std::string_view text) {
    PreTokens out;
    pt->split(text, out);
    std::vector<std::string> v;
    for (size_t i = 0; i < out.pieces.size(); ++i) v.emplace_back(out.piece(i));
    return v;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(pieces("I'm 123"), (V{"I", "'m", " ", "1", "2", "3"}));
  EXPECT_EQ(pieces("it'S"), (V{"it", "'S"}));
  // U+017F LONG S case-folds to 's' under Unicode rules but llama.cpp only takes ASCII.
  EXPECT_EQ(pieces("it'\u017f"), (V{"it", "'\u017f"}));
  EXPECT_EQ(pieces("{\n  x"), (V{"{\n", " ", " x"}));
  // U+0085 NEXT LINE is White_Space (PCRE2's \s would not count it).
  EXPECT_EQ(pieces("a\u0085\u0085b"), (V{"a", "\u0085", "\u0085b"}));
  EXPECT_EQ(pieces(""), V{});
  // Invalid UTF-8 is decoded leniently like llama.cpp: C0 AF becomes '/', bad bytes U+FFFD.
  EXPECT_EQ(pieces("a\xc0\xaf"), (V{"a", "/"}));
  EXPECT_EQ(pieces("x\xff"), (V{"x", "\xef\xbf\xbd"}));
  EXPECT_EQ(pieces(" \xed\xa0\x80"), (V{" \xed\xa0\x80"}));  // surrogate kept, grouped like a symbol
}

TEST(TokenizerBpe, MergesByRankThenLeftmost) {
  SyntheticVocab v;
  const int32_t bc = v.merge("b", "c");    // rank 0
  const int32_t ab = v.merge("a", "b");    // rank 1
  (void)ab;
  const int32_t aa = v.merge("a", "a");    // rank 2
  const int32_t space_t = v.merge("\u0120", "t");
  const int32_t he = v.merge("h", "e");
  const int32_t the = v.merge("\u0120t", "he");
  auto tok = Tokenizer::from_gguf(v.file());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  using V = std::vector<int32_t>;
  EXPECT_EQ(tok->encode("abc", true), (V{'a', bc}));    // "b c" has the lower rank
  EXPECT_EQ(tok->encode("aaa", true), (V{aa, 'a'}));    // leftmost on a tie
  EXPECT_EQ(tok->encode("aaaa", true), (V{aa, aa}));
  EXPECT_EQ(tok->encode(" the", true), (V{the}));
  EXPECT_EQ(tok->encode("the", true), (V{'t', he}));
  (void)space_t;
  EXPECT_EQ(tok->detokenize(tok->encode("the abc aaaa", true)), "the abc aaaa");
  EXPECT_EQ(tok->encode("", true), V{});
  EXPECT_FALSE(tok->add_bos());
}

TEST(TokenizerBpe, MergeResultMissingFromVocabFallsBackToBytes) {
  SyntheticVocab v;
  v.merge("x", "y", /*add_result=*/false);
  auto tok = Tokenizer::from_gguf(v.file());
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  EXPECT_EQ(tok->encode("xy", true), (std::vector<int32_t>{'x', 'y'}));
}

TEST(TokenizerSpecial, ControlOnlyWithParseSpecialUserDefinedAlways) {
  SyntheticVocab v;
  const int32_t im_start = v.add("<|im_start|>", 3);
  const int32_t think = v.add("<think>", 4);
  const int32_t eot = v.add("<|endoftext|>", 3);
  gguf::GgufFile f = v.file();
  set_key(f, "tokenizer.ggml.eos_token_id", gguf::Value::make_u32(static_cast<uint32_t>(eot)));
  set_key(f, "tokenizer.ggml.bos_token_id", gguf::Value::make_u32(static_cast<uint32_t>(eot)));
  auto tok = Tokenizer::from_gguf(f);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  const std::string text = "<|im_start|>a<think>b";
  EXPECT_EQ(tok->encode(text, true), (std::vector<int32_t>{im_start, 'a', think, 'b'}));
  const auto plain = tok->encode(text, false);
  EXPECT_EQ(plain.size(), 12u + 1 + 1 + 1);  // "<|im_start|>" as 12 byte tokens, a, <think>, b
  EXPECT_EQ(plain[13], think);
  // Rendering: CONTROL only when asked; USER_DEFINED always.
  EXPECT_EQ(tok->token_to_piece(im_start), "");
  EXPECT_EQ(tok->token_to_piece(im_start, true), "<|im_start|>");
  EXPECT_EQ(tok->token_to_piece(think), "<think>");
  EXPECT_EQ(tok->token_to_piece(-1), "");
  EXPECT_EQ(tok->token_to_piece(1 << 30), "");
  EXPECT_TRUE(tok->is_eog(eot));
  EXPECT_FALSE(tok->is_eog(im_start));
  EXPECT_EQ(tok->eos_id(), eot);

  // add_bos_token = true puts BOS first (and only with add_special).
  set_key(f, "tokenizer.ggml.add_bos_token", gguf::Value::make_bool(true));
  auto with_bos = Tokenizer::from_gguf(f);
  ASSERT_TRUE(with_bos.is_ok());
  EXPECT_TRUE(with_bos->add_bos());
  EXPECT_EQ(with_bos->encode("a", true), (std::vector<int32_t>{eot, 'a'}));
  EXPECT_EQ(with_bos->encode("a", EncodeOptions{.add_special = false}), (std::vector<int32_t>{'a'}));
}

TEST(TokenizerErrors, BadMetadataIsBadInput) {
  SyntheticVocab v;
  v.merge("a", "b");
  auto expect_error = [](const gguf::GgufFile& f, std::string_view needle) {
    const auto r = Tokenizer::from_gguf(f);
    ASSERT_FALSE(r.is_ok()) << "expected an error containing: " << needle;
    EXPECT_EQ(r.status().exit_code(), 2);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error(v.file("qwen2", "llama"), "unsupported tokenizer model 'llama'");
  expect_error(v.file("llama-bpe"), "unsupported pre-tokenizer 'llama-bpe'");
  expect_error(v.file("llama-bpe"), "supported: qwen2, qwen35");
  {
    auto f = v.file();
    erase_key(f, "tokenizer.ggml.pre");
    expect_error(f, "tokenizer.ggml.pre");
  }
  {
    auto f = v.file();
    erase_key(f, "tokenizer.ggml.model");
    expect_error(f, "tokenizer.ggml.model");
  }
  {
    auto f = v.file();
    erase_key(f, "tokenizer.ggml.tokens");
    expect_error(f, "missing metadata key 'tokenizer.ggml.tokens'");
  }
  {
    auto f = v.file();
    erase_key(f, "tokenizer.ggml.merges");
    expect_error(f, "missing metadata key 'tokenizer.ggml.merges'");
  }
  {
    SyntheticVocab w = v;
    w.merges.push_back("a \u00ff\u00ffzz");
    expect_error(w.file(), "not in tokenizer.ggml.tokens");
  }
  {
    SyntheticVocab w = v;
    w.merges.push_back("nospace");
    expect_error(w.file(), "tokenizer.ggml.merges[1]");
  }
  {
    auto f = v.file();
    set_key(f, "tokenizer.ggml.token_type", gguf::Value::make_i32_array({1, 1, 1}));
    expect_error(f, "tokenizer.ggml.token_type");
  }
  {
    auto f = v.file();
    set_key(f, "tokenizer.ggml.tokens", gguf::Value::make_u32(3));
    expect_error(f, "array of strings");
  }
  {
    auto f = v.file();
    set_key(f, "tokenizer.ggml.tokens", gguf::Value::make_string_array({}));
    expect_error(f, "empty");
  }
}

TEST(TokenizerDetokenizer, HoldsBackSplitCharactersAndReplacesInvalid) {
  SyntheticVocab v;
  auto tok = Tokenizer::from_gguf(v.file());
  ASSERT_TRUE(tok.is_ok());
  // Byte tokens have id == byte value in this vocabulary.
  Detokenizer d(*tok);
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xE4), "");  // 今 = E4 BB 8A, one byte per token
  EXPECT_EQ(d.push(0xBB), "");
  EXPECT_EQ(d.pending_bytes(), 2u);
  EXPECT_EQ(d.push(0x8A), "\u4eca");
  EXPECT_EQ(d.push(0xF0), "");  // 😀 = F0 9F 98 80
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.push(0x98), "");
  EXPECT_EQ(d.push(0x80), "\U0001F600");
  EXPECT_EQ(d.push(0xFF), "\ufffd");           // can never be valid: replaced at once
  EXPECT_EQ(d.push(0xC3), "");
  EXPECT_EQ(d.push('x'), "\ufffdx");           // lead byte followed by ASCII
  EXPECT_EQ(d.push(0xE4), "");
  EXPECT_EQ(d.push(0xBB), "");
  EXPECT_EQ(d.finish(), "\ufffd");             // truncated at the end of the stream
  EXPECT_EQ(d.pending_bytes(), 0u);
}

// ---------------------------------------------------------------------------------------
// The real Qwen3 vocabulary (reference data).

class TokenizerQwen3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto t0 = std::chrono::steady_clock::now();
    qwen2_ = new Tokenizer(load_tokenizer(kRefDir + "/tokenizer/qwen3-vocab.gguf"));
    const auto t1 = std::chrono::steady_clock::now();
    qwen35_ = new Tokenizer(load_tokenizer(kRefDir + "/tokenizer/qwen35pre-vocab.gguf"));
    load_seconds_ = std::chrono::duration<double>(t1 - t0).count();
  }
  static void TearDownTestSuite() {
    delete qwen2_;
    delete qwen35_;
  }
  static const Tokenizer& tokenizer_for(const std::string& pre) { return pre == "qwen2" ? *qwen2_ : *qwen35_; }
  static void check_expected_file(const std::string& name);

  static inline Tokenizer* qwen2_ = nullptr;
  static inline Tokenizer* qwen35_ = nullptr;
  static inline double load_seconds_ = 0;
};

void TokenizerQwen3::check_expected_file(const std::string& name) {
  const json expected = read_json(kRefDir + "/tokenizer/" + name);
  const std::string pre = expected.at("pre_tokenizer");
  const Tokenizer& tok = tokenizer_for(pre);
  ASSERT_EQ(tok.pre_tokenizer_name(), pre);
  const ByteLevelAlphabet alphabet;
  int n_cases = 0, n_ids = 0, n_ids_no_special = 0, n_pretokens = 0, n_detok = 0;
  int n_held_back = 0;  // tokens after which the Detokenizer held bytes of a split character
  for (const json& c : expected.at("cases")) {
    ++n_cases;
    const std::string id = c.at("id");
    const std::string input = read_bytes(kRefDir + "/tokenizer/corpus/" + c.at("file").get<std::string>());
    ASSERT_EQ(to_hex(input), c.at("hex").get<std::string>()) << id;
    SCOPED_TRACE(id);

    const auto ids = tok.encode(input, true);
    const auto ids_no_special = tok.encode(input, false);
    const auto want_ids = c.at("ids").get<std::vector<int32_t>>();
    const auto want_no_special = c.at("ids_no_special").get<std::vector<int32_t>>();
    EXPECT_EQ(ids, want_ids);
    EXPECT_EQ(ids_no_special, want_no_special);
    n_ids += ids == want_ids;
    n_ids_no_special += ids_no_special == want_no_special;

    std::vector<std::string> texts;
    for (const int32_t t : want_ids) texts.emplace_back(tok.token_text(t));
    EXPECT_EQ(texts, c.at("token_texts").get<std::vector<std::string>>());

    // Detokenization of the expected ids, in the three renderings the file records.
    const std::string detok = tok.detokenize(want_ids, /*render_special=*/true);
    bool detok_ok = to_hex(detok) == c.at("detok_hex").get<std::string>();
    EXPECT_TRUE(detok_ok) << to_hex(detok);
    if (!c.at("detok").is_null()) {
      EXPECT_EQ(detok, c.at("detok").get<std::string>());
    }
    if (!c.at("detok_hide_special").is_null()) {
      const std::string hidden = tok.detokenize(want_ids, false);
      EXPECT_EQ(hidden, c.at("detok_hide_special").get<std::string>());
      detok_ok &= hidden == c.at("detok_hide_special").get<std::string>();
    }
    if (!c.at("detok_no_special").is_null()) {
      const std::string plain = tok.detokenize(want_no_special, true);
      EXPECT_EQ(plain, c.at("detok_no_special").get<std::string>());
      detok_ok &= plain == c.at("detok_no_special").get<std::string>();
    }
    n_detok += detok_ok;

    // The regex pieces alone (Hugging Face's, in byte-level form). For invalid UTF-8 the file
    // computed them on WHATWG-decoded text, which is not llama.cpp's decoding: skip those.
    if (c.contains("text")) {
      std::vector<std::string> pieces;
      for (const std::string& p : tok.pretokenize(input)) pieces.push_back(alphabet.encode(p));
      const auto want = c.at("pretokens").get<std::vector<std::string>>();
      EXPECT_EQ(pieces, want);
      n_pretokens += pieces == want;
    }

    // Streaming: the Detokenizer's output is valid UTF-8 after every token and adds up to
    // the full detokenization (made valid).
    Detokenizer stream(tok, /*render_special=*/true);
    std::string streamed;
    for (const int32_t t : want_ids) {
      const std::string part = stream.push(t);
      EXPECT_TRUE(is_valid_utf8(part));
      n_held_back += stream.pending_bytes() > 0;
      streamed += part;
    }
    streamed += stream.finish();
    std::string sanitized;
    append_utf8_sanitized(detok, sanitized);
    EXPECT_EQ(streamed, sanitized);
  }
  std::printf("[ %s ] %d cases: ids %d/%d, ids_no_special %d/%d, detok %d/%d, pretokens %d (valid UTF-8 cases)\n",
              name.c_str(), n_cases, n_ids, n_cases, n_ids_no_special, n_cases, n_detok, n_cases, n_pretokens);
  EXPECT_EQ(n_cases, 126);
  // The corpus (CJK, emoji, Thai, ...) has tokens ending inside a character; make sure the
  // streaming check above really exercised holding bytes back.
  EXPECT_GT(n_held_back, 10);
  std::printf("[ %s ] streaming: bytes held back after %d tokens\n", name.c_str(), n_held_back);
}

TEST_F(TokenizerQwen3, ExpectedQwen2File) { check_expected_file("expected-qwen2.json"); }
TEST_F(TokenizerQwen3, ExpectedQwen35File) { check_expected_file("expected-qwen35.json"); }

TEST_F(TokenizerQwen3, VocabInfoMatchesLlamaCppAfterLoad) {
  for (const std::string name : {"expected-qwen2.json", "expected-qwen35.json"}) {
    SCOPED_TRACE(name);
    const json info = read_json(kRefDir + "/tokenizer/" + name).at("vocab_info");
    const Tokenizer& tok = tokenizer_for(name == "expected-qwen2.json" ? "qwen2" : "qwen35");
    EXPECT_EQ(tok.n_vocab(), info.at("n_tokens").get<int32_t>());
    EXPECT_EQ(tok.bos_id(), info.at("bos_id").get<int32_t>());
    EXPECT_EQ(tok.eos_id(), info.at("eos_id").get<int32_t>());
    EXPECT_EQ(tok.eot_id(), info.at("eot_id").get<int32_t>());
    EXPECT_EQ(tok.special_ids().pad, info.at("pad_id").get<int32_t>());
    EXPECT_EQ(tok.add_bos(), info.at("add_bos").get<bool>());
    EXPECT_EQ(tok.eog_ids(), info.at("eog_ids").get<std::vector<int32_t>>());
    std::vector<int32_t> control, user_defined;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (tok.token_attr(id) & token_attr::kControl) control.push_back(id);
      if (tok.token_attr(id) & token_attr::kUserDefined) user_defined.push_back(id);
    }
    EXPECT_EQ(control, info.at("control_ids_after_load").get<std::vector<int32_t>>());
    EXPECT_EQ(user_defined, info.at("user_defined_ids").get<std::vector<int32_t>>());
    for (const auto& [id, promoted] : info.at("normal_tokens_promoted_at_load").items()) {
      const int32_t t = std::stoi(id);
      EXPECT_EQ(tok.token_attr(t), promoted.at("llama_attr").get<uint32_t>());
      EXPECT_EQ(static_cast<int>(tok.token_type(t)), promoted.at("gguf_token_type").get<int>());
      EXPECT_EQ(tok.token_text(t), promoted.at("text").get<std::string>());
    }
    const auto unused = info.at("unused_pad_ids").get<std::vector<int32_t>>();  // [first, last]
    EXPECT_EQ(tok.token_to_piece(unused.front(), true), "");
    EXPECT_EQ(tok.token_to_piece(unused.back(), true), "");
    EXPECT_EQ(tok.token_type(unused.back()), TokenType::kUnused);
  }
}

// llama.cpp's own test vectors: cases separated by "\n__ggml_vocab_test__\n", one line of
// space-separated ids per case in the .out file (tokenized with special-token parsing).
TEST_F(TokenizerQwen3, LlamaCppVocabTestVectors) {
  for (const std::string pre : {"qwen2", "qwen35"}) {
    SCOPED_TRACE(pre);
    const std::string base = kRefDir + "/tokenizer/corpus/llama.cpp/ggml-vocab-" + pre + ".gguf";
    const std::string inp = read_bytes(base + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> cases;
    for (size_t pos = 0; pos < inp.size();) {
      const size_t end = inp.find(sep, pos);
      ASSERT_NE(end, std::string::npos);
      cases.push_back(inp.substr(pos, end - pos));
      pos = end + sep.size();
    }
    std::istringstream out(read_bytes(base + ".out"));
    std::string line;
    size_t n = 0, n_ok = 0;
    for (; std::getline(out, line); ++n) {
      ASSERT_LT(n, cases.size());
      std::vector<int32_t> want;
      std::istringstream ids(line);
      for (int32_t id; ids >> id;) want.push_back(id);
      const auto got = tokenizer_for(pre).encode(cases[n], true);
      EXPECT_EQ(got, want) << "case " << n;
      n_ok += got == want;
    }
    EXPECT_EQ(n, cases.size());
    std::printf("[ llama.cpp %s vectors ] %zu/%zu\n", pre.c_str(), n_ok, n);
  }
}

TEST_F(TokenizerQwen3, ConcurrentEncodeIsConsistent) {
  const json expected = read_json(kRefDir + "/tokenizer/expected-qwen2.json");
  std::vector<std::string> inputs;
  std::vector<std::vector<int32_t>> want;
  for (const json& c : expected.at("cases")) {
    inputs.push_back(read_bytes(kRefDir + "/tokenizer/corpus/" + c.at("file").get<std::string>()));
    want.push_back(c.at("ids").get<std::vector<int32_t>>());
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tokenizer copy = *qwen2_;  // copies share the tables
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t i = 0; i < inputs.size(); ++i) mismatches[t] += copy.encode(inputs[i], true) != want[i];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// Timing: loading the 151,936-token vocabulary and tokenizing the corpus. The bounds are far
// above the measured values (see the printout) so a loaded machine does not fail them, but a
// quadratic merge loop or per-call regex compilation would.
TEST_F(TokenizerQwen3, LoadAndEncodeAreFast) {
  const json index = read_json(kRefDir + "/tokenizer/corpus/index.json");
  std::string corpus;
  for (const json& c : index.at("cases")) {
    corpus += read_bytes(kRefDir + "/tokenizer/corpus/" + c.at("file").get<std::string>());
  }
  const auto t0 = std::chrono::steady_clock::now();
  size_t n_tokens = 0;
  constexpr int kReps = 10;
  for (int rep = 0; rep < kReps; ++rep) n_tokens += qwen2_->encode(corpus, true).size();
  const double encode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kReps;
  std::printf("[ timing ] load qwen3-vocab.gguf (read_header + from_gguf): %.3f s; encode corpus (%zu bytes, %zu "
              "tokens): %.2f ms (%.1f MB/s); PCRE2 JIT: %s\n",
              load_seconds_, corpus.size(), n_tokens / kReps, encode_s * 1e3, corpus.size() / encode_s / 1e6,
              qwen2_->regex_jit_enabled() ? "on" : "off");
  EXPECT_LT(load_seconds_, 5.0);
  EXPECT_LT(encode_s, 1.0);
}

// The reference models carry their own small synthetic vocabularies; their prompts must
// tokenize exactly as llama.cpp did (prompts/tokens.json, without special-token parsing).
TEST(TokenizerRefModels, PromptTokensMatchLlamaCpp) {
  const json prompts = read_json(kRefDir + "/prompts/tokens.json");
  std::map<std::string, Tokenizer> tokenizers;
  int n = 0, n_ok = 0;
  for (const auto& [prompt_id, p] : prompts.items()) {
    const std::string text = read_bytes(kRefDir + "/" + p.at("file").get<std::string>());
    for (const auto& [model, ids] : p.at("tokens").items()) {
      SCOPED_TRACE(prompt_id + " / " + model);
      auto it = tokenizers.find(model);
      if (it == tokenizers.end()) {
        it = tokenizers.emplace(model, load_tokenizer(kRefDir + "/models/" + model + ".gguf")).first;
      }
      const auto got = it->second.encode(text, false);
      const auto want = ids.get<std::vector<int32_t>>();
      EXPECT_EQ(got, want);
      EXPECT_EQ(it->second.detokenize(got), text);
      ++n;
      n_ok += got == want;
    }
  }
  std::printf("[ ref models ] %d/%d (prompt, model) pairs\n", n_ok, n);
  EXPECT_EQ(n, 42);
}

}  // namespace
}  // namespace moetier::text
