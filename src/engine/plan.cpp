#include "engine/plan.h"

#include <algorithm>
#include <memory>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace moetier {

const DevicePlan* Plan::device(std::string_view name) const {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

Result<int64_t> kv_row_bytes(DType type, int64_t n, std::string_view flag) {
  const DTypeTraits& t = dtype_traits(type);
  if (n % t.block_elems != 0) {
    return Status::bad_input(fmt::format("{} {}: the head width {} is not a multiple of its block size {}", flag,
                                         t.name, n, t.block_elems));
  }
  return n / t.block_elems * t.block_bytes;
}

// Compute scratch, an estimate. Per token of a ubatch, the f32 activations alive at once
// in the widest part of a block:
//   3 * n_embd                      residual, normed input, block output
//   + the widest of
//     attention: 2*n_head*hd (q|gate) + 2*n_head_kv*hd (k, v) + n_head*hd (attention out)
//     DeltaNet:  2*(2*key_dim + value_dim) (qkv before/after conv) + 2*value_dim (z, out)
//                + 2*n_v (beta, alpha)
//     MoE:       n_expert (router) + n_used*3*n_ff_exp (gate, up, product)
//                + n_used*n_embd (expert outputs) + 3*n_ff_shexp (shared expert)
//   + n_vocab (logits) on the device holding the output layer.
// Attention is assumed fused (no n_ctx x n_head score matrix is materialised), and the
// activation-quantization copies (~1 byte/element) are not counted: the headroom margin of
// a fit (--fit-margin) covers them.
int64_t estimate_scratch_bytes(const HParams& hp, int64_t n_ubatch, bool holds_output) {
  const int64_t attention = 2 * hp.n_head * hp.head_dim_k + 2 * hp.n_head_kv * hp.head_dim_k + hp.n_head * hp.head_dim_v;
  const int64_t key_dim = hp.ssm_n_group * hp.ssm_d_state;
  const int64_t deltanet =
      hp.n_deltanet_layers() > 0 ? 2 * (2 * key_dim + hp.ssm_d_inner) + 2 * hp.ssm_d_inner + 2 * hp.ssm_dt_rank : 0;
  const int64_t moe = hp.n_expert + hp.n_expert_used * (3 * hp.n_ff_exp + hp.n_embd) + 3 * hp.n_ff_shexp;
  const int64_t per_token = 3 * hp.n_embd + std::max({attention, deltanet, moe}) + (holds_output ? hp.n_vocab : 0);
  return n_ubatch * per_token * static_cast<int64_t>(sizeof(float));
}

namespace {

Status validate(const PlanParams& p) {
  if (p.n_ctx < 1) return Status::bad_input(fmt::format("-c must be at least 1 (got {})", p.n_ctx));
  if (p.n_ctx > (int64_t{1} << 32)) return Status::bad_input(fmt::format("-c {} is too large", p.n_ctx));
  if (p.journal_tokens < 0 || p.journal_tokens > 65) {
    return Status::bad_input(fmt::format("journal tokens must be in [0, 65] (got {})", p.journal_tokens));
  }
  if (p.n_seq < 1 || p.n_seq > 4096) return Status::bad_input(fmt::format("-np must be in [1, 4096] (got {})", p.n_seq));
  if (p.n_gpu_layers < -1) return Status::bad_input(fmt::format("-ngl must be -1 (all) or >= 0 (got {})", p.n_gpu_layers));
  if (p.n_cpu_moe < 0) return Status::bad_input(fmt::format("-ncmoe must be >= 0 (got {})", p.n_cpu_moe));
  if (p.n_ubatch < 1 || p.n_ubatch > (1 << 20)) {
    return Status::bad_input(fmt::format("-ub must be in [1, 1048576] (got {})", p.n_ubatch));
  }
  if (p.vram_budget_bytes < 0) return Status::bad_input("--vram-budget must be >= 0");
  if (p.ram_budget_bytes < 0) return Status::bad_input("--ram-budget must be >= 0");
  return Status::ok();
}

// One -ot rule: a compiled regex and the device it sends matching tensors to.
struct Override {
  std::shared_ptr<pcre2_code> regex;
  std::string device;
};

Result<std::vector<Override>> parse_overrides(const std::vector<std::string>& rules) {
  std::vector<Override> out;
  for (const std::string& rule : rules) {
    // A rule may hold several comma-separated REGEX=DEV pairs, as llama.cpp accepts.
    size_t start = 0;
    while (start <= rule.size()) {
      const size_t comma = rule.find(',', start);
      const std::string pair = rule.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? rule.size() + 1 : comma + 1;
      if (pair.empty()) continue;
      const size_t eq = pair.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
        return Status::bad_input(fmt::format("-ot '{}': expected REGEX=DEVICE (e.g. 'exps=CPU')", pair));
      }
      std::string dev = pair.substr(eq + 1);
      std::string upper;
      for (char c : dev) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (upper == "CPU") {
        dev = kCpuDevice;
      } else if (upper == "GPU" || upper == "GPU0" || upper == "VULKAN0" || upper == "CUDA0") {
        dev = kGpuDevice;
      } else {
        return Status::bad_input(fmt::format("-ot '{}': unknown device '{}' (CPU, GPU0, Vulkan0 or CUDA0)", pair, dev));
      }
      int code = 0;
      PCRE2_SIZE offset = 0;
      const std::string pattern = pair.substr(0, eq);
      pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &code, &offset,
                                     nullptr);
      if (!re) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(code, buf, sizeof(buf));
        return Status::bad_input(fmt::format("-ot '{}': bad regex at offset {}: {}", pair, offset,
                                             reinterpret_cast<const char*>(buf)));
      }
      out.push_back({std::shared_ptr<pcre2_code>(re, pcre2_code_free), dev});
    }
  }
  return out;
}

// The device the first matching rule names, or "" (llama.cpp applies the first match).
std::string override_for(const std::vector<Override>& rules, const std::string& name) {
  for (const Override& o : rules) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(o.regex.get(), nullptr);
    const int rc = pcre2_match(o.regex.get(), reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(), 0, 0, md, nullptr);
    pcre2_match_data_free(md);
    if (rc >= 0) return o.device;
  }
  return {};
}

}  // namespace

Result<Plan> make_plan(const HParams& hp, const ArchInfo& arch, const std::vector<PlanTensor>& tensors,
                       const PlanParams& params) {
  RETURN_IF_ERROR(validate(params));
  ASSIGN_OR_RETURN(const std::vector<Override> overrides, parse_overrides(params.override_tensor));
  CHECK_MSG(static_cast<int64_t>(hp.layer_kinds.size()) == hp.n_layer, "HParams: {} layer kinds for {} layers",
            hp.layer_kinds.size(), hp.n_layer);
  ASSIGN_OR_RETURN(const int64_t k_row, kv_row_bytes(params.type_k, hp.head_dim_k, "-ctk"));
  ASSIGN_OR_RETURN(const int64_t v_row, kv_row_bytes(params.type_v, hp.head_dim_v, "-ctv"));

  Plan plan;
  const int64_t n_layer_all = hp.n_layer + hp.n_layer_mtp;
  // llama.cpp's numbering: blocks 0..n_layer_all-1, then the output layer as n_layer_all;
  // -ngl N offloads the last N of these n_layer_all + 1 layers.
  const int64_t n_gpu = params.n_gpu_layers < 0 ? n_layer_all + 1 : std::min(params.n_gpu_layers, n_layer_all + 1);
  const int64_t first_gpu_layer = n_layer_all + 1 - n_gpu;
  const auto layer_device = [&](int64_t il) -> std::string { return il >= first_gpu_layer ? kGpuDevice : kCpuDevice; };
  bool any_gpu_override = false;
  for (const auto& o : overrides) any_gpu_override = any_gpu_override || o.device == kGpuDevice;
  const bool use_gpu = n_gpu > 0 || params.vram_budget_bytes > 0 || any_gpu_override;

  plan.devices.push_back({.name = kCpuDevice, .budget_bytes = params.ram_budget_bytes});
  if (use_gpu) plan.devices.push_back({.name = kGpuDevice, .budget_bytes = params.vram_budget_bytes});
  const auto dev = [&plan](const std::string& name) -> DevicePlan& {
    for (auto& d : plan.devices) {
      if (d.name == name) return d;
    }
    CHECK_MSG(false, "device {} not in plan", name);
    return plan.devices.front();
  };
  plan.output_device = layer_device(n_layer_all);

  // -ot: per block, where its dense tensors and its routed experts were sent (a CPU match
  // wins: a block's part runs on one device).
  std::vector<std::string> dense_override(static_cast<size_t>(n_layer_all)), expert_override(static_cast<size_t>(n_layer_all));
  for (const PlanTensor& t : tensors) {
    if (overrides.empty() || t.layer < 0 || t.layer >= n_layer_all) continue;
    const std::string dev = override_for(overrides, t.name);
    if (dev.empty()) continue;
    std::string& slot = (is_routed_expert(t.role) ? expert_override : dense_override)[static_cast<size_t>(t.layer)];
    if (slot.empty() || dev == kCpuDevice) slot = dev;
  }
  for (const PlanTensor& t : tensors) {  // the output layer follows output.weight's override
    if (t.layer < 0 && t.role != TensorRole::kTokenEmbedding && !overrides.empty()) {
      if (const std::string dev = override_for(overrides, t.name); !dev.empty()) plan.output_device = dev;
    }
  }

  // Per layer: devices, KV cache and recurrent state.
  plan.kv_bytes_per_layer = params.n_ctx * hp.n_head_kv * (k_row + v_row);
  for (int64_t il = 0; il < n_layer_all; ++il) {
    LayerPlan lp;
    lp.layer = static_cast<int>(il);
    lp.mtp = il >= hp.n_layer;
    lp.kind = lp.mtp ? LayerKind::kAttention : hp.layer_kinds[static_cast<size_t>(il)];
    lp.dense = layer_device(il);
    if (!dense_override[static_cast<size_t>(il)].empty()) lp.dense = dense_override[static_cast<size_t>(il)];
    lp.experts = (params.cpu_moe || il < params.n_cpu_moe) ? kCpuDevice : lp.dense;
    if (!expert_override[static_cast<size_t>(il)].empty()) lp.experts = expert_override[static_cast<size_t>(il)];
    // An MTP block runs only as draft-mtp's head; otherwise its weights stay in the file on
    // the CPU side and nothing of it is uploaded.
    if (lp.mtp && !params.mtp) lp.dense = lp.experts = kCpuDevice;
    // Experts on the GPU need their block's router there too.
    if (lp.dense == kCpuDevice) lp.experts = kCpuDevice;
    if (lp.mtp) {
      // The decoder does not run MTP blocks; the drafter's head keeps one KV cache per sequence.
      if (params.mtp && il == hp.n_layer) lp.kv_bytes = plan.kv_bytes_per_layer;
    } else {
      lp.kv_bytes = lp.kind == LayerKind::kAttention ? plan.kv_bytes_per_layer : 0;
      const int64_t per_seq = arch.recurrent_state_bytes(hp, lp.kind);
      plan.state_bytes_per_seq += per_seq;
      // The rollback journal: on the CPU one more state and small records
      // (ArchInfo::cpu_journal_bytes); on a GPU a state per position.
      const int64_t journal = params.journal_tokens == 0 ? 0
                              : lp.dense == kCpuDevice && arch.cpu_journal_bytes != nullptr
                                  ? arch.cpu_journal_bytes(hp, lp.kind, params.journal_tokens)
                                  : per_seq * params.journal_tokens;
      lp.state_bytes = (per_seq + journal) * params.n_seq;
    }
    plan.kv_bytes += lp.kv_bytes;
    plan.state_bytes += lp.state_bytes;
    dev(lp.dense).kv_bytes += lp.kv_bytes;
    dev(lp.dense).state_bytes += lp.state_bytes;
    plan.layers.push_back(std::move(lp));
  }

  // Per tensor.
  plan.tensor_devices.reserve(tensors.size());
  for (const PlanTensor& t : tensors) {
    std::string where;
    const bool routed = is_routed_expert(t.role);
    if (t.layer < 0) {
      where = t.role == TensorRole::kTokenEmbedding ? kCpuDevice : plan.output_device;
    } else if (t.layer >= n_layer_all) {
      where = kCpuDevice;  // a block the hyper-parameters do not know; never offloaded
    } else {
      LayerPlan& lp = plan.layers[static_cast<size_t>(t.layer)];
      where = routed ? lp.experts : lp.dense;
      (routed ? lp.expert_bytes : lp.dense_bytes) += t.bytes;
    }
    dev(where).weight_bytes += t.bytes;
    plan.weight_bytes += t.bytes;
    plan.tensor_devices.push_back(std::move(where));
  }

  // Scratch on every device that computes something.
  for (auto& d : plan.devices) {
    if (d.weight_bytes == 0) continue;
    d.scratch_bytes = estimate_scratch_bytes(hp, params.n_ubatch, d.name == plan.output_device);
  }

  // A GPU that ended up with nothing (every part overridden to the CPU) is not listed.
  if (const DevicePlan* gpu = plan.device(kGpuDevice); gpu != nullptr && gpu->weight_bytes == 0 && gpu->kv_bytes == 0 &&
                                                    gpu->state_bytes == 0 && params.vram_budget_bytes == 0) {
    plan.devices.pop_back();
  }
  if (const DevicePlan* gpu = plan.device(kGpuDevice); gpu != nullptr && gpu->budget_bytes > 0) {
    plan.gpu_free_bytes = gpu->budget_bytes - gpu->total_bytes();
    plan.fits = *plan.gpu_free_bytes >= 0;
  }
  if (plan.device(kGpuDevice) != nullptr) {
    // Auto: what the budget leaves, less the area prompt batches stream CPU experts through.
    int64_t available = -1;
    if (plan.gpu_free_bytes) {
      int64_t stream_bytes = 0;
      for (const LayerPlan& l : plan.layers) {
        if (l.dense == kGpuDevice && l.experts != kGpuDevice && !l.mtp) stream_bytes = std::max(stream_bytes, l.expert_bytes);
      }
      available = *plan.gpu_free_bytes - stream_bytes;
    }
    plan.gpu_expert_cache =
        plan_gpu_expert_cache(gpu_expert_cache_query(hp, plan, params.gpu_expert_cache_bytes, available));
  }
  if (const DevicePlan& cpu = plan.devices.front(); cpu.budget_bytes > 0) {
    plan.ram_free_bytes = cpu.budget_bytes - cpu.total_bytes();
    plan.fits_ram = *plan.ram_free_bytes >= 0;
    // The CPU's routed experts (compute layers) in tiers: as many in RAM as the budget holds,
    // the rest read from the file (engine/expert_tiers.h), as the load will do.
    ExpertTierQuery q{.n_expert_used = hp.n_expert_used,
                      .working_bytes = cpu.kv_bytes + cpu.state_bytes + cpu.scratch_bytes,
                      .ram_budget_bytes = cpu.budget_bytes};
    int64_t expert_bytes = 0;
    for (const LayerPlan& l : plan.layers) {
      if (l.mtp || l.experts != kCpuDevice || l.expert_bytes == 0 || hp.n_expert <= 0) continue;
      q.layers.push_back({.layer = l.layer, .n_expert = hp.n_expert, .expert_bytes = l.expert_bytes / hp.n_expert});
      expert_bytes += l.expert_bytes;
    }
    q.resident_bytes = cpu.weight_bytes - expert_bytes;
    plan.expert_tiers = plan_expert_tiers(q);
  }
  return plan;
}

GpuExpertCacheQuery gpu_expert_cache_query(const HParams& hp, const Plan& plan, int64_t requested_bytes,
                                           int64_t available_bytes) {
  GpuExpertCacheQuery q{.requested_bytes = requested_bytes, .available_bytes = available_bytes};
  if (hp.n_expert <= 0) return q;
  for (const LayerPlan& l : plan.layers) {
    if (l.mtp || l.dense != kGpuDevice || l.experts != kCpuDevice || l.expert_bytes == 0) continue;
    q.layers.push_back({.layer = l.layer, .n_expert = hp.n_expert, .expert_bytes = l.expert_bytes / hp.n_expert});
  }
  return q;
}

PlanParams cpu_only(PlanParams p) {
  p.n_gpu_layers = 0;
  p.cpu_moe = false;
  p.n_cpu_moe = 0;
  p.override_tensor.clear();
  p.vram_budget_bytes = 0;
  p.gpu_expert_cache_bytes = 0;
  return p;
}

namespace {

// Blocks whose routed experts the plan puts on the GPU.
int64_t expert_layers_on_gpu(const Plan& plan) {
  return std::count_if(plan.layers.begin(), plan.layers.end(), [](const LayerPlan& l) { return l.experts == kGpuDevice; });
}

std::string mib_string(int64_t bytes) { return fmt::format("{:.0f} MiB", static_cast<double>(bytes) / 1048576.0); }

}  // namespace

Result<FitResult> fit_plan(const HParams& hp, const ArchInfo& arch, const std::vector<PlanTensor>& tensors,
                           const PlanParams& base, int64_t free_bytes, int64_t margin_bytes) {
  if (margin_bytes < 0) return Status::bad_input("--fit-margin must not be negative");
  const int64_t budget = free_bytes - margin_bytes;
  const int64_t n_layer_all = hp.n_layer + hp.n_layer_mtp;
  const int64_t ngl_all = n_layer_all + 1;  // -ngl's count: every block and the output layer
  // The GPU-side params of a candidate: -ngl all with `n_cpu_moe` blocks' experts on the CPU
  // (n_layer_all: all of them, spelled -cmoe as before).
  const auto gpu_params = [&](int64_t n_cpu_moe) {
    PlanParams p = base;
    p.n_gpu_layers = -1;
    p.cpu_moe = n_cpu_moe >= n_layer_all;
    p.n_cpu_moe = p.cpu_moe ? 0 : n_cpu_moe;
    p.override_tensor.clear();
    p.vram_budget_bytes = budget;
    return p;
  };
  const auto budget_line = [&](const Plan& plan) {
    return fmt::format("{} left of the {} budget after the {} margin", mib_string(*plan.gpu_free_bytes),
                       mib_string(budget), mib_string(margin_bytes));
  };
  if (budget > 0) {
    // 1. Everything on the GPU.
    PlanParams all = gpu_params(0);
    ASSIGN_OR_RETURN(Plan all_plan, make_plan(hp, arch, tensors, all));
    if (all_plan.fits.value_or(false)) {
      std::string choice = fmt::format("--fit: -ngl {} -ncmoe 0: everything on the GPU ({})", ngl_all, budget_line(all_plan));
      const int64_t layers = expert_layers_on_gpu(all_plan);
      return FitResult{.params = std::move(all),
                       .plan = std::move(all_plan),
                       .n_gpu_layers = ngl_all,
                       .n_cpu_moe = 0,
                       .expert_layers_on_gpu = layers,
                       .flags = fmt::format("-ngl {} -ncmoe 0", ngl_all),
                       .choice = std::move(choice)};
    }
    // 2. Dense parts on the GPU, every routed expert on the CPU; then the experts of the last
    // blocks while they fit. Each step down in -ncmoe adds one block's experts to the GPU, so
    // the GPU total only grows and the first N that does not fit ends the search. (A block
    // whose experts cannot move, an MTP block that does not run, changes nothing: a plan is
    // taken only when it holds more experts than the best so far.)
    PlanParams best = gpu_params(n_layer_all);
    ASSIGN_OR_RETURN(Plan best_plan, make_plan(hp, arch, tensors, best));
    if (best_plan.fits.value_or(false)) {
      int64_t best_n = n_layer_all;
      int64_t best_layers = expert_layers_on_gpu(best_plan);
      for (int64_t n = n_layer_all - 1; n >= 1; --n) {
        PlanParams p = gpu_params(n);
        ASSIGN_OR_RETURN(Plan plan, make_plan(hp, arch, tensors, p));
        if (!plan.fits.value_or(false)) break;
        if (const int64_t layers = expert_layers_on_gpu(plan); layers > best_layers) {
          best = std::move(p);
          best_plan = std::move(plan);
          best_n = n;
          best_layers = layers;
        }
      }
      int64_t expert_bytes = 0;
      for (const LayerPlan& l : best_plan.layers) expert_bytes += l.experts == kGpuDevice ? l.expert_bytes : 0;
      std::string flags = fmt::format("-ngl {} -ncmoe {}", ngl_all, best_n);
      std::string choice =
          best_layers == 0
              ? fmt::format("--fit: {}: dense layers, router, shared experts, KV cache and LM head on the GPU, every "
                            "routed expert on the CPU (no block's experts fit: {})",
                            flags, budget_line(best_plan))
              : fmt::format("--fit: {}: dense layers, KV cache and LM head on the GPU, and {} layer{} experts ({}, "
                            "{}); {}",
                            flags, best_layers, best_layers == 1 ? "'s" : "s'", mib_string(expert_bytes),
                            best_layers == 1 ? fmt::format("block {}", best_n)
                                             : fmt::format("blocks {}-{}", best_n, best_n + best_layers - 1),
                            budget_line(best_plan));
      return FitResult{.params = std::move(best),
                       .plan = std::move(best_plan),
                       .n_gpu_layers = ngl_all,
                       .n_cpu_moe = best_n,
                       .expert_layers_on_gpu = best_layers,
                       .flags = std::move(flags),
                       .choice = std::move(choice)};
    }
  }
  // 3. Nothing on the GPU.
  PlanParams p = cpu_only(base);
  ASSIGN_OR_RETURN(Plan plan, make_plan(hp, arch, tensors, p));
  return FitResult{.params = std::move(p),
                   .plan = std::move(plan),
                   .n_gpu_layers = 0,
                   .n_cpu_moe = 0,
                   .expert_layers_on_gpu = 0,
                   .flags = "-ngl 0",
                   .choice = fmt::format("--fit: -ngl 0: not even the dense part fits {} of GPU memory (after the {} "
                                         "margin): everything on the CPU",
                                         mib_string(std::max<int64_t>(budget, 0)), mib_string(margin_bytes))};
}

}  // namespace moetier
