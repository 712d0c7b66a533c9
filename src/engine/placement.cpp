#include "engine/placement.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/args.h"
#include "engine/summary.h"
#include "gpu/gpu.h"
#include "platform/gpu_memory.h"

namespace moetier {

namespace {

constexpr int64_t kMiB = 1 << 20;

Result<int64_t> parse_gpu_layers(const std::string& v) {
  if (v.empty() || v == "all" || v == "auto") return -1;
  ASSIGN_OR_RETURN(int64_t n, parse_int(v, "flag '-ngl'"));
  if (n < -1) return Status::bad_input("-ngl must be 'all', -1 or >= 0");
  return n;
}

struct GpuChoice {
  int index = -1;  // -1: none usable
  std::string why_not;
  uint64_t free_bytes = 0;
  bool software = false;  // lavapipe: its "VRAM" is system RAM, so nothing is cached there unless asked
};

// -dev, else the first hardware GPU: software rasterisers (lavapipe) run on the CPU and are
// slower there than moetier's own CPU path, so they are used only when asked for by -dev.
// The device's free memory: the driver's budget (VK_EXT_memory_budget), else the OS's for
// this adapter (Windows: DXGI), else the heap size.
uint64_t free_memory(const GpuDeviceInfo& d) {
  if (d.free_from_driver || !d.luid) return d.free_bytes;
  const std::optional<platform::GpuMemoryBudget> os = platform::gpu_memory_budget(*d.luid);
  if (!os) return d.free_bytes;
  return std::min(d.free_bytes, os->budget_bytes > os->used_bytes ? os->budget_bytes - os->used_bytes : 0);
}

GpuChoice choose_gpu(int device) {
  auto devices = list_gpu_devices();
  if (!devices) return {.why_not = devices.status().message()};
  for (GpuDeviceInfo& d : *devices) d.free_bytes = free_memory(d);
  if (device >= 0) {
    if (device >= static_cast<int>(devices->size())) {
      return {.why_not = fmt::format("-dev {}: there are {} Vulkan devices (see --list-devices)", device,
                                     devices->size())};
    }
    const GpuDeviceInfo& d = (*devices)[static_cast<size_t>(device)];
    return {.index = device, .free_bytes = d.free_bytes, .software = d.software};
  }
  for (size_t i = 0; i < devices->size(); ++i) {
    if (!(*devices)[i].software) return {.index = static_cast<int>(i), .free_bytes = (*devices)[i].free_bytes};
  }
  if (devices->empty()) return {.why_not = "no Vulkan devices"};
  return {.why_not = "only a software Vulkan device is present (" + (*devices)[0].description +
                     "); it runs on the CPU, slower than the CPU path (-dev 0 uses it anyway)"};
}

// The largest routed-expert stack of a GPU layer whose experts stay on the CPU: the area
// prompt batches stream experts through (VulkanBackend), allocated only while it fits.
int64_t expert_stream_bytes(const Plan& plan) {
  int64_t bytes = 0;
  for (const LayerPlan& lp : plan.layers) {
    if (lp.dense == kGpuDevice && lp.experts != kGpuDevice && !lp.mtp) bytes = std::max(bytes, lp.expert_bytes);
  }
  return bytes;
}

bool has_gpu_part(const Plan& plan) { return plan.device(kGpuDevice) != nullptr && plan.device(kGpuDevice)->weight_bytes > 0; }

std::string mib(uint64_t b) { return fmt::format("{:.0f} MiB", static_cast<double>(b) / kMiB); }

// The VRAM tier for the final plan (d.plan.gpu_expert_cache; the plan's table prints it). Asked
// for (--gpu-expert-cache MiB): that much. Auto: what the GPU has left beyond the plan, the
// --fit margin and the prompt streaming area (as make_plan computes it from a budget), on a
// hardware GPU only (a software device's memory is system RAM already).
void plan_expert_cache(const HParams& hp, const PlacementRequest& r, const GpuChoice& gpu, PlacementDecision& d) {
  int64_t available = -1;
  if (r.gpu_expert_cache_mib < 0 && !gpu.software && gpu.index >= 0) {
    const DevicePlan* g = d.plan.device(kGpuDevice);
    if (d.plan.gpu_free_bytes) {
      available = *d.plan.gpu_free_bytes;  // --fit's budget or --vram-budget, less the plan
    } else if (gpu.free_bytes > 0 && g != nullptr) {
      available = static_cast<int64_t>(gpu.free_bytes) - r.fit_margin_mib * kMiB - g->total_bytes();
    }
    available -= expert_stream_bytes(d.plan);  // as make_plan does
  }
  const int64_t requested = r.gpu_expert_cache_mib < 0 ? -1 : r.gpu_expert_cache_mib * kMiB;
  d.plan.gpu_expert_cache = plan_gpu_expert_cache(gpu_expert_cache_query(hp, d.plan, requested, available));
  // An asked-for size is taken as asked; say when it eats the headroom --fit would keep.
  const DevicePlan* g = d.plan.device(kGpuDevice);
  if (requested > 0 && d.plan.gpu_expert_cache.on() && gpu.free_bytes > 0 && g != nullptr) {
    const int64_t left = static_cast<int64_t>(gpu.free_bytes) - g->total_bytes() - d.plan.gpu_expert_cache.bytes;
    if (left < r.fit_margin_mib * kMiB) {
      d.plan.gpu_expert_cache.summary += fmt::format("; warning: with it the GPU keeps {} free, less than --fit-margin {} MiB",
                                         left >= 0 ? mib(static_cast<uint64_t>(left)) : "nothing", r.fit_margin_mib);
    }
  }
}

}  // namespace

std::optional<int64_t> n_cpu_moe_within(const HParams& hp, const ArchInfo& arch, const std::vector<PlanTensor>& tensors,
                                    const PlanParams& params, int64_t limit_bytes) {
  const int64_t n_layer_all = hp.n_layer + hp.n_layer_mtp;
  const bool every_block = params.n_gpu_layers < 0 || params.n_gpu_layers >= n_layer_all;
  if (!every_block || params.cpu_moe || !params.override_tensor.empty() || limit_bytes <= 0) return std::nullopt;
  for (int64_t n = std::max<int64_t>(0, params.n_cpu_moe) + 1; n <= n_layer_all; ++n) {
    PlanParams p = params;
    p.n_cpu_moe = n;
    p.vram_budget_bytes = 0;
    auto plan = make_plan(hp, arch, tensors, p);
    if (!plan) return std::nullopt;
    const DevicePlan* g = plan->device(kGpuDevice);
    if (g != nullptr && g->total_bytes() <= limit_bytes) return n;
  }
  return std::nullopt;
}

std::string vram_headroom_warning(const VramHeadroom& h) {
  if (h.free_bytes <= 0 || h.gpu_bytes <= h.free_bytes - h.margin_bytes) return "";
  const int64_t left = h.free_bytes - h.gpu_bytes;
  const std::string what =
      left >= 0 ? fmt::format("this placement leaves {} of VRAM free", mib(static_cast<uint64_t>(left)))
                : fmt::format("this placement needs {} of VRAM, {} more than the {} free", mib(static_cast<uint64_t>(h.gpu_bytes)),
                              mib(static_cast<uint64_t>(-left)), mib(static_cast<uint64_t>(h.free_bytes)));
  const std::string fix = h.n_cpu_moe ? fmt::format("-ncmoe {} or --fit", *h.n_cpu_moe) : std::string("--fit");
  return fmt::format("warning: {}; drivers that run out spill to system RAM and generation can drop several-fold; "
                     "keep >= {} free: {}",
                     what, mib(static_cast<uint64_t>(std::max<int64_t>(0, h.margin_bytes))), fix);
}

Result<PlacementDecision> decide_placement(const gguf::GgufFile& header, const HParams& hp, const PlacementRequest& r) {
  if (r.fit != "on" && r.fit != "off" && r.fit != "auto") {
    return Status::bad_input(fmt::format("--fit: '{}' is not one of on, off, auto", r.fit));
  }
  if (r.fit_margin_mib < 0) return Status::bad_input("--fit-margin must not be negative");
  if (r.vram_budget_mib < 0) return Status::bad_input("--vram-budget must not be negative");
  if (r.gpu_expert_cache_mib < -1) return Status::bad_input("--gpu-expert-cache must not be negative");
  const bool explicit_layout = !r.n_gpu_layers.empty() || r.n_cpu_moe > 0 || r.cpu_moe || !r.override_tensor.empty();
  const bool fit = r.fit == "on" || (r.fit == "auto" && !explicit_layout);
  const ArchInfo* arch = find_arch(hp.arch);
  CHECK(arch != nullptr);
  const inspect::Summary summary = inspect::summarize(header);
  const std::vector<PlanTensor> tensors = plan_tensors(header, summary);

  PlacementDecision d;
  PlanParams& params = d.params;
  params = PlanParams{.n_ctx = r.n_ctx,
                      .type_k = r.type_k,
                      .type_v = r.type_v,
                      .n_seq = r.n_seq,
                      .mtp = r.mtp,
                      .journal_tokens = r.journal_tokens,
                      .n_gpu_layers = 0,
                      .n_cpu_moe = r.n_cpu_moe,
                      .cpu_moe = r.cpu_moe,
                      .n_ubatch = r.n_ubatch,
                      .vram_budget_bytes = r.vram_budget_mib * kMiB,
                      .gpu_expert_cache_bytes = r.gpu_expert_cache_mib < 0 ? -1 : r.gpu_expert_cache_mib * kMiB,
                      .override_tensor = r.override_tensor};
  auto run_on_cpu = [&]() -> Status {
    params = cpu_only(params);
    ASSIGN_OR_RETURN(d.plan, make_plan(hp, *arch, tensors, params));
    return Status::ok();
  };
  GpuChoice gpu;
  int64_t fit_limit_bytes = 0;  // --fit's budget (free − margin): the ceiling for optional GPU buffers
  if (fit) {
    gpu = choose_gpu(r.device);
    if (gpu.index < 0) {
      if (r.fit == "on" || r.vram_budget_mib > 0) d.note = "--fit: no GPU (" + gpu.why_not + "): everything on the CPU";
      RETURN_IF_ERROR(run_on_cpu());
    } else {
      const int64_t free_bytes = r.vram_budget_mib > 0 ? r.vram_budget_mib * kMiB : static_cast<int64_t>(gpu.free_bytes);
      ASSIGN_OR_RETURN(FitResult fr, fit_plan(hp, *arch, tensors, params, free_bytes, r.fit_margin_mib * kMiB));
      d.plan = std::move(fr.plan);
      params = fr.params;
      d.note = fr.choice;
      d.fit_flags = fr.flags;
      // Prompt batches stream a GPU layer's CPU experts through an area the size of one
      // layer's experts; it is optional, so it is only allocated while the GPU's total stays
      // within the budget (the headroom --fit promises holds). Say which it will be.
      fit_limit_bytes = params.vram_budget_bytes;
      const int64_t stream_bytes = expert_stream_bytes(d.plan);
      if (stream_bytes > 0 && r.op_offload && d.plan.gpu_free_bytes) {
        d.note += *d.plan.gpu_free_bytes >= stream_bytes
                      ? fmt::format("; prompt batches can stream CPU experts through the GPU ({} area)", mib(static_cast<uint64_t>(stream_bytes)))
                      : fmt::format("; no room left to stream CPU experts through the GPU in prompt batches ({} needed), so "
                                    "prompts compute them on the CPU (one more -ncmoe layer makes room; `moetier tune` measures which is faster)",
                                    mib(static_cast<uint64_t>(stream_bytes)));
      }
    }
  } else {
    ASSIGN_OR_RETURN(params.n_gpu_layers, parse_gpu_layers(r.n_gpu_layers));
    if (r.n_gpu_layers.empty() && !explicit_layout) params.n_gpu_layers = 0;  // --fit off and no flags: CPU
    ASSIGN_OR_RETURN(d.plan, make_plan(hp, *arch, tensors, params));
    if (has_gpu_part(d.plan)) {
      gpu = choose_gpu(r.device);
      if (gpu.index < 0) {
        d.note = "no GPU: " + gpu.why_not + "; everything runs on the CPU";
        RETURN_IF_ERROR(run_on_cpu());
      } else if (d.plan.fits.has_value() && !*d.plan.fits) {
        d.note = fmt::format("warning: the GPU part needs {} more than --vram-budget {} MiB",
                             mib(static_cast<uint64_t>(-*d.plan.gpu_free_bytes)), r.vram_budget_mib);
      } else if (r.vram_budget_mib == 0 && gpu.free_bytes > 0) {
        // The device's own free memory against the margin --fit would keep.
        const int64_t free_bytes = static_cast<int64_t>(gpu.free_bytes);
        const int64_t margin = r.fit_margin_mib * kMiB;
        VramHeadroom h{.gpu_bytes = d.plan.device(kGpuDevice)->total_bytes(), .free_bytes = free_bytes, .margin_bytes = margin};
        if (h.gpu_bytes > free_bytes - margin) h.n_cpu_moe = n_cpu_moe_within(hp, *arch, tensors, params, free_bytes - margin);
        d.note = vram_headroom_warning(h);
      }
    }
  }
  d.gpu_part = has_gpu_part(d.plan);
  if (d.gpu_part) plan_expert_cache(hp, r, gpu, d);
  d.gpu = GpuPlacement{.create_backend = create_gpu_backend,
                       .device = gpu.index,
                       .progress = r.progress,
                       .memory_limit_bytes = static_cast<uint64_t>(r.vram_budget_mib * kMiB),
                       .op_offload = r.op_offload,
                       .op_offload_limit_bytes = static_cast<uint64_t>(fit_limit_bytes),
                       .exact_kernels = r.exact_kernels};
  for (int64_t il = 0; il < hp.n_layer && d.gpu_part; ++il) {
    const LayerPlan& lp = d.plan.layers[static_cast<size_t>(il)];
    d.gpu.layer_on_gpu.push_back(lp.dense == kGpuDevice);
    d.gpu.experts_on_gpu.push_back(lp.experts == kGpuDevice);
  }
  if (d.gpu_part && d.plan.gpu_expert_cache.on()) {
    d.gpu.expert_cache_slots.assign(static_cast<size_t>(hp.n_layer), 0);
    const GpuExpertCache& c = d.plan.gpu_expert_cache;
    for (size_t i = 0; i < c.layers.size(); ++i) {
      if (c.layers[i] < hp.n_layer) d.gpu.expert_cache_slots[static_cast<size_t>(c.layers[i])] = c.slots[i];
    }
  }
  d.gpu.output_on_gpu = d.gpu_part && d.plan.output_device == kGpuDevice;
  if (d.gpu_part && hp.n_layer_mtp > 0 && d.plan.layers.size() > static_cast<size_t>(hp.n_layer)) {
    const LayerPlan& mtp = d.plan.layers[static_cast<size_t>(hp.n_layer)];
    d.gpu.mtp_on_gpu = mtp.dense == kGpuDevice;
    d.gpu.mtp_experts_on_gpu = mtp.experts == kGpuDevice;
  }
  // Keep the CPU-only fallback plan at hand for callers whose GPU placement fails.
  ASSIGN_OR_RETURN(d.cpu_plan, make_plan(hp, *arch, tensors, cpu_only(params)));
  return d;
}

std::vector<std::string> cpu_weight_tensors(const gguf::GgufFile& header, const HParams& hp, const Plan& plan) {
  // Without output.weight the LM head is the token embedding (tied): read whole every token.
  const bool tied_output = header.find_tensor("output.weight") == nullptr;
  std::vector<std::string> names;
  for (size_t i = 0; i < header.tensors.size() && i < plan.tensor_devices.size(); ++i) {
    if (plan.tensor_devices[i] != kCpuDevice) continue;
    const gguf::TensorInfo& t = header.tensors[i];
    const int layer = tensor_layer_index(t.name);
    if (layer >= hp.n_layer) continue;                              // MTP blocks: never run
    if (t.name == "token_embd.weight" && !tied_output) continue;   // one row per token
    names.push_back(t.name);
  }
  return names;
}

uint64_t cpu_working_bytes(const Plan& plan) {
  const DevicePlan* cpu = plan.device(kCpuDevice);
  if (cpu == nullptr) return 0;
  return static_cast<uint64_t>(std::max<int64_t>(0, cpu->kv_bytes + cpu->state_bytes + cpu->scratch_bytes));
}

Result<PlacementDecision> plan_session(const gguf::GgufFile& header, const HParams& hp, const EngineOptions& o,
                                       const SessionOptions& so, const KvCacheOptions& kv) {
  return decide_placement(header, hp,
                          {.n_gpu_layers = o.n_gpu_layers,
                           .n_cpu_moe = o.n_cpu_moe,
                           .cpu_moe = o.cpu_moe,
                           .override_tensor = o.override_tensor,
                           .device = o.device,
                           .fit = o.fit,
                           .fit_margin_mib = o.fit_margin_mib,
                           .vram_budget_mib = o.vram_budget_mib,
                           .n_ctx = kv.n_ctx,
                           .type_k = kv.type_k,
                           .type_v = kv.type_v,
                           .n_seq = so.n_seq,
                           .mtp = so.use_mtp,
                           .journal_tokens = so.journal_tokens,
                           .n_ubatch = o.n_ubatch,
                           .progress = so.reporter != nullptr,
                           .op_offload = !o.no_op_offload,
                           .exact_kernels = o.gpu_kernels == "exact",
                           .gpu_expert_cache_mib = o.gpu_expert_cache_mib});
}

Status place_model(Session& s, PlacementDecision d, const SessionOptions& so) {
  const HParams& hp = s.model->hparams();
  LoadReporter* report = so.reporter;
  if (report && !d.note.empty()) report->note(d.note);
  if (d.gpu_part) {
    if (report) report->plan(d, hp);
    if (Status st = s.model->place_on_gpu(d.gpu); !st) {
      if (report) report->note(fmt::format("GPU: {}; running everything on the CPU", st.message()));
      d.plan = d.cpu_plan;
    } else {
      s.gpu_device = d.gpu.device;
    }
    if (s.gpu_device >= 0 && report) {
      const auto m = s.model->gpu_memory();
      report->note(fmt::format("GPU {}: weights {}, scratch {} (KV cache and state as sequences are made)", m->device,
                               mib(m->weight_bytes), mib(m->scratch_bytes)));
    }
  }
  s.plan = std::move(d.plan);
  return Status::ok();
}

}  // namespace moetier
