// PLACEHOLDER: replaced by the real implementation.
#include "core/status.h"
#include "tensor/types/types.h"
namespace moetier::types {
void dequantize_row_f16(const void*, float*, int64_t) { CHECK_MSG(false, "PLACEHOLDER f16"); }
void quantize_row_f16(const float*, void*, int64_t) { CHECK_MSG(false, "PLACEHOLDER f16"); }
}  // namespace moetier::types
