// Per-tensor type choice for `moetier synth --quant MIX`: which ggml type each tensor of
// a model gets, following llama-quantize's rules (Q4_K_M, IQ4_XS) or a fixed recipe
// (ud-q4_k_xl, like Unsloth's dynamic quants). Pure functions of the tensor list.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "tensor/dtype.h"

namespace moetier::synth {

enum class QuantMix { kF32, kF16, kQ8_0, kQ4_K_M, kUdQ4_K_XL, kIQ4_XS };

std::string_view quant_mix_name(QuantMix mix);  // "f32", "q4_k_m", "ud-q4_k_xl", ...
// Case-insensitive; kBadInput listing the known mixes otherwise.
Result<QuantMix> parse_quant_mix(std::string_view name);
// llama.cpp's general.file_type (enum llama_ftype) a file of this mix declares:
// f32 0, f16 1, q8_0 7, q4_k_m 15, ud-q4_k_xl 15 (it is a Q4_K_M variant), iq4_xs 30.
uint32_t quant_mix_file_type(QuantMix mix);
bool quant_mix_is_quantized(QuantMix mix);  // writes general.quantization_version when true
// One-line summary of the mix's rules for --help.
std::string_view quant_mix_summary(QuantMix mix);

// The type of every tensor in `specs` (same order). `hp` supplies the counts llama.cpp's
// rules depend on (n_layer, n_expert, n_head / n_head_kv).
//
// Rules shared by every mix: tensors llama-quantize never quantizes stay F32 (1-D tensors,
// names not ending in "weight" such as ssm_a and ssm_dt.bias, *_norm.weight, the router
// ffn_gate_inp.weight, ssm_conv1d.weight).
//
// Fallback when a row (ne[0]) is not a multiple of the chosen type's block size: like
// llama.cpp, take a block-32 type of at least as many bits, from the types moetier
// implements: Q4_K and IQ4_XS -> Q4_0 (llama.cpp: Q5_0 / IQ4_NL, which moetier lacks),
// Q5_K and Q6_K -> Q8_0; if the row is not a multiple of 32 either -> F16.
std::vector<DType> choose_tensor_types(QuantMix mix, const HParams& hp, const std::vector<TensorSpec>& specs);

// The fallback rule above for one row length (exposed for tests).
DType fallback_for_row(DType wanted, int64_t row_elems);

}  // namespace moetier::synth
