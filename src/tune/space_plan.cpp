#include "tune/space_plan.h"

#include <fmt/format.h>

#include "engine/placement.h"
#include "engine/plan.h"
#include "engine/summary.h"
#include "gguf/gguf.h"
#include "model/arch.h"

namespace moetier::tune {

namespace {
constexpr int64_t kMiB = 1 << 20;
}  // namespace

Result<SpacePlan> plan_search_space(const SpacePlanParams& params) {
  ASSIGN_OR_RETURN(gguf::GgufFile header, gguf::read_header(params.model_path));
  auto hp_read = read_hparams(header);
  if (!hp_read) return hp_read.status().with_context(params.model_path);
  const HParams hp = std::move(hp_read).value();
  ASSIGN_OR_RETURN(PlacementDecision decision, decide_placement(header, hp,
                                                                {.device = params.device,
                                                                 .fit = "on",
                                                                 .fit_margin_mib = params.fit_margin_mib,
                                                                 .vram_budget_mib = params.vram_budget_mib,
                                                                 .n_ctx = params.n_ctx,
                                                                 .type_k = params.kv_types.front(),
                                                                 .type_v = params.kv_types.front(),
                                                                 .progress = false}));
  SpacePlan out;
  out.n_layer_all = hp.n_layer + hp.n_layer_mtp;
  out.space = {.purpose = params.purpose,
               .n_layer_all = out.n_layer_all,
               .physical_cores = params.physical_cores,
               .threads = params.threads,
               .kv_types = params.kv_types};
  if (!decision.gpu_part) {
    out.placement_note = decision.note.empty() ? std::string("no GPU: everything runs on the CPU") : decision.note;
    out.placement_note += "; the GPU knobs (-ngl, -ncmoe, -cmoe) collapse to CPU only (-ngl 0)";
    return out;
  }
  const ArchInfo* arch = find_arch(hp.arch);
  CHECK(arch != nullptr);  // read_hparams accepted the architecture
  std::vector<PlanTensor> tensors = inspect::plan_tensors(header, inspect::summarize(header));
  out.gpu_budget_bytes = decision.params.vram_budget_bytes;  // free − margin
  // fit_plan again for its numbers (-ngl / -ncmoe as counts); the same inputs give the same choice.
  ASSIGN_OR_RETURN(FitResult fit, fit_plan(hp, *arch, tensors, decision.params,
                                           out.gpu_budget_bytes + params.fit_margin_mib * kMiB,
                                           params.fit_margin_mib * kMiB));
  out.space.gpu = true;
  out.space.fit_n_gpu_layers = fit.n_gpu_layers;
  out.space.fit_n_cpu_moe = fit.n_cpu_moe;
  out.fit_flags = fit.flags;
  out.placement_note = fmt::format("--fit chose {} ({}); tune measures it against its neighbours", fit.flags, fit.choice);
  // The plan's inputs are copied into the test: it outlives this function's locals.
  out.space.fits = [hp, arch, tensors = std::move(tensors), base = decision.params,
                    gpu_budget = out.gpu_budget_bytes](const Candidate& c) {
    PlanParams pp = base;
    pp.n_gpu_layers = c.n_gpu_layers;
    pp.n_cpu_moe = c.n_cpu_moe;
    pp.cpu_moe = false;
    pp.n_ubatch = c.n_ubatch;
    pp.type_k = c.type_kv;
    pp.type_v = c.type_kv;
    pp.vram_budget_bytes = gpu_budget;
    auto plan = make_plan(hp, *arch, tensors, pp);
    return plan.is_ok() && plan->fits.value_or(true);
  };
  return out;
}

}  // namespace moetier::tune
