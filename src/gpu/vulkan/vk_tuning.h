// The fast kernels' default knobs per GPU vendor, as data: one row per vendor (and one for
// Mesa's lavapipe, whose loop limit and LLVM compiles want smaller tiles), chosen from
// DeviceInfo (the emulated vendor under MOETIER_VK_SUBGROUP). Tests and callers override a
// knob through the kernels' tuning structs (vk_ops.h); a zero there takes the row's value.
// `moetier run --list-devices -v` prints the table with the row each device takes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace moetier::vk {

struct DeviceInfo;

inline constexpr uint32_t kVendorNvidia = 0x10DE, kVendorAmd = 0x1002, kVendorIntel = 0x8086;

struct VendorDefaults {
  const char* vendor = "";     // "NVIDIA", "AMD", "Intel", "lavapipe", "other"
  uint32_t vendor_id = 0;      // PCI vendor; 0 for the lavapipe and fallback rows
  // Flash attention (FlashAttentionTuning, vk_ops_attention.cpp).
  uint32_t flash_tile_keys = 16;           // keys per shared-memory tile (halved until it fits)
  uint32_t flash_workgroup_size = 256;     // invocations a prompt's workgroup aims for
  uint32_t flash_target_workgroups = 256;  // split-K until a dispatch has about this many workgroups
  uint32_t flash_min_chunk_keys = 128;     // ... in chunks of at least this many keys
  // Mat-vec (vk_ops_matvec.cpp): the largest workgroup.
  uint32_t matvec_max_workgroup = 128;
  // Fast delta rule (vk_ops_delta.cpp): state columns per workgroup, at most.
  uint32_t delta_columns = 32;
};

// Every row, the fallback ("other") last.
std::span<const VendorDefaults> vendor_defaults_table();
// The row for this device: its vendor's (the emulated one under subgroup emulation), else
// lavapipe's on a loop-limited driver, else the fallback.
const VendorDefaults& vendor_defaults(const DeviceInfo& info);
// The table as aligned text lines, the device's row marked with '*'.
std::string describe_vendor_defaults(const DeviceInfo& info);

}  // namespace moetier::vk
