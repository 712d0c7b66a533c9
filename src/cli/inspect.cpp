// `moetier inspect M.gguf`: what is really in a GGUF file, from its header alone (the
// tensor data is read only for --sha256). What it knows is engine/summary.h (census,
// parameter and byte counts) and engine/plan.h (memory plan); the output is
// cli/inspect_render_*.cpp and cli/inspect_plan_view.cpp.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/inspect_render.h"
#include "core/args.h"
#include "engine/plan.h"
#include "engine/summary.h"
#include "gguf/file_sha256.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "runtime/speculative.h"

namespace moetier {

namespace {

// KV-cache types llama.cpp accepts for -ctk/-ctv.
Result<DType> parse_cache_type(std::string_view value, std::string_view flag) {
  static constexpr DType kAllowed[] = {DType::F32,  DType::F16,  DType::BF16,  DType::Q8_0, DType::Q4_0,
                                       DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL};
  if (auto t = dtype_from_name(value)) {
    for (DType a : kAllowed) {
      if (a == *t) return a;
    }
  }
  return Status::bad_input(fmt::format(
      "flag '{}': '{}' is not a KV cache type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)", flag, value));
}

Result<int64_t> parse_non_negative(std::string_view value, std::string_view flag) {
  ASSIGN_OR_RETURN(const int64_t v, parse_int(value, fmt::format("flag '{}'", flag)));
  if (v < 0) return Status::bad_input(fmt::format("flag '{}' must be >= 0 (got {})", flag, v));
  return v;
}

Result<int64_t> parse_mib(std::string_view value, std::string_view flag) {
  ASSIGN_OR_RETURN(const int64_t v, parse_non_negative(value, flag));
  if (v > (int64_t{1} << 30)) return Status::bad_input(fmt::format("flag '{}': {} MiB is too large", flag, v));
  return v << 20;
}

std::string epilog() {
  return "Plan flags (-c, -ctk, -ctv, -np, -ngl, -ncmoe, -cmoe, -ub, --vram-budget, --ram-budget, --gpu-expert-cache) imply "
         "--plan.\n"
         "-c 0 (default) uses the model's training context, as llama.cpp does.\n\n"
         "examples:\n"
         "  moetier inspect model.gguf\n"
         "  moetier inspect model.gguf --json --sha256\n"
         "  moetier inspect model.gguf --plan -c 65536 -ngl all -cmoe --vram-budget 6144\n"
         "  moetier inspect model.gguf -c 65536 --fit on --vram-budget 8192\n";
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  std::string path;
  bool want_sha = false, want_json = false, want_plan = false, want_tensors = false, quiet = false;
  int64_t n_ctx = 0;
  PlanParams plan_params;
  std::string fit = "off";
  int64_t fit_margin_bytes = int64_t{1536} << 20;
  ArgParser p("inspect", "What is really in a GGUF file: identity, tensor census, architecture, memory plan.");
  p.positional("MODEL", "GGUF file", &path);
  p.flag({"--json"}, &want_json, "print one JSON object instead of the text report");
  p.flag({"--sha256"}, &want_sha, "hash the whole file (reads all of it, with a progress bar)");
  p.flag({"--tensors"}, &want_tensors, "list every tensor (name, type, shape, bytes, role)");
  p.flag({"-q", "--quiet"}, &quiet, "no progress bar");
  p.section("memory plan");
  p.flag({"--plan"}, &want_plan, "where weights, KV cache and state would live, per device");
  p.option({"-c", "--ctx-size"}, "N", "context length in tokens, all sequences (default 0: the model's)",
           [&](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(n_ctx, parse_non_negative(v, "-c"));
             return Status::ok();
           });
  p.option({"-ctk", "--cache-type-k"}, "TYPE", "KV cache type for K (default f16)", [&](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(plan_params.type_k, parse_cache_type(v, "-ctk"));
    return Status::ok();
  });
  p.option({"-ctv", "--cache-type-v"}, "TYPE", "KV cache type for V (default f16)", [&](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(plan_params.type_v, parse_cache_type(v, "-ctv"));
    return Status::ok();
  });
  p.option({"-np", "--parallel"}, "N", "parallel sequences (default 1)", &plan_params.n_seq);
  p.option({"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N|all", "layers on the GPU, counted from the output (default all)",
           [&](std::string_view v) -> Status {
             if (v == "all" || v == "auto") {
               plan_params.n_gpu_layers = -1;
               return Status::ok();
             }
             ASSIGN_OR_RETURN(plan_params.n_gpu_layers, parse_non_negative(v, "-ngl"));
             return Status::ok();
           });
  p.option({"-ncmoe", "--n-cpu-moe"}, "N", "keep the routed experts of the first N layers on the CPU",
           [&](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(plan_params.n_cpu_moe, parse_non_negative(v, "-ncmoe"));
             return Status::ok();
           });
  p.flag({"-cmoe", "--cpu-moe"}, &plan_params.cpu_moe, "keep all routed experts on the CPU");
  p.option({"-ot", "--override-tensor"}, "REGEX=DEV", "place tensors matching REGEX on DEV: CPU or GPU0 (repeatable)",
           &plan_params.override_tensor);
  p.option({"--fit"}, "on|off", "choose the plan for --vram-budget (or the first GPU's free memory) less --fit-margin: everything on the "
           "GPU if it fits, else the dense part there plus the routed experts of as many of the last layers as "
           "fit (-ngl all -ncmoe N), else the CPU", &fit);
  p.option({"--fit-margin"}, "MiB", "GPU memory --fit keeps free (default 1536)", [&](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(fit_margin_bytes, parse_mib(v, "--fit-margin"));
    return Status::ok();
  });
  p.option({"-ub", "--ubatch-size"}, "N", "tokens per compute batch, for the scratch estimate (default 512)",
           &plan_params.n_ubatch);
  p.option({"--vram-budget"}, "MiB", "GPU memory to plan for", [&](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(plan_params.vram_budget_bytes, parse_mib(v, "--vram-budget"));
    return Status::ok();
  });
  p.option({"--ram-budget"}, "MiB",
           "CPU memory to plan for; when the CPU's routed experts do not fit, the plan shows how many stay in RAM "
           "and how many are read from the file on demand (as run/serve/bench do with the same flag)", [&](std::string_view v) -> Status {
    ASSIGN_OR_RETURN(plan_params.ram_budget_bytes, parse_mib(v, "--ram-budget"));
    return Status::ok();
  });
  p.option({"--gpu-expert-cache"}, "MiB",
           "VRAM for copies of recently routed CPU experts of GPU layers (default: what --vram-budget leaves "
           "beyond the plan and the prompt streaming area; 0 = none): the plan shows the slots per layer",
           [&](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(plan_params.gpu_expert_cache_bytes, parse_mib(v, "--gpu-expert-cache"));
             return Status::ok();
           });
  // Speculative decoding's memory: the MTP block (draft-mtp) and the rollback journal.
  std::string spec_type;
  int64_t spec_draft_max = 0;
  p.option({"--spec-type"}, "TYPE",
           "plan for speculative decoding of this type (draft-mtp runs the MTP block; every type keeps a rollback "
           "journal of --spec-draft-n-max + 1 recurrent-state copies per sequence)",
           &spec_type);
  p.option({"--spec-draft-n-max", "--draft-max"}, "N", "with --spec-type: draft length (default 3; ngram-mod 64)",
           &spec_draft_max);
  p.epilog(epilog());
  if (auto st = p.parse(argc, argv); !st) return report_error(st);
  if (!spec_type.empty() || spec_draft_max != 0) {
    if (!want_plan) return report_error(Status::bad_input("--spec-type and --spec-draft-n-max apply to --plan"));
    auto type = parse_spec_type(spec_type.empty() ? "none" : spec_type);
    if (!type) return report_error(type.status());
    if (*type == SpecType::kNone) {
      return report_error(Status::bad_input("--spec-draft-n-max needs --spec-type (e.g. draft-mtp)"));
    }
    const SpecParams defaults;
    const int64_t n_max = spec_draft_max > 0 ? spec_draft_max
                          : *type == SpecType::kNgramMod ? defaults.ngram_mod_n_max
                                                         : defaults.n_max;
    if (n_max < 1 || n_max > 64) return report_error(Status::bad_input("--spec-draft-n-max must be in [1, 64]"));
    plan_params.mtp = *type == SpecType::kDraftMtp;
    plan_params.journal_tokens = n_max + 1;
  }
  if (p.help_requested()) {
    std::fputs(p.help_text().c_str(), stdout);
    return 0;
  }
  if (fit != "on" && fit != "off") return report_error(Status::bad_input(fmt::format("--fit: '{}' is not on or off", fit)));
  for (const char* flag : {"-c", "-ctk", "-ctv", "-np", "-ngl", "-ncmoe", "-cmoe", "-ub", "--vram-budget",
                           "--ram-budget", "--gpu-expert-cache", "-ot", "--fit"}) {
    if (p.given(flag)) want_plan = true;
  }

  auto file = gguf::read_header(path);
  if (!file) return report_error(file.status());
  const inspect::Summary summary = inspect::summarize(*file);

  std::optional<Plan> plan;
  std::optional<FitResult> fitted_choice;  // --fit on: what it chose, for the JSON's "fit"
  if (want_plan) {
    if (!summary.hparams) {
      const std::string why = summary.arch_info == nullptr
                                  ? fmt::format("architecture '{}' is not supported", summary.arch)
                                  : summary.hparams_error;
      return report_error(Status::bad_input(fmt::format("{}: --plan needs the model's hyper-parameters: {}", path, why)));
    }
    plan_params.n_ctx = n_ctx > 0 ? n_ctx : summary.hparams->n_ctx_train;
    const auto tensors = inspect::plan_tensors(*file, summary);
    if (fit == "on") {
      int64_t free_bytes = plan_params.vram_budget_bytes;
      if (free_bytes == 0) {
        auto devices = list_gpu_devices();
        if (!devices || devices->empty() || (*devices)[0].free_bytes == 0) {
          return report_error(Status::bad_input("--fit on: give --vram-budget MiB (no GPU memory size known here)"));
        }
        free_bytes = static_cast<int64_t>((*devices)[0].free_bytes);
      }
      auto fitted = fit_plan(*summary.hparams, *summary.arch_info, tensors, plan_params, free_bytes, fit_margin_bytes);
      if (!fitted) return report_error(fitted.status());
      plan_params = fitted->params;
      plan = std::move(fitted->plan);
      if (!want_json) std::printf("%s\n\n", fitted->choice.c_str());
      fitted_choice = std::move(fitted).value();
    } else {
      auto made = make_plan(*summary.hparams, *summary.arch_info, tensors, plan_params);
      if (!made) return report_error(made.status());
      plan = std::move(made).value();
    }
  }

  std::optional<std::string> sha;
  if (want_sha) {
    auto digest = file_sha256(path, {.progress = !quiet});
    if (!digest) return report_error(digest.status());
    sha = std::move(digest).value();
  }

  const inspect::ReportInput in{.file = *file,
                                .summary = summary,
                                .sha256 = sha,
                                .list_tensors = want_tensors,
                                .plan = plan ? &*plan : nullptr,
                                .plan_params = &plan_params};
  if (want_json) {
    nlohmann::ordered_json j = inspect::render_json(in);
    if (fitted_choice) {
      // The choice as numbers a tuner can start from (-ngl and -ncmoe as llama.cpp counts them).
      j["fit"] = {{"flags", fitted_choice->flags},
                  {"n_gpu_layers", fitted_choice->n_gpu_layers},
                  {"n_cpu_moe", fitted_choice->n_cpu_moe},
                  {"expert_layers_on_gpu", fitted_choice->expert_layers_on_gpu},
                  {"choice", fitted_choice->choice}};
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::fputs(inspect::render_text(in).c_str(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace moetier
