#include "tensor/type_ops.h"

#include "tensor/types/types.h"

namespace moetier {

const TypeOps* type_ops(DType type) {
  static constexpr TypeOps kF32{types::dequantize_row_f32, types::quantize_row_f32};
  static constexpr TypeOps kF16{types::dequantize_row_f16, types::quantize_row_f16};
  static constexpr TypeOps kBF16{types::dequantize_row_bf16, types::quantize_row_bf16};
  static constexpr TypeOps kQ4_0{types::dequantize_row_q4_0, types::quantize_row_q4_0};
  static constexpr TypeOps kQ8_0{types::dequantize_row_q8_0, types::quantize_row_q8_0};
  static constexpr TypeOps kQ4_K{types::dequantize_row_q4_k, types::quantize_row_q4_k};
  static constexpr TypeOps kQ5_K{types::dequantize_row_q5_k, types::quantize_row_q5_k};
  static constexpr TypeOps kQ6_K{types::dequantize_row_q6_k, types::quantize_row_q6_k};
  static constexpr TypeOps kQ8_K{types::dequantize_row_q8_k, types::quantize_row_q8_k};
  static constexpr TypeOps kIQ4_XS{types::dequantize_row_iq4_xs, types::quantize_row_iq4_xs};
  switch (type) {
    case DType::F32: return &kF32;
    case DType::F16: return &kF16;
    case DType::BF16: return &kBF16;
    case DType::Q4_0: return &kQ4_0;
    case DType::Q8_0: return &kQ8_0;
    case DType::Q4_K: return &kQ4_K;
    case DType::Q5_K: return &kQ5_K;
    case DType::Q6_K: return &kQ6_K;
    case DType::Q8_K: return &kQ8_K;
    case DType::IQ4_XS: return &kIQ4_XS;
    default: return nullptr;
  }
}

}  // namespace moetier
