// Human-readable quantities for logs and reports.
#pragma once

#include <cstdint>
#include <string>

namespace moetier {

// "1.50 GiB", "312.0 MiB", "12.3 KiB", "17 B" (binary units).
std::string format_bytes(uint64_t bytes);

}  // namespace moetier
