// Type choice per tensor. The Q4_K_M and IQ4_XS rules restate what llama-quantize does
// (src/llama-quant.cpp, llama_tensor_get_type), reduced to the tensor kinds of the MoE
// architectures moetier knows; the ud-q4_k_xl recipe is the override list used to build
// ../shared/ref/models/qwen35moe-small-ud_mix.gguf (see manifest.json quantize_command).
#include "synth/quant_mix.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <tuple>

#include <fmt/format.h>

namespace moetier::synth {
namespace {

struct MixEntry {
  QuantMix mix;
  std::string_view name;
  uint32_t file_type;
  bool quantized;
  std::string_view summary;
};

constexpr MixEntry kMixes[] = {
    {QuantMix::kF32, "f32", 0, false, "all F32"},
    {QuantMix::kF16, "f16", 1, false, "matrices F16; 1-D tensors, norms, router, conv F32"},
    {QuantMix::kQ8_0, "q8_0", 7, true, "matrices Q8_0; 1-D tensors, norms, router, conv F32"},
    {QuantMix::kQ4_K_M, "q4_k_m", 15, true,
     "llama-quantize Q4_K_M: Q4_K; output Q6_K; attn_v/attn_qkv and ffn_down(_exps/_shexp) Q6_K on "
     "llama.cpp's use_more_bits layers"},
    {QuantMix::kUdQ4_K_XL, "ud-q4_k_xl", 15, true,
     "like Unsloth UD-Q4_K_XL: routed gate/up Q4_K, routed down Q5_K (Q6_K in the first and last "
     "n_layer/16 layers), attention/DeltaNet projections and shared expert Q8_0, output and token_embd "
     "Q6_K, ssm_alpha/ssm_beta F32"},
    {QuantMix::kIQ4_XS, "iq4_xs", 30, true,
     "llama-quantize IQ4_XS (no imatrix): IQ4_XS; output Q6_K; ffn_down of the first n_layer/8 layers "
     "Q5_K"},
};

const MixEntry& entry(QuantMix mix) {
  for (const auto& e : kMixes) {
    if (e.mix == mix) return e;
  }
  CHECK_MSG(false, "unknown QuantMix {}", static_cast<int>(mix));
  return kMixes[0];
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// llama.cpp's tensor categories, matched by name the same way (first match wins).
enum class Category { kTokenEmbd, kOutput, kAttnQkv, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnUp, kFfnGate,
                      kFfnDown, kOther };

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (contains(name, "attn_v.weight")) return Category::kAttnV;
  if (contains(name, "attn_k.weight")) return Category::kAttnK;
  if (contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (contains(name, "ffn_up")) return Category::kFfnUp;
  if (contains(name, "ffn_gate")) return Category::kFfnGate;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}
// attn_v and attn_qkv share llama.cpp's "more sensitive, like V" rules and counter.
bool is_attn_v_like(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv; }

// ggml_n_dims: 1 + the index of the last dimension larger than 1.
int n_dims(const std::vector<int64_t>& ne) {
  int n = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] > 1) n = static_cast<int>(i) + 1;
  }
  return n;
}

// llama-quantize leaves these in their source type (F32 here).
bool may_quantize(const TensorSpec& t) {
  if (n_dims(t.ne) < 2) return false;
  const std::string_view name = t.name;
  if (!ends_with(name, "weight")) return false;  // ssm_a, ssm_dt.bias
  if (contains(name, "_norm.weight")) return false;
  if (contains(name, "ffn_gate_inp.weight")) return false;  // router
  if (contains(name, "ssm_conv1d")) return false;
  return true;
}

// llama.cpp's choice of the layers that get more bits: the first and last eighth, and
// every third layer in between.
bool use_more_bits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// Position of each attn_v-like tensor among all of them in llama.cpp's iteration order
// (by layer, then by name), which its use_more_bits(i_attention_wv, n_attention_wv) uses.
std::vector<int64_t> attn_v_ordinals(const std::vector<TensorSpec>& specs, int64_t* n_total) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (is_attn_v_like(category_of(specs[i].name))) idx.push_back(i);
  }
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return std::tie(specs[a].layer, specs[a].name) < std::tie(specs[b].layer, specs[b].name);
  });
  std::vector<int64_t> ordinal(specs.size(), -1);
  for (size_t k = 0; k < idx.size(); ++k) ordinal[idx[k]] = static_cast<int64_t>(k);
  *n_total = static_cast<int64_t>(idx.size());
  return ordinal;
}

struct RuleContext {
  const HParams& hp;
  int64_t i_attn_v = -1;  // ordinal among attn_v-like tensors
  int64_t n_attn_v = 0;
};

int64_t n_gqa(const HParams& hp) { return hp.n_head_kv > 0 ? hp.n_head / hp.n_head_kv : 0; }

// llama.cpp's Q4_K_M / IQ4_XS adjustments of the bulk type for one tensor.
DType k_mix_type(QuantMix mix, DType bulk, const TensorSpec& t, const RuleContext& ctx) {
  const Category cat = category_of(t.name);
  const int64_t n_layer = ctx.hp.n_layer;
  const bool eight_experts = ctx.hp.n_expert == 8;
  switch (cat) {
    case Category::kOutput:
      if (t.ne[0] % dtype_traits(bulk).block_elems != 0) return DType::Q8_0;
      return DType::Q6_K;
    case Category::kTokenEmbd:
      return bulk;
    case Category::kAttnQkv:
    case Category::kAttnV: {
      DType type = bulk;
      if (mix == QuantMix::kIQ4_XS && n_gqa(ctx.hp) >= 4) type = DType::Q5_K;
      if (mix == QuantMix::kQ4_K_M && use_more_bits(ctx.i_attn_v, ctx.n_attn_v)) type = DType::Q6_K;
      // llama.cpp: "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
      if (eight_experts) type = DType::Q8_0;
      return type;
    }
    case Category::kAttnK:
      return eight_experts ? DType::Q8_0 : bulk;
    case Category::kFfnDown:
      if (mix == QuantMix::kQ4_K_M && use_more_bits(t.layer, n_layer)) return DType::Q6_K;
      if (mix == QuantMix::kIQ4_XS && t.layer < n_layer / 8) return DType::Q5_K;
      return bulk;
    case Category::kAttnOutput:
      return eight_experts ? DType::Q5_K : bulk;
    default:
      return bulk;
  }
}

// The ud-q4_k_xl recipe: explicit types by tensor kind, in the spirit of Unsloth's
// dynamic quants (keep the small, sensitive matrices at 8 bits, squeeze the experts).
DType ud_type(const TensorSpec& t, const RuleContext& ctx) {
  const std::string_view name = t.name;
  if (name == "token_embd.weight" || name == "output.weight") return DType::Q6_K;
  if (contains(name, "ffn_gate_exps") || contains(name, "ffn_up_exps")) return DType::Q4_K;
  if (contains(name, "ffn_down_exps")) {
    const int64_t edge = ctx.hp.n_layer / 16;  // 0 below 16 layers (the ref small model: all Q5_K)
    return (t.layer < edge || t.layer >= ctx.hp.n_layer - edge) ? DType::Q6_K : DType::Q5_K;
  }
  if (contains(name, "ssm_alpha") || contains(name, "ssm_beta")) return DType::F32;
  if (contains(name, "attn_") || contains(name, "ssm_out") || contains(name, "_shexp")) return DType::Q8_0;
  return k_mix_type(QuantMix::kQ4_K_M, DType::Q4_K, t, ctx);
}

}  // namespace

std::string_view quant_mix_name(QuantMix mix) { return entry(mix).name; }
uint32_t quant_mix_file_type(QuantMix mix) { return entry(mix).file_type; }
bool quant_mix_is_quantized(QuantMix mix) { return entry(mix).quantized; }
std::string_view quant_mix_summary(QuantMix mix) { return entry(mix).summary; }

Result<QuantMix> parse_quant_mix(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string known;
  for (const auto& e : kMixes) {
    if (e.name == lower) return e.mix;
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  return Status::bad_input(fmt::format("unknown quant mix '{}' (known: {})", name, known));
}

DType fallback_for_row(DType wanted, int64_t row_elems) {
  if (row_elems % dtype_traits(wanted).block_elems == 0) return wanted;
  DType alt = DType::F16;
  switch (wanted) {
    case DType::Q4_K:
    case DType::IQ4_XS: alt = DType::Q4_0; break;
    case DType::Q5_K:
    case DType::Q6_K: alt = DType::Q8_0; break;
    default: alt = DType::F16; break;
  }
  if (row_elems % dtype_traits(alt).block_elems != 0) alt = DType::F16;
  return alt;
}

std::vector<DType> choose_tensor_types(QuantMix mix, const HParams& hp, const std::vector<TensorSpec>& specs) {
  int64_t n_attn_v = 0;
  const std::vector<int64_t> attn_v_ordinal = attn_v_ordinals(specs, &n_attn_v);
  std::vector<DType> types(specs.size(), DType::F32);
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec& t = specs[i];
    if (mix == QuantMix::kF32 || !may_quantize(t)) continue;  // stays F32
    const RuleContext ctx{.hp = hp, .i_attn_v = attn_v_ordinal[i], .n_attn_v = n_attn_v};
    DType type = DType::F32;
    switch (mix) {
      case QuantMix::kF32: type = DType::F32; break;
      case QuantMix::kF16: type = DType::F16; break;
      case QuantMix::kQ8_0: type = DType::Q8_0; break;
      case QuantMix::kQ4_K_M: type = k_mix_type(mix, DType::Q4_K, t, ctx); break;
      case QuantMix::kIQ4_XS: type = k_mix_type(mix, DType::IQ4_XS, t, ctx); break;
      case QuantMix::kUdQ4_K_XL: type = ud_type(t, ctx); break;
    }
    types[i] = fallback_for_row(type, t.ne[0]);
  }
  return types;
}

}  // namespace moetier::synth
