#include "model/hparams_keys.h"

#include <cmath>

namespace moetier::arch_keys {

std::string KeyReader::key(std::string_view suffix) const {
  std::string k = arch_;
  k += '.';
  k += suffix;
  return k;
}

bool KeyReader::has(std::string_view suffix) const { return file_.find(key(suffix)) != nullptr; }

Status KeyReader::error(std::string_view suffix, std::string_view what) const {
  return Status::bad_input(fmt::format("metadata key '{}' {}", key(suffix), what));
}

Result<int64_t> KeyReader::positive(std::string_view suffix, int64_t max) const {
  ASSIGN_OR_RETURN(const int64_t v, file_.get_int(key(suffix)));
  if (v < 1 || v > max) return error(suffix, fmt::format("must be in [1, {}] (got {})", max, v));
  return v;
}

Result<int64_t> KeyReader::positive_or(std::string_view suffix, int64_t fallback, int64_t max) const {
  if (!has(suffix)) return fallback;
  return positive(suffix, max);
}

Result<int64_t> KeyReader::non_negative_or(std::string_view suffix, int64_t fallback, int64_t max) const {
  if (!has(suffix)) return fallback;
  ASSIGN_OR_RETURN(const int64_t v, file_.get_int(key(suffix)));
  if (v < 0 || v > max) return error(suffix, fmt::format("must be in [0, {}] (got {})", max, v));
  return v;
}

Result<float> KeyReader::positive_float(std::string_view suffix) const {
  ASSIGN_OR_RETURN(const double v, file_.get_float(key(suffix)));
  if (!std::isfinite(v) || v <= 0.0 || v > 3.0e38) {
    return error(suffix, fmt::format("must be a finite number > 0 (got {})", v));
  }
  return static_cast<float>(v);
}

Result<float> KeyReader::positive_float_or(std::string_view suffix, float fallback) const {
  if (!has(suffix)) return fallback;
  return positive_float(suffix);
}

Result<std::vector<int64_t>> KeyReader::int_array(std::string_view suffix, size_t max_n) const {
  const gguf::Value* v = file_.find(key(suffix));
  if (v == nullptr) return Status::bad_input(fmt::format("missing metadata key '{}'", key(suffix)));
  auto values = v->as_int_array();
  if (!values) return error(suffix, fmt::format("is a {}, expected an integer array", gguf::value_type_name(v->type)));
  if (values->empty() || values->size() > max_n) {
    return error(suffix, fmt::format("must have 1 to {} elements (got {})", max_n, values->size()));
  }
  for (int64_t x : *values) {
    if (x < 0 || x > kMaxDim) return error(suffix, fmt::format("has an element out of range [0, {}]: {}", kMaxDim, x));
  }
  return std::move(*values);
}

Result<int64_t> read_vocab_size(const gguf::GgufFile& file) {
  if (const gguf::Value* tokens = file.find("tokenizer.ggml.tokens"); tokens != nullptr && tokens->is_array()) {
    const uint64_t n = tokens->array_size();
    if (n < 1 || n > static_cast<uint64_t>(kMaxDim)) {
      return Status::bad_input(fmt::format("metadata key 'tokenizer.ggml.tokens' has {} entries, expected 1..{}", n, kMaxDim));
    }
    return static_cast<int64_t>(n);
  }
  if (const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight"); embd != nullptr) {
    if (embd->n_dims != 2 || embd->ne[1] < 1 || embd->ne[1] > kMaxDim) {
      return Status::bad_input("tensor 'token_embd.weight' does not have a valid vocabulary dimension");
    }
    return embd->ne[1];
  }
  return Status::bad_input("cannot determine the vocabulary size: no 'tokenizer.ggml.tokens' and no 'token_embd.weight'");
}

std::string read_general_name(const gguf::GgufFile& file) { return file.get_string_or("general.name", ""); }

std::string_view strip_block_prefix(std::string_view name) {
  if (tensor_layer_index(name) < 0) return name;
  const size_t dot = name.find('.', 4);  // the dot after "blk.N"
  return name.substr(dot + 1);
}

namespace {
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
}  // namespace

TensorRole common_tensor_role(std::string_view tensor_name) {
  if (tensor_name == "token_embd.weight") return TensorRole::kTokenEmbedding;
  if (tensor_name == "output.weight") return TensorRole::kOutput;
  const std::string_view n = strip_block_prefix(tensor_name);
  // Routed experts first: "ffn_gate_exps" also starts with "ffn_gate".
  if (starts_with(n, "ffn_gate_exps.")) return TensorRole::kExpertGate;
  if (starts_with(n, "ffn_up_exps.")) return TensorRole::kExpertUp;
  if (starts_with(n, "ffn_down_exps.")) return TensorRole::kExpertDown;
  if (starts_with(n, "ffn_gate_up_exps.")) return TensorRole::kExpertUp;  // fused gate+up layout
  if (starts_with(n, "ffn_gate_inp")) return TensorRole::kRouter;        // router and shared-expert gate
  if (starts_with(n, "exp_probs_b.")) return TensorRole::kRouter;
  if (ends_with(n, "norm.weight") || ends_with(n, "norm.bias")) return TensorRole::kNorm;
  if (starts_with(n, "ffn_gate_shexp.") || starts_with(n, "ffn_up_shexp.") || starts_with(n, "ffn_down_shexp.")) {
    return TensorRole::kSharedExpert;
  }
  if (starts_with(n, "ffn_gate.") || starts_with(n, "ffn_up.") || starts_with(n, "ffn_down.")) {
    return TensorRole::kDenseFfn;
  }
  if (starts_with(n, "attn_")) return TensorRole::kAttention;
  if (starts_with(n, "ssm_")) return TensorRole::kDeltaNet;
  return TensorRole::kOther;
}

Status read_trunk(const KeyReader& k, const gguf::GgufFile& file, HParams& hp) {
  ASSIGN_OR_RETURN(hp.n_embd, k.positive("embedding_length"));
  ASSIGN_OR_RETURN(hp.n_ctx_train, k.positive("context_length", kMaxContext));
  ASSIGN_OR_RETURN(hp.rms_eps, k.positive_float("attention.layer_norm_rms_epsilon"));
  ASSIGN_OR_RETURN(hp.n_vocab, read_vocab_size(file));
  return Status::ok();
}

Status read_attention_heads(const KeyReader& k, HParams& hp) {
  ASSIGN_OR_RETURN(hp.n_head, k.positive("attention.head_count"));
  ASSIGN_OR_RETURN(hp.n_head_kv, k.positive("attention.head_count_kv"));
  if (hp.n_head % hp.n_head_kv != 0) {
    return k.error("attention.head_count_kv", fmt::format("({}) must divide {} ({})", hp.n_head_kv,
                                                          k.key("attention.head_count"), hp.n_head));
  }
  ASSIGN_OR_RETURN(hp.head_dim_k, k.positive_or("attention.key_length", hp.n_embd / hp.n_head));
  ASSIGN_OR_RETURN(hp.head_dim_v, k.positive_or("attention.value_length", hp.head_dim_k));
  if (hp.head_dim_k < 1) return k.error("attention.key_length", "is missing and embedding_length / head_count is 0");
  if (hp.head_dim_v != hp.head_dim_k) {
    // attn_output and the KV rows are sized by one head width; llama.cpp assumes equal too.
    return k.error("attention.value_length", fmt::format("({}) must equal {} ({})", hp.head_dim_v,
                                                         k.key("attention.key_length"), hp.head_dim_k));
  }
  return Status::ok();
}

}  // namespace moetier::arch_keys
