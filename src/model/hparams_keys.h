// Validated reading of `<arch>.*` metadata keys, shared by the architecture files.
// Every error is kBadInput and names the full key, e.g.
// "metadata key 'qwen35moe.expert_count' must be > 0 (got 0)".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "model/arch.h"

namespace moetier::arch_keys {

// Upper bound for any single model dimension (widths, head counts, expert counts).
// Real models are far below it (largest: vocab ~262k); it keeps products of three
// dimensions (a 3-D expert tensor's element count) well inside int64.
inline constexpr int64_t kMaxDim = int64_t{1} << 20;
// Upper bound for the trained context length (tokens).
inline constexpr int64_t kMaxContext = int64_t{1} << 32;

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& file, std::string_view arch) : file_(file), arch_(arch) {}

  std::string key(std::string_view suffix) const;  // "<arch>.<suffix>"
  bool has(std::string_view suffix) const;

  // Required integer in [1, max].
  Result<int64_t> positive(std::string_view suffix, int64_t max = kMaxDim) const;
  // Absent -> fallback; present -> must be in [1, max].
  Result<int64_t> positive_or(std::string_view suffix, int64_t fallback, int64_t max = kMaxDim) const;
  // Absent -> fallback; present -> must be in [0, max].
  Result<int64_t> non_negative_or(std::string_view suffix, int64_t fallback, int64_t max = kMaxDim) const;
  // Required finite float > 0.
  Result<float> positive_float(std::string_view suffix) const;
  // Absent -> fallback; present -> finite and > 0.
  Result<float> positive_float_or(std::string_view suffix, float fallback) const;
  // Required integer array of 1..max_n elements, each in [0, kMaxDim].
  Result<std::vector<int64_t>> int_array(std::string_view suffix, size_t max_n) const;

  // A kBadInput error about `<arch>.<suffix>`.
  Status error(std::string_view suffix, std::string_view what) const;

 private:
  const gguf::GgufFile& file_;
  std::string arch_;
};

// Vocabulary size: tokenizer.ggml.tokens' length, else token_embd.weight's ne[1].
Result<int64_t> read_vocab_size(const gguf::GgufFile& file);

// general.name (may be empty).
std::string read_general_name(const gguf::GgufFile& file);

// The keys every decoder architecture shares: embedding_length, context_length,
// attention.layer_norm_rms_epsilon and the vocabulary size.
Status read_trunk(const KeyReader& k, const gguf::GgufFile& file, HParams& hp);
// Softmax attention: head counts (head_count_kv must divide head_count) and head widths
// (key_length == value_length, defaulting to embedding_length / head_count).
Status read_attention_heads(const KeyReader& k, HParams& hp);

// Role of a tensor by the ggml naming scheme shared by llama.cpp architectures
// ("blk.N.attn_q.weight", "blk.N.ffn_up_exps.weight", ...). Architecture files refine it
// (qwen35moe's attn_qkv/attn_gate belong to DeltaNet layers).
TensorRole common_tensor_role(std::string_view tensor_name);

// The part of a name after "blk.N." (or the whole name for global tensors).
std::string_view strip_block_prefix(std::string_view tensor_name);

}  // namespace moetier::arch_keys
