// Reading the prompt of a command: -p TEXT, -f FILE (exact bytes), or --tokens 1,2,3.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace moetier {

Result<std::string> read_text_file(const std::string& path);
// "1,2,3" -> {1, 2, 3}; spaces allowed; empty items or non-integers are errors.
Result<std::vector<int32_t>> parse_token_list(const std::string& list);

}  // namespace moetier
