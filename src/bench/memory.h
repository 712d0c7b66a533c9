// Process memory the seeds' way: an idle baseline (VmRSS before the model is loaded), the
// peak while a test runs (VmHWM, reset between tests through /proc/self/clear_refs), and
// the footprint = peak - idle.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace moetier::bench {

// A "Name:   123 kB" line of /proc/self/status text, in bytes (nullopt when absent).
std::optional<int64_t> status_field_bytes(std::string_view status_text, std::string_view field);

std::optional<int64_t> current_rss_bytes();  // VmRSS of this process
std::optional<int64_t> peak_rss_bytes();     // VmHWM of this process

// Resets VmHWM to the current RSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0).
// false where that is not permitted: peaks are then cumulative over the process.
bool reset_peak_rss();

}  // namespace moetier::bench
