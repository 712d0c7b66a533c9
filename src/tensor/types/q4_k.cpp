// PLACEHOLDER: replaced by the real implementation.
#include "core/status.h"
#include "tensor/types/types.h"
namespace moetier::types {
void dequantize_row_q4_k(const void*, float*, int64_t) { CHECK_MSG(false, "PLACEHOLDER q4_k"); }
void quantize_row_q4_k(const float*, void*, int64_t) { CHECK_MSG(false, "PLACEHOLDER q4_k"); }
}  // namespace moetier::types
