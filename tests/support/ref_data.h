// Reading ../shared/ref (MOETIER_REF_DIR) from tests: raw f32 arrays and JSON files.
#pragma once

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moetier::testing {

inline constexpr const char* kRefDir = MOETIER_REF_DIR;

// A raw little-endian float32 array (the *.f32.bin / *.f32 files).
// The path of a reference model: ref_model_path("qwen35moe-tiny-f32").
inline std::string ref_model_path(const std::string& name) { return std::string(kRefDir) + "/models/" + name + ".gguf"; }

inline std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

inline nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace moetier::testing
