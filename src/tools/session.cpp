#include "tools/session.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/progress.h"
#include "model/gpu_backend.h"
#include "runtime/draft_model_drafter.h"
#include "runtime/mtp_drafter.h"
#include "tools/repack.h"

namespace moetier {

void add_engine_flags(ArgParser& p, EngineFlags& f) {
  p.section("model and context");
  p.option({"-m", "--model"}, "FILE", "GGUF model file", &f.model_path);
  p.option({"-c", "--ctx-size"}, "N", "context size in tokens (default 4096; 0 = the model's own)", &f.n_ctx);
  p.option({"-t", "--threads"}, "N", "CPU threads (default: physical cores)", &f.n_threads);
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
  p.option({"--fit-margin"}, "MiB", "GPU memory --fit keeps free (default 1536, the headroom the seeds needed)",
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

void add_spec_flags(ArgParser& p, SpecFlags& f) {
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

Status check_spec_flags(SpecFlags& f) {
  if (f.checked) return Status::ok();  // resolved already (the type and ngram-mod's lengths are set)
  if (f.draft_gpu_layers < -1) return Status::bad_input("-ngld must be -1 (all), 0 or more");
  if (!f.draft_model.empty()) {
    // llama.cpp infers the type from the draft file's metadata when none is given: an
    // MTP-only GGUF drafts with draft-mtp, any other model with draft-simple.
    // Opened once here (mapped, nothing read but the header) and kept for the drafter.
    ASSIGN_OR_RETURN(auto file, gguf::ModelFile::open(f.draft_model, {.mode = gguf::LoadMode::kMmap, .verbose = false}));
    f.draft_file = std::move(file);
    const gguf::GgufFile& header = f.draft_file->header();
    ASSIGN_OR_RETURN(const HParams hp, read_hparams(header));
    const bool mtp_only = hp.n_layer_mtp > 0 && header.find_tensor("blk.0.attn_norm.weight") == nullptr;
    if (f.type == "none") f.type = mtp_only ? "draft-mtp" : "draft-simple";
    if (f.type == "draft-mtp" && hp.n_layer_mtp == 0) {
      return Status::bad_input(fmt::format("-md {} has no MTP layer: use it with --spec-type draft-simple", f.draft_model));
    }
    if (f.type == "draft-simple" && mtp_only) {
      return Status::bad_input(fmt::format("-md {} is an MTP-only draft: it needs --spec-type draft-mtp", f.draft_model));
    }
    if (f.type != "draft-mtp" && f.type != "draft-simple") {
      return Status::bad_input(
          fmt::format("-md {}: a draft file needs --spec-type draft-simple or draft-mtp, not {}", f.draft_model, f.type));
    }
  }
  auto type = parse_spec_type(f.type);
  if (!type) return type.status();
  f.params.type = *type;
  RETURN_IF_ERROR(validate(f.params));
  if (*type == SpecType::kNone) {
    // Draft settings without drafting would be accepted and ignored: say so instead.
    const SpecParams d;
    const SpecParams& p = f.params;
    if (p.n_max != d.n_max || p.n_min != d.n_min || p.adaptive != d.adaptive || p.ngram_size_n != d.ngram_size_n ||
        p.ngram_size_m != d.ngram_size_m || p.ngram_min_hits != d.ngram_min_hits || f.p_min_given ||
        p.ngram_mod_n_match != d.ngram_mod_n_match || p.ngram_mod_n_min != d.ngram_mod_n_min ||
        p.ngram_mod_n_max != d.ngram_mod_n_max) {
      return Status::bad_input("speculative-decoding settings were given without --spec-type (e.g. draft-mtp)");
    }
  }
  {
    // A drafter's own settings given for another drafter would be accepted and ignored.
    const SpecParams d;
    const SpecParams& p = f.params;
    const bool simple_set = p.ngram_size_n != d.ngram_size_n || p.ngram_size_m != d.ngram_size_m ||
                            p.ngram_min_hits != d.ngram_min_hits;
    const bool mod_set = p.ngram_mod_n_match != d.ngram_mod_n_match || p.ngram_mod_n_min != d.ngram_mod_n_min ||
                         p.ngram_mod_n_max != d.ngram_mod_n_max;
    if (simple_set && *type != SpecType::kNgramSimple) {
      return Status::bad_input("--spec-ngram-simple-* settings apply to --spec-type ngram-simple");
    }
    if (mod_set && *type != SpecType::kNgramMod) {
      return Status::bad_input("--spec-ngram-mod-* settings apply to --spec-type ngram-mod");
    }
  }
  if (*type == SpecType::kNgramMod) {
    // ngram-mod drafts n_min..n_max tokens of its own (llama.cpp's 48..64), not the general
    // draft length: say so rather than ignore --spec-draft-n-max/-n-min.
    const SpecParams d;
    if (f.params.n_max != d.n_max || f.params.n_min != d.n_min) {
      return Status::bad_input(
          "--spec-type ngram-mod sets its draft length with --spec-ngram-mod-n-min/-n-max, not --spec-draft-n-max/-n-min");
    }
    f.params.n_max = f.params.ngram_mod_n_max;
    f.params.n_min = f.params.ngram_mod_n_min;
  }
  if (f.draft_gpu_layers != 0 && *type != SpecType::kDraftSimple) {
    return Status::bad_input("-ngld places a draft model (--spec-type draft-simple with -md); it has nothing to place here");
  }
  if (*type == SpecType::kDraftSimple && f.draft_model.empty()) {
    return Status::bad_input("--spec-type draft-simple needs a draft model: -md FILE");
  }
  if (f.p_min_given && *type != SpecType::kDraftMtp && *type != SpecType::kDraftSimple) {
    return Status::bad_input(
        "--spec-draft-p-min applies to --spec-type draft-mtp and draft-simple (an n-gram draft has no probability)");
  }
  f.checked = true;
  return Status::ok();
}

namespace {

Status draft_mismatch(const SpecFlags& f, const char* what, const auto& draft, const auto& model) {
  return Status::bad_input(
      fmt::format("-md {}: the draft's {} ({}) differs from the model's ({})", f.draft_model, what, draft, model));
}

// Checks that the -md file (opened once by check_spec_flags; the server's slots share it)
// speaks the target's vocabulary: the same size and, when both files carry them, the same token strings.
Result<HParams> open_draft(SpecFlags& f, Session& session) {
  CHECK_MSG(f.draft_file != nullptr, "-md {} was not opened by check_spec_flags", f.draft_model);
  const gguf::GgufFile& draft = f.draft_file->header();
  ASSIGN_OR_RETURN(HParams hp, read_hparams(draft));
  const HParams& target = session.model->hparams();
  if (hp.n_vocab != target.n_vocab) return draft_mismatch(f, "vocabulary size", hp.n_vocab, target.n_vocab);
  const gguf::Value* a = draft.find("tokenizer.ggml.tokens");
  const gguf::Value* b = session.file->header().find("tokenizer.ggml.tokens");
  if (a && b && a->arr_s != b->arr_s) {
    return Status::bad_input(fmt::format("-md {}: the draft's vocabulary differs from the model's (token strings)",
                                         f.draft_model));
  }
  return hp;
}

// -ngld N: the draft's last N of its n_layer + 1 layers (the LM head counted first, as -ngl
// does) on the model's GPU, experts included; an error when the model has no GPU part.
Status place_draft_on_gpu(SpecFlags& f, Session& session) {
  if (session.gpu_device < 0) {
    return Status::bad_input("-ngld: the model runs on the CPU here (no GPU part), so the draft cannot go to a GPU");
  }
  const int64_t n_layer = f.draft->hparams().n_layer;
  const int64_t n_gpu = f.draft_gpu_layers < 0 ? n_layer + 1 : std::min<int64_t>(f.draft_gpu_layers, n_layer + 1);
  GpuPlacement p{.device = session.gpu_device, .progress = false};
  for (int64_t il = 0; il < n_layer; ++il) p.layer_on_gpu.push_back(il >= n_layer + 1 - n_gpu);
  p.experts_on_gpu = p.layer_on_gpu;
  p.output_on_gpu = n_gpu > 0;
  RETURN_IF_ERROR(f.draft->place_on_gpu(p).with_context("-ngld: placing the draft model on the GPU"));
  const auto m = f.draft->gpu_memory();
  std::fprintf(stderr, "moetier: draft model: %lld of %lld layers on the GPU (%s of weights)\n",
               static_cast<long long>(n_gpu), static_cast<long long>(n_layer + 1),
               m ? format_bytes(m->weight_bytes).c_str() : "?");
  return Status::ok();
}

// The MTP head of the -md file, checked against the target: same architecture and widths too.
Result<std::unique_ptr<MtpHead>> draft_mtp_head(SpecFlags& f, Session& session) {
  ASSIGN_OR_RETURN(const HParams hp, open_draft(f, session));
  const HParams& target = session.model->hparams();
  if (hp.arch != target.arch) return draft_mismatch(f, "architecture", hp.arch, target.arch);
  if (hp.n_embd != target.n_embd) return draft_mismatch(f, "embedding width", hp.n_embd, target.n_embd);
  if (hp.n_head != target.n_head || hp.n_head_kv != target.n_head_kv || hp.head_dim_k != target.head_dim_k) {
    return draft_mismatch(f, "attention shape", fmt::format("{}/{}x{}", hp.n_head, hp.n_head_kv, hp.head_dim_k),
                          fmt::format("{}/{}x{}", target.n_head, target.n_head_kv, target.head_dim_k));
  }
  const ArchInfo* arch = find_arch(hp.arch);
  if (!arch || !arch->create_mtp_head) {
    return Status::bad_input(fmt::format("-md {}: architecture '{}' has no MTP head", f.draft_model, hp.arch));
  }
  return arch->create_mtp_head(f.draft_file, hp,
                               {.n_ubatch = session.model->n_ubatch(), .flash_attention = session.model->flash_attention()});
}

}  // namespace

Result<std::unique_ptr<Speculator>> make_speculator(SpecFlags& f, Session& session) {
  return make_speculator(f, session, session.kv);
}

Result<std::unique_ptr<Speculator>> make_speculator(SpecFlags& f, Session& session, const KvCacheOptions& cache) {
  RETURN_IF_ERROR(check_spec_flags(f));
  Model& model = *session.model;
  ThreadPool& pool = *session.pool;
  switch (f.params.type) {
    case SpecType::kNone:
    case SpecType::kReplay: return std::unique_ptr<Speculator>{};
    case SpecType::kNgramSimple:
      return std::make_unique<Speculator>(f.params, std::make_unique<NgramSimpleDrafter>(f.params));
    case SpecType::kNgramMod:
      return std::make_unique<Speculator>(f.params, std::make_unique<NgramModDrafter>(f.params));
    case SpecType::kDraftSimple: {
      RETURN_IF_ERROR(open_draft(f, session).status());
      if (!f.draft) {
        ASSIGN_OR_RETURN(auto loaded, load_model(*f.draft_file, {.n_ubatch = model.n_ubatch(),
                                                               .flash_attention = model.flash_attention()}));
        f.draft = std::move(loaded);
        if (f.draft_gpu_layers != 0) RETURN_IF_ERROR(place_draft_on_gpu(f, session));
      }
      uint64_t bytes = 0;
      for (const auto& t : f.draft_file->header().tensors) bytes += t.n_bytes;
      ASSIGN_OR_RETURN(auto drafter, DraftModelDrafter::create(f.draft, cache, f.params.p_min, bytes, pool));
      return std::make_unique<Speculator>(f.params, std::move(drafter));
    }
    case SpecType::kDraftMtp: {
      if (!f.draft_model.empty()) {
        ASSIGN_OR_RETURN(auto head, draft_mtp_head(f, session));
        ASSIGN_OR_RETURN(auto drafter, MtpDrafter::create(std::move(head), model, cache, f.params.p_min, pool));
        return std::make_unique<Speculator>(f.params, std::move(drafter));
      }
      ASSIGN_OR_RETURN(auto drafter, MtpDrafter::create(model, cache, f.params.p_min, pool));
      return std::make_unique<Speculator>(f.params, std::move(drafter));
    }
  }
  return std::unique_ptr<Speculator>{};
}

SessionOptions spec_session_options(const SpecFlags& f, SessionOptions options) {
  if (f.params.type == SpecType::kNone) return options;
  options.use_mtp = f.params.type == SpecType::kDraftMtp && f.draft_model.empty();
  options.journal_tokens = f.params.n_max + 1;
  return options;
}

Status prepare_speculation(const Speculator* speculator, SequenceState& sequence) {
  if (speculator == nullptr || !sequence.has_recurrent_state()) return Status::ok();
  RETURN_IF_ERROR(sequence.begin_journal(speculator->params().n_max + 1));
  sequence.end_journal();
  return Status::ok();
}

Result<DType> parse_cache_type(const std::string& name, const char* flag) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "q8_0") return DType::Q8_0;
  if (name == "q4_0") return DType::Q4_0;
  return Status::bad_input(
      fmt::format("{}: KV cache type '{}' is not supported (supported: f32, f16, q8_0, q4_0)", flag, name));
}

int print_gpu_devices() {
  auto devices = list_gpu_devices();
  if (!devices) {
    std::printf("no GPU: %s\n", devices.status().message().c_str());
    return 0;
  }
  if (devices->empty()) std::printf("no Vulkan devices\n");
  for (const auto& d : *devices) std::printf("%s\n", d.description.c_str());
  return 0;
}

Result<Session> open_session(const EngineFlags& flags, const SessionOptions& options) {
  if (flags.model_path.empty()) return Status::bad_input("no model given (-m FILE)");
  if (flags.n_ubatch <= 0) return Status::bad_input("-ub must be positive");
  if (flags.n_batch <= 0) return Status::bad_input("-b must be positive");
  if (flags.n_ctx < 0) return Status::bad_input("-c must not be negative");
  ASSIGN_OR_RETURN(DType type_k, parse_cache_type(flags.cache_type_k, "-ctk"));
  ASSIGN_OR_RETURN(DType type_v, parse_cache_type(flags.cache_type_v, "-ctv"));
  if (flags.flash_attn != "on" && flags.flash_attn != "off" && flags.flash_attn != "auto") {
    return Status::bad_input(fmt::format("-fa: '{}' is not one of on, off, auto", flags.flash_attn));
  }

  ASSIGN_OR_RETURN(gguf::GgufFile header, gguf::read_header(flags.model_path));
  Session s;
  gguf::LoadOptions load{.mode = flags.no_mmap ? gguf::LoadMode::kRead : gguf::LoadMode::kMmap,
                         .mlock = flags.mlock,
                         .progress = !options.quiet,
                         .verbose = !options.quiet && options.need_model,
                         .expert_pages = flags.expert_pages};
  // The placement comes first, from the header: the experts it keeps on the CPU are the ones
  // the load moves into huge-page memory (GPU-resident ones are uploaded and then never read
  // on the host, so copying them would be wasted time).
  std::optional<PlacementDecision> placement;
  std::vector<std::string> repack;  // weights to repack after the load (tools/repack.h)
  if (options.need_model) {
    auto hp = read_hparams(header);
    if (!hp) return hp.status().with_context(flags.model_path);
    const ArchInfo* info = find_arch(hp->arch);
    if (!info || !info->create_model) {
      return Status::bad_input(fmt::format("architecture '{}' can be inspected but not run yet", hp->arch))
          .with_context(flags.model_path);
    }
    const int64_t n_ctx = flags.n_ctx == 0 ? hp->n_ctx_train : flags.n_ctx;
    if (hp->n_ctx_train > 0 && n_ctx > hp->n_ctx_train) {
      // As llama.cpp: allowed, with a warning; positions past the training length may degrade.
      std::fprintf(stderr,
                   "moetier: warning: -c %lld is above the model's training context of %lld tokens; output past "
                   "%lld tokens may degrade\n",
                   static_cast<long long>(n_ctx), static_cast<long long>(hp->n_ctx_train),
                   static_cast<long long>(hp->n_ctx_train));
    }
    s.n_ctx = n_ctx;
    s.kv = {.n_ctx = n_ctx, .type_k = type_k, .type_v = type_v};
    ASSIGN_OR_RETURN(placement, plan_session(header, *hp, flags, options, s.kv));
    if (!flags.no_repack) repack = repack_candidates(header, *hp, *placement);
    if (load.mode == gguf::LoadMode::kMmap) {
      load.expert_tensors = cpu_weight_tensors(header, *hp, placement->plan);
      load.working_bytes = cpu_working_bytes(placement->plan);
    }
  }
  const int threads = flags.n_threads > 0 ? flags.n_threads : cpu_features().physical_cores;
  load.copy_threads = std::min(threads, 4);
  ASSIGN_OR_RETURN(s.file, gguf::ModelFile::open(flags.model_path, std::move(header), load));
  if (!options.quiet && !s.file->stats().expert_pages_note.empty()) {
    std::fprintf(stderr, "moetier: %s\n", s.file->stats().expert_pages_note.c_str());
  }
  if (const RepackResult r = repack_weights(*s.file, repack, load.copy_threads); !options.quiet && !r.note.empty()) {
    std::fprintf(stderr, "moetier: %s\n", r.note.c_str());
  }
  auto tok = text::Tokenizer::from_gguf(s.file->header());
  if (!tok) return tok.status().with_context(flags.model_path);
  s.tokenizer = std::move(tok).value();
  if (!options.need_model) return s;

  // llama.cpp's rule: the physical micro-batch never exceeds the logical batch.
  auto model = load_model(*s.file, {.n_ubatch = std::min(flags.n_batch, flags.n_ubatch),
                                    .flash_attention = flags.flash_attn != "off"});
  if (!model) return model.status().with_context(flags.model_path);
  s.model = std::move(model).value();
  const HParams& hp = s.model->hparams();
  if (s.tokenizer->n_vocab() != hp.n_vocab) {
    return Status::bad_input(fmt::format("{}: the tokenizer has {} tokens but the model's output has {}",
                                         flags.model_path, s.tokenizer->n_vocab(), hp.n_vocab));
  }
  s.pool = std::make_unique<ThreadPool>(threads);
  if (!options.quiet) {
    std::fprintf(stderr, "moetier: %s (%s, %lld layers), ctx %lld, %d threads, cpu %s\n", hp.name.c_str(),
                 hp.arch.c_str(), static_cast<long long>(hp.n_layer), static_cast<long long>(s.n_ctx), threads,
                 cpu_features().describe().c_str());
  }
  RETURN_IF_ERROR(place_model(s, std::move(*placement), options));
  if (options.need_sequence) {
    ASSIGN_OR_RETURN(SequenceState seq, s.model->new_sequence(s.kv));
    s.sequence = std::move(seq);
  }
  return s;
}

}  // namespace moetier
