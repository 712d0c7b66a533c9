// GGUF reader, writer and ModelFile: round trips through the writer, the reference models
// and vocab files against manifest.json, and both load modes giving the same bytes.
#include "gguf/gguf.h"

#include <gtest/gtest.h>
#ifndef _WIN32
#include <sys/resource.h>
#include <unistd.h>
#endif

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/model_file.h"
#include "gguf/writer.h"
#include "platform/process.h"

namespace moetier::gguf {
namespace {

const std::string kRefDir = MOETIER_REF_DIR;

std::string temp_path(const std::string& tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "moetier_gguf_" + info->test_suite_name() + "_" + info->name() + "_" + tag + "_" +
         std::to_string(platform::process_id()) + ".gguf";
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Deep equality of two values (same type, same element type, same payload).
bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64:
    case ValueType::BOOL:
      return a.u == b.u;
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return a.i == b.i;
    case ValueType::F32:
    case ValueType::F64:
      return a.f == b.f || (std::isnan(a.f) && std::isnan(b.f));
    case ValueType::STRING:
      return a.s == b.s;
    case ValueType::ARRAY:
      break;
  }
  if (a.elem_type != b.elem_type || a.array_size() != b.array_size()) return false;
  if (a.arr_u != b.arr_u || a.arr_i != b.arr_i || a.arr_s != b.arr_s || a.arr.size() != b.arr.size()) return false;
  if (a.arr_f.size() != b.arr_f.size()) return false;
  for (size_t k = 0; k < a.arr_f.size(); ++k) {
    if (a.arr_f[k] != b.arr_f[k] && !(std::isnan(a.arr_f[k]) && std::isnan(b.arr_f[k]))) return false;
  }
  for (size_t k = 0; k < a.arr.size(); ++k) {
    if (!same_value(a.arr[k], b.arr[k])) return false;
  }
  return true;
}

Value scalar(ValueType t, uint64_t u, int64_t i, double f) {
  Value v;
  v.type = t;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}

Value array_of(ValueType elem) {
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = elem;
  return v;
}

// Metadata covering every value type: each scalar at its extremes, each array type,
// arrays of strings, empty arrays and strings, arrays of arrays (of numbers and strings).
std::vector<std::pair<std::string, Value>> every_value_type() {
  std::vector<std::pair<std::string, Value>> kv;
  kv.emplace_back("t.u8", scalar(ValueType::U8, 255, 0, 0));
  kv.emplace_back("t.i8", scalar(ValueType::I8, 0, -128, 0));
  kv.emplace_back("t.u16", scalar(ValueType::U16, 65535, 0, 0));
  kv.emplace_back("t.i16", scalar(ValueType::I16, 0, -32768, 0));
  kv.emplace_back("t.u32", Value::make_u32(4294967295u));
  kv.emplace_back("t.i32", Value::make_i32(-2147483647 - 1));
  kv.emplace_back("t.f32", Value::make_f32(1e-6f));
  kv.emplace_back("t.bool", Value::make_bool(true));
  kv.emplace_back("t.string", Value::make_string("héllo \"world\"\n"));
  kv.emplace_back("t.empty_string", Value::make_string(""));
  kv.emplace_back("t.u64", Value::make_u64(~0ull));
  kv.emplace_back("t.i64", scalar(ValueType::I64, 0, INT64_MIN, 0));
  kv.emplace_back("t.f64", scalar(ValueType::F64, 0, 0, -1.0 / 3.0));

  Value a = array_of(ValueType::U8);
  a.arr_u = {0, 1, 255};
  kv.emplace_back("a.u8", a);
  a = array_of(ValueType::I8);
  a.arr_i = {-128, 0, 127};
  kv.emplace_back("a.i8", a);
  a = array_of(ValueType::U16);
  a.arr_u = {0, 65535};
  kv.emplace_back("a.u16", a);
  a = array_of(ValueType::I16);
  a.arr_i = {-32768, 32767};
  kv.emplace_back("a.i16", a);
  a = array_of(ValueType::U32);
  a.arr_u = {7, 4294967295u};
  kv.emplace_back("a.u32", a);
  kv.emplace_back("a.i32", Value::make_i32_array({11, 11, 10, 0, -5}));
  kv.emplace_back("a.f32", Value::make_f32_array({0.5f, -2.25f, 1e30f}));
  a = array_of(ValueType::BOOL);
  a.arr_u = {1, 0, 1};
  kv.emplace_back("a.bool", a);
  kv.emplace_back("a.string", Value::make_string_array({"Ġt", "he", "", "l l"}));
  a = array_of(ValueType::U64);
  a.arr_u = {~0ull, 0};
  kv.emplace_back("a.u64", a);
  a = array_of(ValueType::I64);
  a.arr_i = {INT64_MIN, INT64_MAX};
  kv.emplace_back("a.i64", a);
  a = array_of(ValueType::F64);
  a.arr_f = {1e300, -0.0};
  kv.emplace_back("a.f64", a);
  kv.emplace_back("a.empty", Value::make_i32_array({}));

  Value nested = array_of(ValueType::ARRAY);
  nested.arr.push_back(Value::make_i32_array({1, 2}));
  nested.arr.push_back(Value::make_i32_array({}));
  nested.arr.push_back(Value::make_string_array({"x", "yz"}));
  Value deeper = array_of(ValueType::ARRAY);
  deeper.arr.push_back(Value::make_f32_array({3.0f}));
  nested.arr.push_back(deeper);
  kv.emplace_back("a.nested", nested);
  return kv;
}

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<int64_t> ne;
};

// Deterministic bytes for tensor k (not valid numbers for every type; the reader does not care).
std::vector<uint8_t> tensor_bytes(size_t k, uint64_t n) {
  std::vector<uint8_t> b(n);
  for (uint64_t j = 0; j < n; ++j) b[j] = static_cast<uint8_t>((j * 131 + k * 17 + (j >> 8)) & 0xff);
  return b;
}

// Writes metadata + tensors with the Writer (data in `chunks` pieces per tensor).
void write_file(const std::string& path, uint64_t alignment, const std::vector<std::pair<std::string, Value>>& kv,
                const std::vector<TensorSpec>& specs, int chunks = 1) {
  auto w = Writer::create(path, alignment);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  for (const auto& [k, v] : kv) (*w)->set(k, v);
  for (const auto& s : specs) ASSERT_TRUE((*w)->add_tensor(s.name, s.type, s.ne).is_ok()) << s.name;
  ASSERT_TRUE((*w)->write_header().is_ok());
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto bytes = tensor_bytes(k, (*w)->tensors()[k].n_bytes);
    const size_t step = (bytes.size() + chunks - 1) / chunks;
    for (size_t at = 0; at < bytes.size(); at += step) {
      const size_t n = std::min(step, bytes.size() - at);
      ASSERT_TRUE((*w)->write_tensor_data(bytes.data() + at, n).is_ok());
    }
  }
  const Status st = (*w)->finish();
  ASSERT_TRUE(st.is_ok()) << st.message();
}

const std::vector<TensorSpec> kSpecs = {
    {"token_embd.weight", DType::Q4_K, {256, 3}},
    {"blk.0.attn_norm.weight", DType::F32, {7}},
    {"blk.0.ffn_up_exps.weight", DType::Q8_0, {64, 5, 2}},
    {"blk.0.x", DType::F16, {3, 1, 1, 2}},
    {"blk.0.iq", DType::IQ4_XS, {256, 1}},
    {"output.weight", DType::BF16, {5, 3}},
};

void expect_round_trip(uint64_t alignment, int chunks) {
  const std::string path = temp_path("a" + std::to_string(alignment));
  const auto kv = every_value_type();
  write_file(path, alignment, kv, kSpecs, chunks);
  auto r = read_header(path);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const GgufFile& f = *r;
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, alignment);
  EXPECT_EQ(f.data_offset % alignment, 0u);
  const size_t extra = alignment == kDefaultAlignment ? 0 : 1;  // general.alignment added by the writer
  ASSERT_EQ(f.metadata.size(), kv.size() + extra);
  for (size_t k = 0; k < kv.size(); ++k) {
    EXPECT_EQ(f.metadata[k].first, kv[k].first);
    EXPECT_TRUE(same_value(f.metadata[k].second, kv[k].second))
        << kv[k].first << ": " << f.metadata[k].second.to_display_string() << " vs "
        << kv[k].second.to_display_string();
  }
  if (extra) {
    EXPECT_EQ(f.get_int("general.alignment").value(), static_cast<int64_t>(alignment));
  }

  ASSERT_EQ(f.tensors.size(), kSpecs.size());
  const auto bytes = read_file(path);
  ASSERT_EQ(bytes.size(), f.file_size);
  for (size_t k = 0; k < kSpecs.size(); ++k) {
    const TensorInfo& t = f.tensors[k];
    EXPECT_EQ(t.name, kSpecs[k].name);
    EXPECT_EQ(t.type, kSpecs[k].type);
    EXPECT_EQ(t.n_dims, kSpecs[k].ne.size());
    uint64_t n = 1;
    for (size_t d = 0; d < kSpecs[k].ne.size(); ++d) {
      EXPECT_EQ(t.ne[d], kSpecs[k].ne[d]);
      n *= kSpecs[k].ne[d];
    }
    EXPECT_EQ(t.n_elements, n);
    const auto& traits = dtype_traits(t.type);
    EXPECT_EQ(t.n_bytes, n / traits.block_elems * traits.block_bytes);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(t.file_offset, f.data_offset + t.offset);
    const auto want = tensor_bytes(k, t.n_bytes);
    EXPECT_EQ(0, std::memcmp(bytes.data() + t.file_offset, want.data(), want.size())) << t.name;
    EXPECT_EQ(f.find_tensor(t.name), &t);
  }
  // The file ends aligned (the writer pads after the last tensor, like llama.cpp).
  EXPECT_EQ(f.file_size % alignment, 0u);
  std::remove(path.c_str());
}

TEST(GgufRoundTrip, EveryValueTypeDefaultAlignment) { expect_round_trip(32, 1); }
TEST(GgufRoundTrip, EveryValueTypeAlignment64ChunkedData) { expect_round_trip(64, 3); }
TEST(GgufRoundTrip, Alignment1And4096) {
  expect_round_trip(1, 2);
  expect_round_trip(4096, 1);
}

TEST(GgufRoundTrip, ParseHeaderFromMemoryMatchesReadHeader) {
  const std::string path = temp_path("m");
  write_file(path, 32, every_value_type(), kSpecs);
  const auto bytes = read_file(path);
  auto from_file = read_header(path);
  auto from_mem = parse_header(bytes.data(), bytes.size(), bytes.size(), "mem.gguf");
  ASSERT_TRUE(from_file.is_ok() && from_mem.is_ok());
  EXPECT_EQ(from_mem->data_offset, from_file->data_offset);
  EXPECT_EQ(from_mem->header_bytes, from_file->header_bytes);
  // Only the header bytes are needed in memory; the offsets are checked against file_size.
  auto header_only = parse_header(bytes.data(), from_file->header_bytes, bytes.size(), "mem.gguf");
  ASSERT_TRUE(header_only.is_ok()) << header_only.status().message();
  EXPECT_EQ(header_only->tensors.size(), kSpecs.size());
  std::remove(path.c_str());
}

TEST(GgufRoundTrip, Version2IsReadVersion1Rejected) {
  const std::string path = temp_path("v");
  write_file(path, 32, every_value_type(), kSpecs);
  auto bytes = read_file(path);
  bytes[4] = 2;  // v2 has the same layout as v3 (v3 only added big-endian files)
  auto v2 = parse_header(bytes.data(), bytes.size(), bytes.size(), "v2.gguf");
  ASSERT_TRUE(v2.is_ok()) << v2.status().message();
  EXPECT_EQ(v2->version, 2u);
  bytes[4] = 1;
  auto v1 = parse_header(bytes.data(), bytes.size(), bytes.size(), "v1.gguf");
  ASSERT_FALSE(v1.is_ok());
  EXPECT_EQ(v1.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(v1.status().message().find("version 1 is not supported"), std::string::npos) << v1.status().message();
  EXPECT_NE(v1.status().message().find("at byte 4"), std::string::npos);
  std::remove(path.c_str());
}

TEST(GgufWriter, RejectsBadTensorsAndIncompleteData) {
  const std::string path = temp_path("w");
  auto w = Writer::create(path);
  ASSERT_TRUE(w.is_ok());
  EXPECT_TRUE((*w)->add_tensor("a", DType::F32, {4}).is_ok());
  EXPECT_FALSE((*w)->add_tensor("a", DType::F32, {4}).is_ok());                   // duplicate
  EXPECT_FALSE((*w)->add_tensor("b", DType::Q4_K, {100}).is_ok());                // 100 % 256
  EXPECT_FALSE((*w)->add_tensor("c", DType::F32, {4, 0}).is_ok());                // zero dim
  EXPECT_FALSE((*w)->add_tensor("d", DType::F32, {1, 1, 1, 1, 1}).is_ok());       // 5 dims
  EXPECT_FALSE((*w)->add_tensor("e", DType::F32, {}).is_ok());                    // 0 dims
  EXPECT_FALSE((*w)->add_tensor(std::string(64, 'n'), DType::F32, {4}).is_ok());  // llama.cpp name limit
  EXPECT_FALSE((*w)->add_tensor("f", static_cast<DType>(99), {4}).is_ok());       // unknown type
  EXPECT_FALSE((*w)->add_tensor("g", DType::F32, {INT64_MAX, 2}).is_ok());        // overflow
  EXPECT_TRUE((*w)->add_tensor("h", DType::F16, {2}).is_ok());
  ASSERT_TRUE((*w)->write_header().is_ok());
  const float four[4] = {1, 2, 3, 4};
  EXPECT_FALSE((*w)->write_tensor_data(four, 20).is_ok());  // more than tensor 'a' holds
  EXPECT_TRUE((*w)->write_tensor_data(four, 16).is_ok());
  const Status st = (*w)->finish();  // 'h' was never written
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("'h'"), std::string::npos) << st.message();
  EXPECT_FALSE(Writer::create(path, 48).is_ok());  // not a power of two
  std::remove(path.c_str());
}

TEST(GgufValue, AccessorsAndDisplay) {
  EXPECT_EQ(Value::make_u32(7).as_int(), 7);
  EXPECT_EQ(Value::make_u64(~0ull).as_int(), std::nullopt);  // does not fit int64
  EXPECT_EQ(Value::make_bool(true).as_int(), 1);
  EXPECT_EQ(Value::make_string("x").as_int(), std::nullopt);
  EXPECT_EQ(Value::make_f32(0.5f).as_float(), 0.5);
  EXPECT_EQ(Value::make_i32(-3).as_float(), -3.0);
  EXPECT_EQ(Value::make_string("abc").as_string(), "abc");
  EXPECT_EQ(Value::make_i32_array({1, 2}).as_int_array(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Value::make_f32_array({1}).as_int_array(), std::nullopt);
  EXPECT_EQ(Value::make_f32(1e-6f).to_display_string(), "1e-06");
  EXPECT_EQ(Value::make_string("a\"b\n").to_display_string(), "\"a\\\"b\\n\"");
  std::vector<int32_t> many(100);
  for (int k = 0; k < 100; ++k) many[k] = k;
  EXPECT_EQ(Value::make_i32_array(many).to_display_string(3), "[0, 1, 2, ... (100 items)]");
  EXPECT_EQ(Value::make_i32_array({}).to_display_string(), "[]");
  EXPECT_EQ(Value::make_string_array({"a", "b"}).to_display_string(), "[\"a\", \"b\"]");
  EXPECT_EQ(value_type_name(ValueType::STRING), "string");
}

TEST(GgufValue, TypedGettersGiveClearErrors) {
  GgufFile f;
  f.metadata = {{"n", Value::make_u32(40)}, {"s", Value::make_string("qwen35moe")}, {"x", Value::make_f32(2.5f)}};
  f.index();
  EXPECT_EQ(f.get_int("n").value(), 40);
  EXPECT_EQ(f.get_string("s").value(), "qwen35moe");
  EXPECT_EQ(f.get_float("x").value(), 2.5);
  EXPECT_EQ(f.get_float("n").value(), 40.0);
  auto missing = f.get_int("qwen35moe.block_count");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(missing.status().message(), "missing metadata key 'qwen35moe.block_count'");
  auto wrong = f.get_int("s");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().message(), "metadata key 's' is a string, expected an integer");
  EXPECT_FALSE(f.get_string("n").is_ok());
  EXPECT_EQ(f.get_int_or("zz", -1), -1);
  EXPECT_EQ(f.get_int_or("s", -1), -1);
  EXPECT_EQ(f.get_float_or("zz", 1.5), 1.5);
  EXPECT_EQ(f.get_string_or("zz", "d"), "d");
  EXPECT_EQ(f.get_string_or("s", "d"), "qwen35moe");
}

TEST(GgufReader, MissingFileAndDirectoryAreBadInput) {
  auto r = read_header("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(r.status().message().find("cannot open"), std::string::npos);
  auto d = read_header("/tmp");
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().kind(), ErrorKind::kBadInput);
}

// ---- reference models -----------------------------------------------------------------

nlohmann::json manifest() {
  std::ifstream in(kRefDir + "/manifest.json");
  return nlohmann::json::parse(in);
}

TEST(GgufRefModels, EveryModelMatchesManifestCensus) {
  const auto m = manifest();
  ASSERT_TRUE(m.contains("models"));
  int n_models = 0;
  for (const auto& [name, model] : m["models"].items()) {
    SCOPED_TRACE(name);
    const std::string path = kRefDir + "/" + model["file"].get<std::string>();
    auto r = read_header(path);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const GgufFile& f = *r;
    EXPECT_EQ(f.file_size, model["bytes"].get<uint64_t>());
    std::map<std::string, std::pair<uint64_t, uint64_t>> census;  // type -> (count, bytes)
    for (const TensorInfo& t : f.tensors) {
      auto& c = census[std::string(dtype_name(t.type))];
      c.first += 1;
      c.second += t.n_bytes;
    }
    const auto& want = model["tensor_types"];
    EXPECT_EQ(census.size(), want.size());
    for (const auto& [type, counts] : want.items()) {
      EXPECT_EQ(census[type].first, counts["count"].get<uint64_t>()) << type;
      EXPECT_EQ(census[type].second, counts["bytes"].get<uint64_t>()) << type;
    }
    if (model.contains("metadata")) {
      const auto& md = model["metadata"];
      EXPECT_EQ(f.tensors.size(), md.value("GGUF.tensor_count", uint64_t{0}));
      EXPECT_EQ(f.metadata.size(), md.value("GGUF.kv_count", uint64_t{0}));
      EXPECT_EQ(f.version, md.value("GGUF.version", uint32_t{0}));
      EXPECT_EQ(f.get_string_or("general.architecture", ""), md.value("general.architecture", ""));
      if (md.contains("general.file_type")) {
        EXPECT_EQ(f.get_int_or("general.file_type", -1), md["general.file_type"].get<int64_t>());
      }
    }
    ++n_models;
  }
  EXPECT_GE(n_models, 7);
}

TEST(GgufRefModels, VocabFilesParse) {
  for (const auto& [file, pre] : {std::pair{"qwen3-vocab.gguf", "qwen2"}, {"qwen35pre-vocab.gguf", "qwen35"}}) {
    SCOPED_TRACE(file);
    auto r = read_header(kRefDir + "/tokenizer/" + file);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_TRUE(r->tensors.empty());
    EXPECT_EQ(r->get_string_or("tokenizer.ggml.pre", ""), pre);
    const Value* tokens = r->find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->elem_type, ValueType::STRING);
    EXPECT_EQ(tokens->arr_s.size(), 151936u);  // tokenizer/README.md
    EXPECT_EQ(tokens->arr_s[0], "!");          // first byte-level token
    const Value* types = r->find("tokenizer.ggml.token_type");
    ASSERT_NE(types, nullptr);
    EXPECT_EQ(types->array_size(), 151936u);
  }
}

// ---- ModelFile ----------------------------------------------------------------------

TEST(GgufModelFile, MmapAndReadGiveIdenticalBytes) {
  for (const char* name : {"qwen35moe-tiny-mixed", "qwen35moe-small-ud_mix"}) {
    SCOPED_TRACE(name);
    const std::string path = kRefDir + "/models/" + name + ".gguf";
    auto mapped = ModelFile::open(path, {.mode = LoadMode::kMmap, .progress = false, .verbose = false});
    auto read = ModelFile::open(path, {.mode = LoadMode::kRead, .progress = false, .verbose = false});
    ASSERT_TRUE(mapped.is_ok()) << mapped.status().message();
    ASSERT_TRUE(read.is_ok()) << read.status().message();
    EXPECT_EQ((*mapped)->mode(), LoadMode::kMmap);
    EXPECT_EQ((*read)->mode(), LoadMode::kRead);
    const auto file = read_file(path);
    const GgufFile& h = (*read)->header();
    ASSERT_FALSE(h.tensors.empty());
    uint64_t last_end = 0;
    for (const TensorInfo& t : h.tensors) {
      const uint8_t* a = (*mapped)->tensor_data(t);
      const uint8_t* b = (*read)->tensor_data(t);
      ASSERT_EQ(0, std::memcmp(a, b, t.n_bytes)) << t.name;
      ASSERT_EQ(0, std::memcmp(a, file.data() + t.file_offset, t.n_bytes)) << t.name;
      last_end = std::max(last_end, t.offset + t.n_bytes);
    }
    EXPECT_EQ((*read)->stats().bytes, last_end);
    EXPECT_GT((*read)->stats().gb_per_second, 0.0);
  }
}

TEST(GgufModelFile, VocabOnlyFileOpensInBothModes) {
  const std::string path = kRefDir + "/tokenizer/qwen3-vocab.gguf";
  for (const LoadMode mode : {LoadMode::kMmap, LoadMode::kRead}) {
    auto mf = ModelFile::open(path, {.mode = mode, .progress = false, .verbose = false});
    ASSERT_TRUE(mf.is_ok()) << mf.status().message();
    EXPECT_EQ((*mf)->stats().bytes, 0u);
  }
}

TEST(GgufModelFile, CorruptFileIsBadInput) {
  const std::string path = temp_path("c");
  write_file(path, 32, {}, kSpecs);
  const auto bytes = read_file(path);
  ASSERT_GT(bytes.size(), 100u);
  const std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 100);  // cut into the last tensor
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(cut.data()), cut.size());
  auto mf = ModelFile::open(path, {.mode = LoadMode::kRead, .progress = false, .verbose = false});
  ASSERT_FALSE(mf.is_ok());
  EXPECT_EQ(mf.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(mf.status().message().find("extends past the end of the file"), std::string::npos) << mf.status().message();
  std::remove(path.c_str());
}

#ifndef _WIN32
// --mlock under a locked-memory limit too small for the data: a clear kRuntime error
// pointing at ulimit -l. (Root with CAP_IPC_LOCK ignores the limit: then it must succeed.)
TEST(GgufModelFile, MlockFailureSuggestsUlimit) {
  const std::string path = kRefDir + "/models/qwen35moe-tiny-mixed.gguf";  // 2.4 MB of data
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_MEMLOCK, &saved), 0);
  struct rlimit tiny = saved;
  tiny.rlim_cur = 64 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_MEMLOCK, &tiny), 0);
  for (const LoadMode mode : {LoadMode::kMmap, LoadMode::kRead}) {
    auto mf = ModelFile::open(path, {.mode = mode, .mlock = true, .progress = false, .verbose = false});
    if (::geteuid() == 0 && mf.is_ok()) continue;  // privileged: the limit does not apply
    ASSERT_FALSE(mf.is_ok());
    EXPECT_EQ(mf.status().kind(), ErrorKind::kRuntime);
    EXPECT_NE(mf.status().message().find("ulimit -l"), std::string::npos) << mf.status().message();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_MEMLOCK, &saved), 0);
}
#endif  // Linux's locked-memory limit

}  // namespace
}  // namespace moetier::gguf
