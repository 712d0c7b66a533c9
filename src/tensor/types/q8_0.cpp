// PLACEHOLDER: replaced by the real implementation.
#include "core/status.h"
#include "tensor/types/types.h"
namespace moetier::types {
void dequantize_row_q8_0(const void*, float*, int64_t) { CHECK_MSG(false, "PLACEHOLDER q8_0"); }
void quantize_row_q8_0(const float*, void*, int64_t) { CHECK_MSG(false, "PLACEHOLDER q8_0"); }
}  // namespace moetier::types
