#include "gpu/vulkan/vk_tuning.h"

#include <array>

#include <fmt/format.h>

#include "gpu/vulkan/vk_context.h"

namespace moetier::vk {

namespace {

// The hardware rows share one set of values so far: they are the defaults the kernels were
// tuned with (the numbers' reasons are at their use), none measured per vendor yet; a
// measurement on a vendor's GPU (scripts/gpu_bench.sh) changes that vendor's row only.
// lavapipe: tiles of 4 keys (LLVM unrolls the tile loops of every pipeline: 16 keys at head
// dim 256 cost ~3 s per compile) and workgroups of 128 (its invocations are SIMD lanes of
// a few CPU cores).
constexpr std::array<VendorDefaults, 5> kRows{{
    {.vendor = "NVIDIA", .vendor_id = kVendorNvidia},
    {.vendor = "AMD", .vendor_id = kVendorAmd},
    {.vendor = "Intel", .vendor_id = kVendorIntel},
    {.vendor = "lavapipe", .vendor_id = 0, .flash_tile_keys = 4, .flash_workgroup_size = 128},
    {.vendor = "other", .vendor_id = 0},
}};
constexpr size_t kLavapipeRow = 3, kFallbackRow = 4;

}  // namespace

std::span<const VendorDefaults> vendor_defaults_table() { return kRows; }

const VendorDefaults& vendor_defaults(const DeviceInfo& info) {
  for (const auto& row : kRows) {
    if (row.vendor_id != 0 && row.vendor_id == info.vendor_id) return row;
  }
  return info.loop_limited ? kRows[kLavapipeRow] : kRows[kFallbackRow];
}

std::string describe_vendor_defaults(const DeviceInfo& info) {
  const VendorDefaults& mine = vendor_defaults(info);
  std::string out = fmt::format("    {:<10} {:>10} {:>9} {:>13} {:>16} {:>14} {:>14}\n", "defaults", "flash tile",
                                "flash wg", "flash groups", "flash min chunk", "matvec max wg", "delta columns");
  for (const auto& row : kRows) {
    out += fmt::format("  {} {:<10} {:>10} {:>9} {:>13} {:>16} {:>14} {:>14}\n", &row == &mine ? '*' : ' ', row.vendor,
                       row.flash_tile_keys, row.flash_workgroup_size, row.flash_target_workgroups,
                       row.flash_min_chunk_keys, row.matvec_max_workgroup, row.delta_columns);
  }
  return out;
}

}  // namespace moetier::vk
