// The fast Gated-DeltaNet recurrence (shaders/delta_rule_fast.comp, then the gated RMSNorm
// of shaders/delta_rule_fast_norm.comp): choosing its specialization for a shape and a
// device, checking the buffers, and cutting the rows into dispatches within the loop budget.
#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "gpu/vulkan/vk_ops.h"
#include "gpu/vulkan/vk_tuning.h"

namespace moetier::vk {

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

Groups spread(const Device& dev, uint64_t n_groups) {
  const uint32_t max_x = dev.info().max_workgroup_count[0];
  n_groups = std::max<uint64_t>(n_groups, 1);
  if (n_groups <= max_x) return {.x = static_cast<uint32_t>(n_groups)};
  return {.x = max_x, .y = static_cast<uint32_t>((n_groups + max_x - 1) / max_x)};
}

constexpr int64_t kMaxStateDim = 256;
constexpr int64_t kMaxLanesPerColumn = 8;  // the smallest subgroup fast_kernels_supported() allows
constexpr int64_t kMaxStage = 16;
// Registers an invocation spends on the next stage's inputs when the stage size is chosen:
// with the state's ~32 floats, the kernel stays well within 128 registers.
constexpr int64_t kPrefetchRegisterCap = 32;

// Floats of one stage buffer (delta_rule_fast.comp): [t][q | k], v [t][cols], β [t], decay [t].
int64_t stage_floats(int64_t dk, int64_t cols, int64_t stage) { return stage * (2 * dk + cols + 2); }

// The default lanes per column: the state of a column split so that each invocation holds
// about 32 floats (d_k 128: 4 lanes, 32 registers), a power of two dividing d_k.
int64_t default_lanes(int64_t dk) {
  int64_t lanes = 1;
  while (lanes < kMaxLanesPerColumn && dk % (2 * lanes) == 0 && dk / (2 * lanes) >= 32) lanes *= 2;
  return lanes;
}

// The default columns per workgroup: the largest divisor of d_v up to the vendor's cap
// (vk_tuning.h: 32). Splitting a head's 128 columns into 4 workgroups of 128 invocations (at
// d_k 128) gives the 32 heads of Qwen3.6-35B-A3B 128 workgroups, about one per compute unit
// of a large GPU, instead of 32.
int64_t default_columns(int64_t dv, int64_t max_columns) {
  for (int64_t cols = std::min(dv, max_columns); cols > 1; --cols) {
    if (dv % cols == 0) return cols;
  }
  return 1;
}

// Loop iterations one invocation runs for `rows` rows, counting every loop of the kernel as
// if none were unrolled: the state load and store (ROWS each), stage 0's load and store
// (PREFETCH each), per stage one iteration of the stage loop plus the prefetch and store
// loops, per token one iteration of the token loop, two passes over ROWS and two butterflies.
int64_t loop_iterations(const DeltaRuleFastPlan& plan, int64_t rows) {
  const int64_t butterfly = std::countr_zero(static_cast<uint64_t>(plan.lanes_per_column));
  const int64_t stages = (rows + plan.tokens_per_stage - 1) / plan.tokens_per_stage;
  const int64_t per_stage = 1 + 2 * plan.prefetch_registers;
  const int64_t per_token = 1 + 2 * plan.state_registers + 2 * butterfly;
  return 2 * plan.state_registers + 2 * plan.prefetch_registers + stages * per_stage + rows * per_token;
}

Status check_floats(const BufferRef& b, int64_t floats, const char* what) {
  if (!b.valid()) return Status::bad_input(fmt::format("fast delta rule: no {} buffer", what));
  if (b.size < static_cast<uint64_t>(floats) * sizeof(float)) {
    return Status::bad_input(fmt::format("fast delta rule: the {} buffer holds {} bytes, {} needed", what, b.size,
                                         floats * static_cast<int64_t>(sizeof(float))));
  }
  return Status::ok();
}

}  // namespace

Result<DeltaRuleFastPlan> plan_delta_rule_fast(const DeviceInfo& info, const DeltaRuleDispatch& d,
                                               const DeltaRuleFastTuning& tuning) {
  if (!info.fast_kernels_supported()) {
    return Status::bad_input(fmt::format("fast delta rule: {} lacks what the fast kernels need", info.name));
  }
  if (d.dk < 1 || d.dk > kMaxStateDim || d.dv < 1 || d.dv > kMaxStateDim) {
    return Status::bad_input(fmt::format("fast delta rule: state {}×{}, each dimension must be 1..{}", d.dk, d.dv,
                                         kMaxStateDim));
  }
  if (d.n_k_heads < 1 || d.n_v_heads < 1 || d.n_rows < 0 || d.row_begin < 0) {
    return Status::bad_input(fmt::format("fast delta rule: {} K heads, {} V heads, rows {} from {}", d.n_k_heads,
                                         d.n_v_heads, d.n_rows, d.row_begin));
  }
  if (d.key_dim != d.n_k_heads * d.dk || d.value_dim != d.n_v_heads * d.dv || d.channels < 2 * d.key_dim + d.value_dim) {
    return Status::bad_input(fmt::format(
        "fast delta rule: key_dim {} (want {}), value_dim {} (want {}), channels {} (want ≥ {})", d.key_dim,
        d.n_k_heads * d.dk, d.value_dim, d.n_v_heads * d.dv, d.channels, 2 * d.key_dim + d.value_dim));
  }
  DeltaRuleFastPlan plan;
  plan.lanes_per_column = tuning.lanes_per_column > 0 ? tuning.lanes_per_column : default_lanes(d.dk);
  const int64_t lanes = plan.lanes_per_column;
  const int64_t smallest_subgroup = info.min_subgroup_size > 0 ? info.min_subgroup_size : info.subgroup_size;
  if (!std::has_single_bit(static_cast<uint64_t>(lanes)) || lanes > kMaxLanesPerColumn || lanes > smallest_subgroup ||
      d.dk % lanes != 0) {
    return Status::bad_input(fmt::format(
        "fast delta rule: {} lanes per column; a power of two up to {} (and the subgroup size {}) dividing d_k {}",
        lanes, kMaxLanesPerColumn, smallest_subgroup, d.dk));
  }
  plan.columns_per_group = tuning.columns_per_group > 0 ? tuning.columns_per_group
                                                           : default_columns(d.dv, vendor_defaults(info).delta_columns);
  if (d.dv % plan.columns_per_group != 0) {
    return Status::bad_input(
        fmt::format("fast delta rule: {} columns per workgroup do not divide d_v {}", plan.columns_per_group, d.dv));
  }
  plan.workgroup_size = plan.columns_per_group * lanes;
  if (plan.workgroup_size > info.max_workgroup_invocations || d.dv > info.max_workgroup_invocations) {
    return Status::bad_input(fmt::format("fast delta rule: workgroups of {} (and {}) invocations, the device allows {}",
                                         plan.workgroup_size, d.dv, info.max_workgroup_invocations));
  }
  plan.state_registers = d.dk / lanes;
  const int64_t max_shared = info.subgroup_kernel_shared_bytes();
  auto shared_bytes = [&](int64_t stage) {
    return 2 * stage_floats(d.dk, plan.columns_per_group, stage) * static_cast<int64_t>(sizeof(float));
  };
  auto prefetch = [&](int64_t stage) {
    return (stage_floats(d.dk, plan.columns_per_group, stage) + plan.workgroup_size - 1) / plan.workgroup_size;
  };
  if (tuning.tokens_per_stage > 0) {
    plan.tokens_per_stage = tuning.tokens_per_stage;
  } else {
    plan.tokens_per_stage = kMaxStage;
    while (plan.tokens_per_stage > 1 && (shared_bytes(plan.tokens_per_stage) > max_shared ||
                                         prefetch(plan.tokens_per_stage) > kPrefetchRegisterCap)) {
      plan.tokens_per_stage /= 2;
    }
  }
  plan.shared_bytes = shared_bytes(plan.tokens_per_stage);
  if (plan.shared_bytes > max_shared) {
    return Status::bad_input(fmt::format("fast delta rule: stages of {} tokens need {} bytes of shared memory, the "
                                         "device has {}",
                                         plan.tokens_per_stage, plan.shared_bytes, max_shared));
  }
  plan.prefetch_registers = prefetch(plan.tokens_per_stage);
  plan.workgroups = d.n_v_heads * (d.dv / plan.columns_per_group);

  // The most rows whose loop iterations stay within the budget, in whole stages when more
  // than one stage fits.
  const int64_t per_row = loop_iterations(plan, 1) - loop_iterations(plan, 0);
  int64_t rows = std::max<int64_t>(1, (kLoopBudget - loop_iterations(plan, 0)) / per_row);
  while (rows > 1 && loop_iterations(plan, rows) > kLoopBudget) --rows;
  if (loop_iterations(plan, rows) > kLoopBudget) {
    return Status::bad_input(fmt::format("fast delta rule: one row takes {} loop iterations, over the budget of {}",
                                         loop_iterations(plan, 1), kLoopBudget));
  }
  if (rows > plan.tokens_per_stage) rows -= rows % plan.tokens_per_stage;
  if (tuning.max_rows_per_dispatch > 0) rows = std::min(rows, tuning.max_rows_per_dispatch);
  plan.rows_per_dispatch = rows;
  return plan;
}

Status delta_rule_fast(Device& dev, const DeltaRuleDispatch& d, const BufferRef& conv_out, const BufferRef& beta,
                       const BufferRef& alpha, const BufferRef& params, const BufferRef& state, const BufferRef& z,
                       const BufferRef& y, const DeltaRuleFastTuning& tuning) {
  ASSIGN_OR_RETURN(const DeltaRuleFastPlan plan, plan_delta_rule_fast(dev.info(), d, tuning));
  if (d.n_rows == 0) return Status::ok();
  const int64_t row_end = d.row_begin + d.n_rows;
  RETURN_IF_ERROR(check_floats(conv_out, row_end * d.channels, "conv_out"));
  RETURN_IF_ERROR(check_floats(beta, row_end * d.n_v_heads, "beta"));
  RETURN_IF_ERROR(check_floats(alpha, row_end * d.n_v_heads, "alpha"));
  RETURN_IF_ERROR(check_floats(params, 2 * d.n_v_heads + d.dv, "params"));
  RETURN_IF_ERROR(check_floats(state, d.n_v_heads * d.dk * d.dv, "state"));
  RETURN_IF_ERROR(check_floats(z, row_end * d.value_dim, "z"));
  RETURN_IF_ERROR(check_floats(y, row_end * d.value_dim, "y"));

  // The recurrence, in dispatches of rows_per_dispatch rows: the state goes back to its
  // buffer at the end of each and is read again by the next.
  const Spec spec{u32(plan.workgroup_size), u32(d.dk), u32(d.dv), u32(plan.lanes_per_column),
                  u32(plan.columns_per_group), u32(plan.tokens_per_stage)};
  const struct {
    uint32_t n_rows, row_begin, n_k_heads, n_v_heads, channels, key_dim, value_dim;
    float q_scale;
  } push{u32(d.n_rows), u32(d.row_begin), u32(d.n_k_heads), u32(d.n_v_heads),
         u32(d.channels), u32(d.key_dim), u32(d.value_dim), d.q_scale};
  for (int64_t r0 = 0; r0 < d.n_rows; r0 += plan.rows_per_dispatch) {
    auto part = push;
    part.n_rows = u32(std::min(plan.rows_per_dispatch, d.n_rows - r0));
    part.row_begin = u32(d.row_begin + r0);
    RETURN_IF_ERROR(dev.stream().dispatch("delta_rule_fast", spec, {conv_out, beta, alpha, params, state, y}, part,
                                          spread(dev, static_cast<uint64_t>(plan.workgroups))));
  }
  // The gated RMSNorm of every row's heads, in place on y.
  const struct {
    uint32_t n_pairs, row_begin, n_v_heads, value_dim;
    float eps;
  } norm_push{u32(d.n_rows * d.n_v_heads), u32(d.row_begin), u32(d.n_v_heads), u32(d.value_dim), d.eps};
  return dev.stream().dispatch("delta_rule_fast_norm", Spec{u32(d.dv), u32(d.dv)}, {params, z, y}, norm_push,
                               spread(dev, static_cast<uint64_t>(d.n_rows * d.n_v_heads)));
}

}  // namespace moetier::vk
