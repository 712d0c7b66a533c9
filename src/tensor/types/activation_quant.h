// Activation quantizers that must round exactly like llama.cpp's CPU backend, so that an
// engine comparing logits with llama.cpp sees the same int8 codes.
//  * Q8_K activations: use quantize_row_q8_k (types.h); ggml's CPU backend on every ISA calls
//    the same reference routine, so there is only one rounding.
//  * Q8_0 activations: ggml's x86 backend rounds differently from its reference quantizer
//    (see q8_0.cpp); this is its twin.
#pragma once

#include <cstdint>

#include "tensor/blocks.h"

namespace moetier::types {

// n: elements, a multiple of 32. Blocks: d = fp16(a / 127), q = round_half_even(x * (127 / a)),
// a = max|x| over the block (d = 0 and q = 0 for an all-zero block).
void quantize_row_q8_0_activations(const float* src, BlockQ8_0* dst, int64_t n);

}  // namespace moetier::types
