// PLACEHOLDER: replaced by the real implementation.
#include "core/status.h"
#include "tensor/types/types.h"
namespace moetier::types {
void dequantize_row_q5_k(const void*, float*, int64_t) { CHECK_MSG(false, "PLACEHOLDER q5_k"); }
void quantize_row_q5_k(const float*, void*, int64_t) { CHECK_MSG(false, "PLACEHOLDER q5_k"); }
}  // namespace moetier::types
