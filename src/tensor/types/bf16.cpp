// PLACEHOLDER: replaced by the real implementation.
#include "core/status.h"
#include "tensor/types/types.h"
namespace moetier::types {
void dequantize_row_bf16(const void*, float*, int64_t) { CHECK_MSG(false, "PLACEHOLDER bf16"); }
void quantize_row_bf16(const float*, void*, int64_t) { CHECK_MSG(false, "PLACEHOLDER bf16"); }
}  // namespace moetier::types
