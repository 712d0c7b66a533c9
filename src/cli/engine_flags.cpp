// The llama.cpp-compatible flags of the commands that run a model (run, chat, serve, logits,
// tokenize, eval), bound to the engine's option structs.
#include "cli/engine_flags.h"

#include <cstdio>

#include <fmt/format.h>

#include "gpu/gpu.h"

namespace moetier {

void add_engine_flags(ArgParser& p, EngineOptions& f) {
  p.section("model and context");
  p.option({"-m", "--model"}, "FILE", "GGUF model file", &f.model_path);
  p.option({"-c", "--ctx-size"}, "N", "context size in tokens (default 4096; 0 = the model's own)", &f.n_ctx);
  p.option({"-t", "--threads"}, "N",
           "CPU threads (default: one per performance core on a hybrid CPU, pinned there; else one per physical core)",
           &f.n_threads);
  add_cpu_set_flags(p, f.cpu_mask, f.cpu_strict);
  p.option({"--cpu-isa"}, "TIER",
           "use CPU kernels up to this ISA: auto (default), avx512, avx2 (with AVX-VNNI where present), avx2-novnni, "
           "scalar; e.g. avx2 measures a laptop CPU's path on an AVX-512 machine",
           [](std::string_view) { return Status::ok(); });  // applied by main() before anything runs
  p.option({"-b", "--batch-size"}, "N",
           "logical batch size (default 2048): as in llama.cpp, a micro-batch holds at most min(-b, -ub) tokens "
           "(and a server step at most that many)",
           &f.n_batch);
  p.option({"-ub", "--ubatch-size"}, "N", "tokens per forward micro-batch (default 512)", &f.n_ubatch);
  p.option({"-ctk", "--cache-type-k"}, "TYPE", "KV cache type for K: f32, f16, q8_0 or q4_0 (default f16)", &f.cache_type_k);
  p.option({"-ctv", "--cache-type-v"}, "TYPE", "KV cache type for V: f32, f16, q8_0 or q4_0 (default f16)", &f.cache_type_v);
  p.flag({"--no-mmap"}, &f.no_mmap, "read the model into RAM instead of mapping it (recommended with CPU experts)");
  p.flag({"--mlock"}, &f.mlock, "lock the model in RAM");
  p.option({"--expert-pages"}, "auto|huge|file",
           "with mmap, where the weights the CPU computes with (routed experts and dense) live: auto (default) moves "
           "them into transparent huge pages "
           "when RAM allows (--no-mmap's decode speed; 4 KiB file pages can make generation ~40% slower), huge "
           "always moves them (error when they cannot fit), file keeps them in the file mapping",
           [&f](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(f.expert_pages, gguf::parse_expert_pages(v));
             return Status::ok();
           });
  p.option({"--ram-budget"}, "MiB",
           "RAM the model may fill (default: the available memory at load less a reserve of max(1 GiB, RAM/32)); "
           "when the CPU's routed experts do not fit, as many as fit stay in RAM as a cache and the rest are read "
           "from the file when a token routes to them (direct reads, the next layer's experts read ahead)",
           &f.ram_budget_mib);
  p.option({"--expert-cache-policy"}, "lru|lfu",
           "which cached expert a read replaces when experts are read from the file: lru (default, the one used "
           "longest ago) or lfu (the least used, counts halved every 16 tokens)",
           &f.expert_cache_policy);
  p.option({"-fa", "--flash-attn"}, "on|off|auto",
           "CPU attention: on/auto (default) = flash attention (K/V tiles, online softmax: memory independent of "
           "the context depth), off = the exact kernel (converts the whole KV prefix to f32 per step); GPU layers "
           "use their own kernels",
           &f.flash_attn);
  p.flag({"-v", "--verbose"}, &f.verbose, "more detail on stderr");
  p.section("placement (llama.cpp spelling; Vulkan GPU backend)");
  p.option({"-ngl", "--n-gpu-layers", "--gpu-layers"}, "N|all",
           "layers on the GPU, counted from the output layer (default: --fit decides)", &f.n_gpu_layers);
  p.option({"-ncmoe", "--n-cpu-moe"}, "N", "keep the routed experts of the first N layers on the CPU", &f.n_cpu_moe);
  p.flag({"-cmoe", "--cpu-moe"}, &f.cpu_moe, "keep all routed experts on the CPU");
  p.option({"-ot", "--override-tensor"}, "REGEX=DEV", "place tensors matching REGEX on DEV: CPU or GPU0 (repeatable)",
           &f.override_tensor);
  p.option({"-dev", "--device"}, "N", "Vulkan device to use (see --list-devices; default: the first hardware GPU)",
           &f.device);
  p.flag({"--list-devices"}, &f.list_devices, "list the Vulkan devices and exit");
  p.option({"--fit"}, "on|off|auto",
           "choose the placement for the GPU's free memory less --fit-margin: everything on the GPU if it fits, else "
           "the dense part there plus the routed experts of as many of the last layers as fit (-ngl all -ncmoe N; "
           "-ngl all -cmoe keeps every expert on the CPU), else the CPU (default auto: when a hardware GPU is "
           "present and no -ngl/-ncmoe/-cmoe/-ot is given)",
           &f.fit);
  p.option({"--fit-margin"}, "MiB", "GPU memory --fit keeps free (default 1536, the headroom users' laptops needed)",
           &f.fit_margin_mib);
  p.option({"--vram-budget"}, "MiB", "plan for a GPU of this size (a big GPU behaves like a small one)",
           &f.vram_budget_mib);
  p.flag({"-nr", "--no-repack"}, &f.no_repack,
         "keep the weights in the file's row layout (default: the routed experts and the K-quant attention, "
         "DeltaNet, shared-expert and LM-head matrices of CPU layers in RAM this process owns, --no-mmap's or "
         "--expert-pages' huge-page copy, are repacked at load into the 8-row groups the tile kernels read as they "
         "are; needs AVX2)");
  p.flag({"--no-op-offload"}, &f.no_op_offload,
         "never stream CPU-resident experts to the GPU for prompt batches (default: when measured faster)");
  p.option({"--gpu-expert-cache"}, "MiB",
           "VRAM for copies of recently routed experts of the GPU layers whose experts stay on the CPU: a step "
           "computes the tokens' experts that have a copy on the GPU while the CPU computes the rest, and experts "
           "that missed are copied while copies measurably pay (default: what the GPU has free beyond the plan, "
           "--fit-margin and the prompt streaming area, on a hardware GPU; 0 = none)",
           [&f](std::string_view v) -> Status {
             ASSIGN_OR_RETURN(f.gpu_expert_cache_mib, parse_int(v, "flag '--gpu-expert-cache'"));
             if (f.gpu_expert_cache_mib < 0) return Status::bad_input("--gpu-expert-cache must not be negative");
             return Status::ok();
           });
  p.option({"--gpu-kernels"}, "fast|exact",
           "GPU kernels: fast (default) or exact, the reference kernels that reproduce the CPU's arithmetic "
           "(slow; for verification)",
           [&f](std::string_view v) {
             if (v != "fast" && v != "exact") {
               return Status::bad_input(fmt::format("--gpu-kernels takes fast or exact, not '{}'", v));
             }
             f.gpu_kernels = std::string(v);
             return Status::ok();
           });
}

void add_sampling_flags(ArgParser& p, SamplerParams& s) {
  p.section("sampling (llama.cpp's order: penalties, top-k, top-p, min-p, temperature)");
  p.option({"--temp", "--temperature"}, "T", "temperature; 0 = greedy (default 0.8)", &s.temperature);
  p.option({"--top-k"}, "N", "top-k; 0 = off (default 40)", [&s](std::string_view v) {
    auto r = parse_int(v, "flag '--top-k'");
    if (!r) return r.status();
    s.top_k = static_cast<int32_t>(*r);
    return Status::ok();
  });
  p.option({"--top-p"}, "P", "top-p; 1 = off (default 0.95)", &s.top_p);
  p.option({"--min-p"}, "P", "min-p; 0 = off (default 0.05)", &s.min_p);
  p.option({"--repeat-penalty"}, "X", "repeat penalty; 1 = off (default 1.0)", &s.repeat_penalty);
  p.option({"--repeat-last-n"}, "N", "penalty window in tokens (default 64)", [&s](std::string_view v) {
    auto r = parse_int(v, "flag '--repeat-last-n'");
    if (!r) return r.status();
    s.repeat_last_n = static_cast<int32_t>(*r);
    return Status::ok();
  });
  p.option({"--presence-penalty"}, "X", "presence penalty (default 0)", &s.presence_penalty);
  p.option({"--frequency-penalty"}, "X", "frequency penalty (default 0)", &s.frequency_penalty);
  p.option({"-s", "--seed"}, "N", "RNG seed (default: random)", [&s](std::string_view v) {
    auto r = parse_int(v, "flag '--seed'");
    if (!r) return r.status();
    s.seed = static_cast<uint32_t>(*r);
    return Status::ok();
  });
}

void add_spec_flags(ArgParser& p, SpecOptions& f) {
  p.section("speculative decoding (the output is the same as without it; docs/speculative.md)");
  p.option({"--spec-type"}, "TYPE",
           "none | ngram-simple | ngram-mod | draft-mtp | draft-simple (default none; -md sets it from the file): "
           "draft-mtp drafts with the model's own MTP layer, draft-simple with a draft model (-md), the n-gram types "
           "by continuing earlier text",
           &f.type);
  const auto int_flag = [&p](std::vector<std::string> names, const char* meta, const char* help, int32_t* out) {
    const std::string name = names.front();
    p.option(std::move(names), meta, help, [out, name](std::string_view v) {
      auto r = parse_int(v, fmt::format("flag '{}'", name));
      if (!r) return r.status();
      *out = static_cast<int32_t>(*r);
      return Status::ok();
    });
  };
  int_flag({"--spec-draft-n-max", "--draft-max", "--draft", "--draft-n"}, "N",
           "tokens drafted per step at most (default 3); the controller may draft fewer", &f.params.n_max);
  int_flag({"--spec-draft-n-min", "--draft-min", "--draft-n-min"}, "N",
           "draft at least N tokens when drafting at all (default 0)", &f.params.n_min);
  p.option({"--spec-adaptive"}, "on|off",
           "choose the draft length from the measured acceptance and verify cost, drafting nothing when that is "
           "faster (default on); off: always --spec-draft-n-max",
           [&f](std::string_view v) {
             if (v != "on" && v != "off") return Status::bad_input("flag '--spec-adaptive': give on or off");
             f.params.adaptive = v == "on";
             return Status::ok();
           });
  int_flag({"--spec-ngram-simple-size-n"}, "N", "ngram-simple: length of the looked-up n-gram (default 12)",
           &f.params.ngram_size_n);
  int_flag({"--spec-ngram-simple-size-m"}, "N", "ngram-simple: tokens proposed after a match, at most (default 48)",
           &f.params.ngram_size_m);
  int_flag({"--spec-ngram-simple-min-hits"}, "N", "ngram-simple: occurrences needed to propose (default 1)",
           &f.params.ngram_min_hits);
  int_flag({"--spec-ngram-mod-n-match"}, "N", "ngram-mod: length of the hashed n-gram (default 24)",
           &f.params.ngram_mod_n_match);
  int_flag({"--spec-ngram-mod-n-min"}, "N", "ngram-mod: draft at least N tokens or none (default 48)",
           &f.params.ngram_mod_n_min);
  int_flag({"--spec-ngram-mod-n-max"}, "N", "ngram-mod: draft at most N tokens (default 64)",
           &f.params.ngram_mod_n_max);
  p.option({"-md", "--spec-draft-model", "--model-draft"}, "FILE",
           "a draft model of the same vocabulary (draft-simple), or an MTP-only GGUF (llama.cpp's converter with "
           "--mtp) as the draft-mtp head; the type follows from the file when --spec-type is not given",
           &f.draft_model);
  int_flag({"-ngld", "--spec-draft-ngl", "--gpu-layers-draft", "--n-gpu-layers-draft"}, "N",
           "draft-simple: the draft model's last N layers on the model's GPU, counting its LM head as one "
           "(llama.cpp's numbering; -1: all; default 0)",
           &f.draft_gpu_layers);
  p.option({"--spec-draft-p-min", "--draft-p-min"}, "P",
           "draft-mtp / draft-simple: stop a draft at a token the drafter gives less than P (default 0)",
           [&f](std::string_view v) {
             auto r = parse_double(v, "flag '--spec-draft-p-min'");
             if (!r) return r.status();
             f.params.p_min = *r;
             f.p_min_given = true;
             return Status::ok();
           });
}


int print_gpu_devices(bool verbose) {
  auto devices = list_gpu_devices();
  if (!devices) {
    std::printf("no GPU: %s\n", devices.status().message().c_str());
    return 0;
  }
  if (devices->empty()) std::printf("no Vulkan devices\n");
  for (const auto& d : *devices) {
    std::printf("%s\n", d.description.c_str());
    if (verbose) std::fputs(d.details.c_str(), stdout);
  }
  return 0;
}


}  // namespace moetier
