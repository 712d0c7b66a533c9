// The dot-product kernel tables, generated from cpu/dot/kernel_list.h, and the dispatch over
// them. Compiled without ISA flags: the tables only hold function pointers.
#include "cpu/dot.h"

#include <array>

namespace moetier::cpu {

namespace {

struct Family {
  DType weight;
  DType activation;
};
namespace family {
#define MOETIER_DOT_FAMILY(name, weight_type, activation_type) \
  constexpr Family name{.weight = DType::weight_type, .activation = DType::activation_type};
MOETIER_DOT_FAMILIES(MOETIER_DOT_FAMILY)
#undef MOETIER_DOT_FAMILY
}  // namespace family

// A kernel's entry points by its forms (kernel_list.h): the forms it lacks are nullptr.
#define MOETIER_DOT_MULTI_fn(name) nullptr
#define MOETIER_DOT_MULTI_multi(name) dot::name##_multi
#define MOETIER_DOT_MULTI_tile(name) dot::name##_multi
#define MOETIER_DOT_MULTI_tile_x8(name) dot::name##_multi
#define MOETIER_DOT_TILE_fn(name) nullptr
#define MOETIER_DOT_TILE_multi(name) nullptr
#define MOETIER_DOT_TILE_tile(name) dot::name##_tile
#define MOETIER_DOT_TILE_tile_x8(name) dot::name##_tile
#define MOETIER_DOT_TILE_X8_fn(name) nullptr
#define MOETIER_DOT_TILE_X8_multi(name) nullptr
#define MOETIER_DOT_TILE_X8_tile(name) nullptr
#define MOETIER_DOT_TILE_X8_tile_x8(name) dot::name##_tile_x8
#define MOETIER_DOT_ENTRY(name, tier_suffix, forms)                                                   \
  DotKernel{.weight_type = family::name.weight,                                                      \
            .activation_type = family::name.activation,                                              \
            .fn = dot::name##_##tier_suffix,                                                         \
            .tier = isa_tier_named(#tier_suffix),                                                    \
            .multi = MOETIER_DOT_MULTI_##forms(name##_##tier_suffix),                                \
            .tile = MOETIER_DOT_TILE_##forms(name##_##tier_suffix),                                  \
            .tile_x8 = MOETIER_DOT_TILE_X8_##forms(name##_##tier_suffix)},

// Every kernel, in the list's order: each tier's kernels are consecutive.
constexpr DotKernel kKernels[] = {MOETIER_DOT_KERNELS(MOETIER_DOT_ENTRY)};
#undef MOETIER_DOT_ENTRY

// Each tier's kernels in kKernels, [first, first + count).
struct Slice {
  size_t first = 0, count = 0;
};
constexpr std::array<Slice, kIsaTierCount> kSlices = [] {
  std::array<Slice, kIsaTierCount> slices{};
  for (size_t i = 0; i < std::size(kKernels); ++i) {
    Slice& s = slices[static_cast<size_t>(kKernels[i].tier)];
    if (s.count == 0) s.first = i;
    ++s.count;
  }
  return slices;
}();
constexpr bool tiers_are_consecutive() {
  for (size_t t = 0; t < kSlices.size(); ++t) {
    for (size_t i = kSlices[t].first; i < kSlices[t].first + kSlices[t].count; ++i) {
      if (static_cast<size_t>(kKernels[i].tier) != t) return false;
    }
  }
  return true;
}
static_assert(tiers_are_consecutive(), "kernel_list.h: list each tier's kernels together");
// One kernel per family and tier.
constexpr bool unique() {
  for (size_t i = 0; i < std::size(kKernels); ++i) {
    for (size_t j = i + 1; j < std::size(kKernels); ++j) {
      if (kKernels[i].tier == kKernels[j].tier && kKernels[i].weight_type == kKernels[j].weight_type) return false;
    }
  }
  return true;
}
static_assert(unique(), "kernel_list.h: a family is listed twice for one tier");

}  // namespace

std::span<const DotKernel> dot_kernels(IsaTier tier) {
  const Slice s = kSlices[static_cast<size_t>(tier)];
  return std::span<const DotKernel>(kKernels).subspan(s.first, s.count);
}

const DotKernel* dot_kernel(DType weight_type, IsaTier tier) {
  return find_for_tier(tier, [&](IsaTier t) -> const DotKernel* {
    for (const DotKernel& k : dot_kernels(t)) {
      if (k.weight_type == weight_type) return &k;
    }
    return nullptr;
  });
}

const DotKernel* best_dot_kernel(DType weight_type, const CpuFeatures& cpu) {
  return dot_kernel(weight_type, isa_tier(cpu));
}

const DotKernel* scalar_dot_kernel(DType weight_type) { return dot_kernel(weight_type, IsaTier::kScalar); }

std::optional<DType> activation_type_for(DType weight_type) {
  const DotKernel* k = scalar_dot_kernel(weight_type);
  if (!k) return std::nullopt;
  return k->activation_type;
}

}  // namespace moetier::cpu
