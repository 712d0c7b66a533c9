// `inspect --plan`: the memory plan of a file as a table and as JSON.
#include <algorithm>
#include <cctype>

#include "cli/inspect_render.h"
#include "core/format.h"
#include "engine/plan_table.h"

namespace moetier::inspect {

namespace {

std::string bytes(int64_t b) { return format_bytes(static_cast<uint64_t>(std::max<int64_t>(b, 0))); }

std::string ngl_string(int64_t n) { return n < 0 ? "all" : std::to_string(n); }

// Cache types as the flags spell them ("f16", "q8_0").
std::string flag_type(DType t) {
  std::string s(dtype_name(t));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string params_string(const PlanParams& p) {
  std::string s = fmt::format("-c {}, -ctk {}, -ctv {}, -np {}, -ngl {}, -ub {}", p.n_ctx, flag_type(p.type_k),
                              flag_type(p.type_v), p.n_seq, ngl_string(p.n_gpu_layers), p.n_ubatch);
  if (p.cpu_moe) {
    s += ", -cmoe";
  } else if (p.n_cpu_moe > 0) {
    s += fmt::format(", -ncmoe {}", p.n_cpu_moe);
  }
  if (p.vram_budget_bytes > 0) s += fmt::format(", --vram-budget {} MiB", p.vram_budget_bytes >> 20);
  if (p.ram_budget_bytes > 0) s += fmt::format(", --ram-budget {} MiB", p.ram_budget_bytes >> 20);
  return s;
}

}  // namespace

std::string render_plan_text(const Plan& plan, const PlanParams& params, const HParams& hp) {
  std::string out = fmt::format("memory plan ({})\n", params_string(params));
  out += fmt::format("  {:<10} {:<26} {:<6} {:<8} {:>11} {:>11} {:>11} {:>11}\n", "blocks", "kinds", "dense",
                     "experts", "dense w.", "expert w.", "KV", "state");
  for (const auto& g : plan_block_groups(plan)) {
    std::string kinds;
    if (g.n_deltanet > 0) kinds += fmt::format("{} deltanet", g.n_deltanet);
    if (g.n_attention > 0) kinds += fmt::format("{}{} attention", kinds.empty() ? "" : ", ", g.n_attention);
    if (g.mtp) kinds += " (MTP)";
    const std::string range = g.first == g.last ? std::to_string(g.first) : fmt::format("{}-{}", g.first, g.last);
    out += fmt::format("  {:<10} {:<26} {:<6} {:<8} {:>11} {:>11} {:>11} {:>11}\n", range, kinds, g.dense, g.experts,
                       bytes(g.dense_bytes), bytes(g.expert_bytes), bytes(g.kv_bytes), bytes(g.state_bytes));
  }
  out += fmt::format("  {:<10} {:<26} {}\n", "output", "output_norm, output", plan.output_device);
  out += fmt::format("  {:<10} {:<26} {}\n", "input", "token_embd", kCpuDevice);

  out += fmt::format("\n  {:<8} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", "device", "weights", "KV",
                     "state", "scratch", "total", "budget", "free");
  for (const auto& d : plan.devices) {
    const bool known = d.budget_bytes > 0;
    const int64_t free = d.budget_bytes - d.total_bytes();
    out += fmt::format("  {:<8} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n", d.name, bytes(d.weight_bytes),
                       bytes(d.kv_bytes), bytes(d.state_bytes), bytes(d.scratch_bytes), bytes(d.total_bytes()),
                       known ? bytes(d.budget_bytes) : "-",
                       known ? (free < 0 ? fmt::format("-{}", bytes(-free)) : bytes(free)) : "-");
  }

  const int64_t n_attn = hp.n_attention_layers();
  out += fmt::format("\n  KV cache {}: {} attention layer(s) x {} ({} cells, K {}, V {})\n", bytes(plan.kv_bytes),
                     n_attn, bytes(plan.kv_bytes_per_layer), params.n_ctx, flag_type(params.type_k),
                     flag_type(params.type_v));
  if (hp.n_deltanet_layers() > 0) {
    // With speculative decoding, the rest is the rollback journal (engine/plan.cpp).
    const int64_t journal = plan.state_bytes - plan.state_bytes_per_seq * params.n_seq;
    out += fmt::format("  recurrent state {}: {} per sequence x {} ({} DeltaNet layers, conv + state, f32){}\n",
                       bytes(plan.state_bytes), bytes(plan.state_bytes_per_seq), params.n_seq,
                       hp.n_deltanet_layers(),
                       params.journal_tokens > 0 && journal > 0
                           ? fmt::format(", and {} of rollback journal ({} positions per sequence, speculative decoding)",
                                         bytes(journal), params.journal_tokens)
                           : "");
  }
  out += "  scratch: estimated compute buffers for a ubatch of -ub tokens (see src/engine/plan.cpp)\n";
  if (plan.fits.has_value()) {
    out += *plan.fits ? fmt::format("  {} fits its budget with {} left\n", kGpuDevice, bytes(*plan.gpu_free_bytes))
                      : fmt::format("  {} does NOT fit: {} over its budget\n", kGpuDevice, bytes(-*plan.gpu_free_bytes));
  } else if (plan.device(kGpuDevice) != nullptr) {
    out += fmt::format("  {} budget unknown: give --vram-budget MiB to check the fit\n", kGpuDevice);
  }
  if (!plan.gpu_expert_cache.summary.empty()) out += fmt::format("  {}\n", plan.gpu_expert_cache.summary);
  if (plan.fits_ram.has_value()) {
    const ExpertTiers* tiers = plan.expert_tiers ? &*plan.expert_tiers : nullptr;
    if (*plan.fits_ram) {
      out += fmt::format("  CPU RAM fits its budget with {} left\n", bytes(*plan.ram_free_bytes));
    } else if (tiers != nullptr && tiers->stream && tiers->error.is_ok()) {
      out += fmt::format("  CPU RAM: {} over its budget if every expert were in RAM; {}\n", bytes(-*plan.ram_free_bytes),
                         tiers->summary);
    } else {
      out += fmt::format("  CPU RAM does NOT fit: {} over its budget\n", bytes(-*plan.ram_free_bytes));
      if (tiers != nullptr && !tiers->error.is_ok()) out += fmt::format("  {}\n", tiers->error.message());
    }
  }
  return out;
}

nlohmann::ordered_json render_plan_json(const Plan& plan, const PlanParams& params) {
  using json = nlohmann::ordered_json;
  json devices = json::array();
  for (const auto& d : plan.devices) {
    devices.push_back({{"name", d.name},
                       {"weight_bytes", d.weight_bytes},
                       {"kv_bytes", d.kv_bytes},
                       {"state_bytes", d.state_bytes},
                       {"scratch_bytes", d.scratch_bytes},
                       {"total_bytes", d.total_bytes()},
                       {"budget_bytes", d.budget_bytes},
                       {"free_bytes", d.budget_bytes > 0 ? json(d.budget_bytes - d.total_bytes()) : json(nullptr)}});
  }
  json layers = json::array();
  for (const auto& l : plan.layers) {
    layers.push_back({{"layer", l.layer},
                      {"kind", std::string(layer_kind_name(l.kind))},
                      {"mtp", l.mtp},
                      {"dense", l.dense},
                      {"experts", l.experts},
                      {"dense_bytes", l.dense_bytes},
                      {"expert_bytes", l.expert_bytes},
                      {"kv_bytes", l.kv_bytes},
                      {"state_bytes", l.state_bytes}});
  }
  const auto opt = [](const auto& o) { return o.has_value() ? json(*o) : json(nullptr); };
  return {
      {"params",
       {{"n_ctx", params.n_ctx},
        {"type_k", std::string(dtype_name(params.type_k))},
        {"type_v", std::string(dtype_name(params.type_v))},
        {"n_seq", params.n_seq},
        {"mtp", params.mtp},
        {"journal_tokens", params.journal_tokens},
        {"n_gpu_layers", params.n_gpu_layers},
        {"n_cpu_moe", params.n_cpu_moe},
        {"cpu_moe", params.cpu_moe},
        {"n_ubatch", params.n_ubatch},
        {"vram_budget_bytes", params.vram_budget_bytes},
        {"ram_budget_bytes", params.ram_budget_bytes}}},
      {"devices", devices},
      {"layers", layers},
      {"output_device", plan.output_device},
      {"token_embd_device", kCpuDevice},
      {"weight_bytes", plan.weight_bytes},
      {"kv_bytes", plan.kv_bytes},
      {"kv_bytes_per_layer", plan.kv_bytes_per_layer},
      {"state_bytes", plan.state_bytes},
      {"state_bytes_per_seq", plan.state_bytes_per_seq},
      {"fits", opt(plan.fits)},
      {"gpu_free_bytes", opt(plan.gpu_free_bytes)},
      {"fits_ram", opt(plan.fits_ram)},
      {"ram_free_bytes", opt(plan.ram_free_bytes)},
      {"expert_tiers", plan.expert_tiers ? json{{"stream", plan.expert_tiers->stream},
                                                 {"experts_in_ram", plan.expert_tiers->experts_in_ram},
                                                 {"experts_total", plan.expert_tiers->experts_total},
                                                 {"cache_bytes", plan.expert_tiers->cache_bytes},
                                                 {"expert_bytes", plan.expert_tiers->expert_bytes},
                                                 {"capacity_per_layer", plan.expert_tiers->capacity},
                                                 {"error", plan.expert_tiers->error.is_ok()
                                                               ? json(nullptr)
                                                               : json(plan.expert_tiers->error.message())}}
                                         : json(nullptr)},
      {"gpu_expert_cache", plan.gpu_expert_cache.on() ? json{{"layers", plan.gpu_expert_cache.layers},
                                                              {"slots_per_layer", plan.gpu_expert_cache.slots},
                                                              {"bytes", plan.gpu_expert_cache.bytes}}
                                                        : json(nullptr)},
      {"gpu_backend_available", false},
  };
}

}  // namespace moetier::inspect
