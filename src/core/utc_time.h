// The current time for records and reports (bench, tune, eval).
#pragma once

#include <string>

namespace moetier {

// UTC, ISO 8601 / RFC 3339 to the second: "2026-12-02T05:31:18Z".
std::string utc_now_iso8601();

}  // namespace moetier
