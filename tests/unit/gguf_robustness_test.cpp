// A deterministic corpus of damaged GGUF headers. Each must give a kBadInput error whose one
// line names a byte offset (or, for a harmless bit flip, parse into a header whose every
// tensor lies inside the file) — never a crash, a hang or a huge allocation.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "platform/process.h"

namespace moetier::gguf {
namespace {

const std::string kRefDir = MOETIER_REF_DIR;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Peak resident memory of this process in bytes.
uint64_t max_rss_bytes() { return platform::process_memory().peak_resident.value_or(0); }

// splitmix64: a tiny PRNG whose sequence is fixed by its definition (same on every
// platform and standard library), so the corpus is reproducible.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// Hand-assembled GGUF bytes, so a test can place any value in any field.
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& i64(int64_t v) { return raw(&v, 8); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    data.insert(data.end(), b, b + n);
    return *this;
  }
  Bytes& preamble(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(kMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  // A tensor info: name, dims, type, offset.
  Bytes& tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (const int64_t d : ne) i64(d);
    return u32(type).u64(offset);
  }
  // Pads with zeros to a multiple of `alignment`, then appends `data_bytes` zero bytes.
  Bytes& data_section(uint64_t data_bytes, uint64_t alignment = 32) {
    data.resize((data.size() + alignment - 1) / alignment * alignment + data_bytes, 0);
    return *this;
  }
  size_t size() const { return data.size(); }
  std::vector<uint8_t> data;
};

Result<GgufFile> parse(const std::vector<uint8_t>& b, const ParseLimits& limits = {}) {
  return parse_header(b.data(), b.size(), b.size(), "bad.gguf", limits);
}

// The invariants a successful parse promises its consumers.
void expect_consistent(const GgufFile& f) {
  ASSERT_NE(f.alignment, 0u);
  ASSERT_EQ(f.alignment & (f.alignment - 1), 0u);
  for (const TensorInfo& t : f.tensors) {
    ASSERT_GE(t.n_dims, 1u);
    ASSERT_LE(t.n_dims, 4u);
    ASSERT_NE(dtype_traits(static_cast<uint32_t>(t.type)), nullptr);
    ASSERT_EQ(t.offset % f.alignment, 0u);
    ASSERT_LE(t.file_offset, f.file_size);
    ASSERT_LE(t.n_bytes, f.file_size - t.file_offset);
  }
}

// A clean kBadInput failure: one line, "bad.gguf: at byte N: ...", plus optional substring.
void expect_bad(const Result<GgufFile>& r, const std::string& needle = "", const std::string& ctx = "") {
  ASSERT_FALSE(r.is_ok()) << ctx << " parsed but should not have";
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput) << ctx << ": " << r.status().message();
  const std::string& m = r.status().message();
  EXPECT_EQ(m.rfind("bad.gguf: at byte ", 0), 0u) << ctx << ": " << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << ctx << ": " << m;
  if (!needle.empty()) {
    EXPECT_NE(m.find(needle), std::string::npos) << ctx << ": " << m;
  }
}

void expect_bad_or_consistent(const Result<GgufFile>& r, const std::string& ctx) {
  if (r.is_ok()) {
    expect_consistent(*r);
  } else {
    expect_bad(r, "", ctx);
  }
}

// A small but complete valid file written with the Writer: strings, arrays, nested arrays,
// several tensor types, custom alignment.
std::vector<uint8_t> small_valid_file() {
  const std::string path = ::testing::TempDir() + "moetier_gguf_robust_" + std::to_string(platform::process_id()) + ".gguf";
  auto w = Writer::create(path, 64);
  EXPECT_TRUE(w.is_ok());
  (*w)->set("general.architecture", Value::make_string("qwen35moe"));
  (*w)->set("qwen35moe.block_count", Value::make_u32(2));
  (*w)->set("qwen35moe.rope.dimension_sections", Value::make_i32_array({11, 11, 10, 0}));
  (*w)->set("tokenizer.ggml.tokens", Value::make_string_array({"a", "bc", "Ġthe", "<|im_end|>"}));
  (*w)->set("x.eps", Value::make_f32(1e-6f));
  (*w)->set("x.flag", Value::make_bool(true));
  Value nested;
  nested.type = ValueType::ARRAY;
  nested.elem_type = ValueType::ARRAY;
  nested.arr = {Value::make_i32_array({1, 2}), Value::make_string_array({"q"})};
  (*w)->set("x.nested", nested);
  EXPECT_TRUE((*w)->add_tensor("token_embd.weight", DType::Q8_0, {64, 4}).is_ok());
  EXPECT_TRUE((*w)->add_tensor("blk.0.ffn_up_exps.weight", DType::Q4_K, {256, 2, 2}).is_ok());
  EXPECT_TRUE((*w)->add_tensor("output_norm.weight", DType::F32, {8}).is_ok());
  EXPECT_TRUE((*w)->write_header().is_ok());
  for (const TensorInfo& t : (*w)->tensors()) {
    std::vector<uint8_t> zeros(t.n_bytes, 0x11);
    EXPECT_TRUE((*w)->write_tensor_data(zeros.data(), zeros.size()).is_ok());
  }
  EXPECT_TRUE((*w)->finish().is_ok());
  auto bytes = read_file(path);
  std::remove(path.c_str());
  return bytes;
}

TEST(GgufRobustnessTruncation, EveryPrefixOfASmallFileFails) {
  const auto file = small_valid_file();
  auto full = parse(file);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  // The last tensor's data ends before the final alignment padding: prefixes that keep
  // every tensor whole are valid files; all shorter ones must fail.
  uint64_t needed = 0;
  for (const TensorInfo& t : full->tensors) needed = std::max(needed, t.file_offset + t.n_bytes);
  for (size_t len = 0; len < file.size(); ++len) {
    const std::vector<uint8_t> cut(file.begin(), file.begin() + len);
    const auto r = parse(cut);
    if (len >= needed) {
      EXPECT_TRUE(r.is_ok()) << len << ": " << r.status().message();
    } else {
      expect_bad(r, "", "prefix " + std::to_string(len));
    }
    // The same prefix given in memory while claiming the full size: the header is cut short.
    if (len < full->header_bytes) {
      expect_bad(parse_header(file.data(), len, file.size(), "bad.gguf"), "", "partial " + std::to_string(len));
    }
  }
}

TEST(GgufRobustnessTruncation, EveryHeaderByteOfARefModel) {
  const auto file = read_file(kRefDir + "/models/qwen35moe-tiny-mixed.gguf");
  auto full = parse(file);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  for (size_t len = 0; len <= full->data_offset; ++len) {
    expect_bad(parse_header(file.data(), len, len, "bad.gguf"), "", "prefix " + std::to_string(len));
  }
}

TEST(GgufRobustnessTruncation, VocabFileCutAtFieldBoundaries) {
  // Cutting a 6 MB vocabulary inside its 151,936-string array at many places (the start of
  // strings, in their length fields, mid-string): an error, found without reading past the cut.
  const auto file = read_file(kRefDir + "/tokenizer/qwen3-vocab.gguf");
  ASSERT_GT(file.size(), 1000u);
  SplitMix64 rng{42};
  for (int k = 0; k < 40; ++k) {
    const size_t len = rng.next() % file.size();
    expect_bad(parse_header(file.data(), len, len, "bad.gguf"), "", "prefix " + std::to_string(len));
  }
}

TEST(GgufRobustnessBitFlips, SingleAndMultiByteDamage) {
  const uint64_t rss_before = max_rss_bytes();
  const auto file = small_valid_file();
  const size_t header = parse(file)->data_offset;
  SplitMix64 rng{2026};
  int parsed_ok = 0;
  int failed = 0;
  // Every bit of the header flipped once.
  for (size_t byte = 0; byte < header; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      auto damaged = file;
      damaged[byte] ^= static_cast<uint8_t>(1u << bit);
      const auto r = parse(damaged);
      expect_bad_or_consistent(r, "flip " + std::to_string(byte) + "." + std::to_string(bit));
      (r.is_ok() ? parsed_ok : failed)++;
    }
  }
  // Random multi-byte damage: several bytes overwritten, some with the extreme values that
  // make counts and lengths huge.
  const uint8_t extremes[] = {0x00, 0xff, 0x7f, 0x80, 0x01};
  for (int k = 0; k < 20000; ++k) {
    auto damaged = file;
    const int n = 1 + static_cast<int>(rng.next() % 8);
    for (int j = 0; j < n; ++j) {
      const size_t at = rng.next() % header;
      const uint64_t r = rng.next();
      damaged[at] = (r & 1) ? extremes[(r >> 1) % 5] : static_cast<uint8_t>(r >> 8);
    }
    const auto r = parse(damaged);
    expect_bad_or_consistent(r, "random damage " + std::to_string(k));
    (r.is_ok() ? parsed_ok : failed)++;
    if (HasFailure()) return;
  }
  EXPECT_GT(failed, parsed_ok);  // most damage is detected
  // Nothing above may have allocated big buffers (the file is 2 KB).
  EXPECT_LT(max_rss_bytes() - rss_before, 256ull << 20);
}

TEST(GgufRobustnessHugeCounts, CountsAndLengthsBeyondTheFile) {
  const uint64_t rss_before = max_rss_bytes();
  const uint64_t huge[] = {1ull << 63, ~0ull, 1ull << 32, (1ull << 20) + 1, 1000000};
  for (const uint64_t n : huge) {
    const std::string ctx = std::to_string(n);
    // tensor / kv counts
    expect_bad(parse(Bytes().preamble(n, 0).data_section(64).data), "", ctx);
    expect_bad(parse(Bytes().preamble(0, n).data_section(64).data), "", ctx);
    // key length
    expect_bad(parse(Bytes().preamble(0, 1).u64(n).data_section(64).data), "string length", ctx);
    // string value length
    expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(8).u64(n).data_section(64).data), "string length", ctx);
    // array lengths for every element type
    for (uint32_t elem = 0; elem <= 12; ++elem) {
      expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(9).u32(elem).u64(n).data_section(64).data), "array",
                 ctx + " elem " + std::to_string(elem));
    }
    // a string inside an array
    expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(9).u32(8).u64(2).str("ok").u64(n).data_section(64).data),
               "string length", ctx);
    // tensor name length
    expect_bad(parse(Bytes().preamble(1, 0).u64(n).data_section(64).data), "string length", ctx);
  }
  // The example from the spec: a string length of 2^64-1 with 120 bytes left.
  auto r = parse(Bytes().preamble(0, 1).u64(~0ull).data_section(120, 1).data);
  expect_bad(r,
             "at byte 24: the key of metadata entry 0: string length 18446744073709551615 exceeds the 120 bytes "
             "left in the file");
  EXPECT_LT(max_rss_bytes() - rss_before, 64ull << 20);
}

TEST(GgufRobustnessHugeCounts, ParseLimitsAreEnforced) {
  const ParseLimits tight{
      .max_string_bytes = 4, .max_array_elems = 3, .max_tensors = 1, .max_kv = 2, .max_array_depth = 1};
  expect_bad(parse(Bytes().preamble(0, 1).str("toolong").u32(4).u32(1).data_section(64).data, tight), "limit");
  expect_bad(
      parse(Bytes().preamble(0, 1).str("k").u32(9).u32(4).u64(4).u32(1).u32(1).u32(1).u32(1).data_section(64).data,
            tight),
      "limit");
  expect_bad(parse(Bytes().preamble(2, 0).data_section(256).data, tight), "limit");
  expect_bad(parse(Bytes().preamble(0, 3).data_section(256).data, tight), "limit");
  expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(9).u32(9).u64(1).u32(4).u64(0).data_section(64).data, tight),
             "nested");
}

TEST(GgufRobustnessHeader, MagicVersionAndValueTypes) {
  expect_bad(parse({}), "too small");
  expect_bad(parse({'G', 'G', 'U'}), "too small");
  expect_bad(parse(Bytes().u32(0x46554746).u32(3).u64(0).u64(0).data), "not a GGUF file");
  expect_bad(parse(Bytes().preamble(0, 0, 1).data_section(32).data), "version 1");
  expect_bad(parse(Bytes().preamble(0, 0, 0).data_section(32).data), "unsupported GGUF version 0");
  expect_bad(parse(Bytes().preamble(0, 0, 4).data_section(32).data), "unsupported GGUF version 4");
  expect_bad(parse(Bytes().preamble(0, 0, 0x03000000).data_section(32).data), "big-endian");
  // An empty but valid file: header only.
  EXPECT_TRUE(parse(Bytes().preamble(0, 0).data).is_ok());
  // Unknown value type ids, at the top level and as array element type.
  for (const uint32_t id : {13u, 100u, 0xffffffffu}) {
    expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(id).u64(0).data_section(64).data),
               "unknown value type id " + std::to_string(id));
    expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(9).u32(id).u64(0).data_section(64).data),
               "unknown array element type id " + std::to_string(id));
  }
  // Bool values other than 0/1.
  expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(7).u8(2).data_section(64).data), "bool");
  expect_bad(parse(Bytes().preamble(0, 1).str("k").u32(9).u32(7).u64(2).u8(1).u8(5).data_section(64).data), "bool");
  // Duplicate and empty keys.
  expect_bad(parse(Bytes().preamble(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).data_section(64).data),
             "duplicate metadata key 'k'");
  expect_bad(parse(Bytes().preamble(0, 1).str("").u32(4).u32(1).data_section(64).data), "empty key");
  // Nested arrays deeper than the default limit (4).
  Bytes deep = Bytes().preamble(0, 1).str("k").u32(9);
  for (int d = 0; d < 5; ++d) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  expect_bad(parse(deep.data_section(64).data), "nested deeper");
  // Nested up to the limit is fine.
  Bytes ok = Bytes().preamble(0, 1).str("k").u32(9);
  for (int d = 0; d < 3; ++d) ok.u32(9).u64(1);
  ok.u32(4).u64(1).u32(7);
  auto parsed = parse(ok.data_section(64).data);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_EQ(parsed->metadata[0].second.arr[0].arr[0].arr[0].arr_u[0], 7u);
}

TEST(GgufRobustnessHeader, BadAlignmentValues) {
  const auto with_alignment = [](uint32_t type, uint64_t value) {
    Bytes b = Bytes().preamble(1, 1).str("general.alignment").u32(type);
    if (type == 4) b.u32(static_cast<uint32_t>(value));
    if (type == 10) b.u64(value);
    if (type == 8) b.str("32");
    b.tensor("t", {8}, 0, 0);
    return b.data_section(64, 64).data;
  };
  for (const uint64_t a : {0ull, 3ull, 48ull, 0xffffffffull, 100ull}) {
    expect_bad(parse(with_alignment(4, a)), "not a non-zero power of two", std::to_string(a));
  }
  expect_bad(parse(with_alignment(10, 32)), "expected u32");
  expect_bad(parse(with_alignment(8, 0)), "expected u32");
  auto good = parse(with_alignment(4, 64));
  ASSERT_TRUE(good.is_ok()) << good.status().message();
  EXPECT_EQ(good->alignment, 64u);
  EXPECT_EQ(good->data_offset % 64, 0u);
  // A huge power-of-two alignment pushes the data section past the end of the file.
  expect_bad(parse(with_alignment(4, 1u << 31)), "past the end");
}

Bytes one_tensor(const std::vector<int64_t>& ne, uint32_t type, uint64_t offset, uint64_t data_bytes = 256) {
  return Bytes().preamble(1, 0).tensor("w", ne, type, offset).data_section(data_bytes);
}

TEST(GgufRobustnessTensors, DimensionsAndTypes) {
  EXPECT_TRUE(parse(one_tensor({64}, 0, 0).data).is_ok());
  expect_bad(parse(one_tensor({}, 0, 0).data), "0 dimensions");
  expect_bad(parse(Bytes()
                       .preamble(1, 0)
                       .str("w")
                       .u32(5)
                       .i64(1)
                       .i64(1)
                       .i64(1)
                       .i64(1)
                       .i64(1)
                       .u32(0)
                       .u64(0)
                       .data_section(64)
                       .data),
             "5 dimensions");
  expect_bad(parse(Bytes().preamble(1, 0).str("w").u32(0xffffffff).data_section(64).data), "dimensions");
  expect_bad(parse(one_tensor({0}, 0, 0).data), "must be positive");
  expect_bad(parse(one_tensor({8, -1}, 0, 0).data), "must be positive");
  expect_bad(parse(one_tensor({INT64_MIN}, 0, 0).data), "must be positive");
  expect_bad(parse(one_tensor({1ll << 32, 1ll << 32}, 0, 0).data), "overflows");
  expect_bad(parse(one_tensor({INT64_MAX, 2}, 0, 0).data), "overflows");
  // 2^62 eight-byte elements: the element count fits, the byte count does not.
  expect_bad(parse(one_tensor({1ll << 62}, 28 /* F64 */, 0).data), "overflows");
  // 2^61 F32 elements: 2^63 bytes, no overflow, but far past the end of the file.
  expect_bad(parse(one_tensor({1ll << 61}, 0, 0).data), "past the end of the file");
  // Unknown / removed type ids; the message names the id.
  for (const uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 99u, 0xffffffffu}) {
    expect_bad(parse(one_tensor({32}, id, 0).data), "unknown type id " + std::to_string(id));
  }
  // Row length not a multiple of the block size (Q4_K: 256, Q8_0: 32).
  expect_bad(parse(one_tensor({100}, 12, 0).data), "not a multiple of the Q4_K block size 256");
  expect_bad(parse(one_tensor({33, 2}, 8, 0).data), "block size 32");
  // Types without moetier kernels are still readable (Q2_K = 10).
  auto q2k = parse(one_tensor({256}, 10, 0).data);
  EXPECT_TRUE(q2k.is_ok()) << q2k.status().message();
  expect_bad(parse(Bytes().preamble(1, 0).tensor("", {8}, 0, 0).data_section(64).data), "empty name");
}

TEST(GgufRobustnessTensors, OffsetsOverlapsAndDuplicates) {
  expect_bad(parse(one_tensor({8}, 0, 1).data), "not a multiple of the alignment 32");
  expect_bad(parse(one_tensor({8}, 0, 16).data), "alignment");
  expect_bad(parse(one_tensor({8}, 0, 256).data), "past the end of the file");
  expect_bad(parse(one_tensor({128}, 0, 0, 511).data), "past the end of the file");  // 512 needed
  EXPECT_TRUE(parse(one_tensor({128}, 0, 0, 512).data).is_ok());
  expect_bad(parse(one_tensor({8}, 0, ~0ull - 31).data), "past the end of the file");
  expect_bad(parse(one_tensor({8}, 0, 1ull << 63).data), "past the end of the file");

  // Two tensors sharing bytes, in either table order.
  expect_bad(parse(Bytes().preamble(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).data_section(256).data),
             "overlaps");
  expect_bad(parse(Bytes().preamble(2, 0).tensor("a", {16}, 0, 32).tensor("b", {16}, 0, 0).data_section(256).data),
             "overlaps");
  expect_bad(parse(Bytes().preamble(2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).data_section(256).data),
             "overlaps");
  EXPECT_TRUE(
      parse(Bytes().preamble(2, 0).tensor("a", {8}, 0, 32).tensor("b", {8}, 0, 0).data_section(256).data).is_ok());
  expect_bad(parse(Bytes().preamble(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).data_section(256).data),
             "duplicate tensor name 'a'");
}

TEST(GgufRobustnessFiles, ReadHeaderOnDamagedFiles) {
  // The same checks through the buffered file reader (not only parse_header).
  const auto file = small_valid_file();
  const std::string path = ::testing::TempDir() + "moetier_gguf_damaged_" + std::to_string(platform::process_id()) + ".gguf";
  SplitMix64 rng{7};
  for (int k = 0; k < 200; ++k) {
    auto damaged = file;
    if (k % 2 == 0) {
      damaged.resize(rng.next() % file.size());
    } else {
      damaged[rng.next() % 400] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(damaged.data()), static_cast<std::streamsize>(damaged.size()));
    auto r = read_header(path);
    if (r.is_ok()) {
      expect_consistent(*r);
    } else {
      EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput) << r.status().message();
      EXPECT_NE(r.status().message().find("at byte"), std::string::npos) << r.status().message();
    }
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace moetier::gguf
