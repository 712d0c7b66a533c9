// libFuzzer target for the GGUF header parser: any byte string must give either a clean
// kBadInput error naming a byte offset, or a header whose tensors all lie inside the input.
// Build: CC=clang CXX=clang++ cmake -DMOETIER_FUZZ=ON -DMOETIER_SANITIZE=ON ...; target fuzz_gguf.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gguf/gguf.h"

namespace {

// Violations are bugs in the parser: stop the fuzzer with a crash it records.
void require(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace moetier::gguf;
  // Tighter limits than the defaults keep each input fast; sizes are bounded by the input anyway.
  const ParseLimits limits{.max_string_bytes = 1 << 20, .max_array_elems = 1 << 20, .max_tensors = 1 << 16,
                           .max_kv = 1 << 16, .max_array_depth = 4};
  const auto result = parse_header(data, size, size, "fuzz.gguf", limits);
  if (!result.is_ok()) {
    const std::string& m = result.status().message();
    require(result.status().kind() == moetier::ErrorKind::kBadInput);
    require(m.find("at byte ") != std::string::npos);
    require(m.find('\n') == std::string::npos);
    return 0;
  }
  const GgufFile& f = *result;
  require(f.alignment != 0 && (f.alignment & (f.alignment - 1)) == 0);
  require(f.header_bytes <= size);
  for (const TensorInfo& t : f.tensors) {
    require(t.n_dims >= 1 && t.n_dims <= kMaxDims);
    require(moetier::dtype_traits(static_cast<uint32_t>(t.type)) != nullptr);
    require(t.offset % f.alignment == 0);
    require(t.file_offset <= size && t.n_bytes <= size - t.file_offset);
    require(f.find_tensor(t.name) == &t);
  }
  // Exercise the value helpers on whatever was parsed.
  for (const auto& [key, value] : f.metadata) {
    require(f.find(key) == &value);
    (void)value.to_display_string(4);
    (void)value.as_int();
    (void)value.as_float();
    (void)value.as_int_array();
    (void)f.get_int(key);
    (void)f.get_string(key);
  }
  return 0;
}
