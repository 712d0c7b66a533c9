// Loading a reference model (../shared/ref/models) into a runnable Model, and the prompt
// tokens llama.cpp used for a case, for engine-level tests.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "gguf/model_file.h"
#include "model/model.h"
#include "support/ref_data.h"
#include "text/tokenizer.h"

namespace moetier::testing {

struct LoadedModel {
  std::unique_ptr<gguf::ModelFile> file;
  std::unique_ptr<Model> model;
};

// Records a test failure (and returns an empty model) when the file does not load.
inline LoadedModel load_model_file(const std::string& path, int64_t n_ubatch = 512) {
  LoadedModel l;
  auto file = gguf::ModelFile::open(path, {.verbose = false});
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file) return l;
  l.file = std::move(file).value();
  auto model = load_model(*l.file, {.n_ubatch = n_ubatch});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (model) l.model = std::move(model).value();
  return l;
}

// A model with its tokenizer (the generation loop needs both); flash attention on, as the
// tools' default -fa auto.
struct LoadedWithTokenizer {
  std::unique_ptr<gguf::ModelFile> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<text::Tokenizer> tokenizer;
};

inline LoadedWithTokenizer load_with_tokenizer(const std::string& path, int64_t n_ubatch = 512) {
  LoadedWithTokenizer l;
  auto file = gguf::ModelFile::open(path, {.mode = gguf::LoadMode::kMmap, .verbose = false});
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file.is_ok()) return l;
  l.file = std::move(*file);
  auto model = load_model(*l.file, {.n_ubatch = n_ubatch, .flash_attention = true});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (!model.is_ok()) return l;
  l.model = std::move(*model);
  auto tok = text::Tokenizer::from_gguf(l.file->header());
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  if (tok.is_ok()) l.tokenizer = std::make_unique<text::Tokenizer>(std::move(*tok));
  return l;
}

inline LoadedModel load_ref_model(const std::string& name, int64_t n_ubatch = 512) {
  return load_model_file(std::string(kRefDir) + "/models/" + name + ".gguf", n_ubatch);
}

// The token ids of case MODEL/PROMPT_ID in manifest.json.
inline std::vector<int32_t> ref_prompt_tokens(const std::string& model, const std::string& prompt_id) {
  const auto manifest = read_json_file(std::string(kRefDir) + "/manifest.json");
  for (const auto& c : manifest["cases"]) {
    if (c["case_id"] == model + "/" + prompt_id) return c["prompt_tokens"].get<std::vector<int32_t>>();
  }
  ADD_FAILURE() << "no case " << model << "/" << prompt_id;
  return {};
}

// A gtest parameter name from a model name ("qwen35moe-tiny-f32" → "qwen35moe_tiny_f32").
inline std::string param_name(std::string s) {
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return s;
}

}  // namespace moetier::testing
