// PLACEHOLDER: replaced by the real implementation.
#include "core/status.h"
#include "tensor/types/types.h"
namespace moetier::types {
void dequantize_row_iq4_xs(const void*, float*, int64_t) { CHECK_MSG(false, "PLACEHOLDER iq4_xs"); }
void quantize_row_iq4_xs(const float*, void*, int64_t) { CHECK_MSG(false, "PLACEHOLDER iq4_xs"); }
}  // namespace moetier::types
