#include "engine/session.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/format.h"
#include "engine/cpu_threads.h"
#include "engine/expert_streaming.h"
#include "engine/placement.h"
#include "engine/repack.h"
#include "platform/cpu.h"

namespace moetier {

Result<DType> parse_cache_type(const std::string& name, const char* flag) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "q8_0") return DType::Q8_0;
  if (name == "q4_0") return DType::Q4_0;
  return Status::bad_input(
      fmt::format("{}: KV cache type '{}' is not supported (supported: f32, f16, q8_0, q4_0)", flag, name));
}

Result<Session> open_session(const EngineOptions& flags, const SessionOptions& options) {
  LoadReporter* report = options.reporter;
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
  s.reporter = report;
  gguf::LoadOptions load{.mode = flags.no_mmap ? gguf::LoadMode::kRead : gguf::LoadMode::kMmap,
                         .mlock = flags.mlock,
                         .progress = report != nullptr,
                         .verbose = report != nullptr && options.need_model,
                         .expert_pages = flags.expert_pages};
  // The placement comes first, from the header: the experts it keeps on the CPU are the ones
  // the load moves into huge-page memory (GPU-resident ones are uploaded and then never read
  // on the host, so copying them would be wasted time).
  std::optional<PlacementDecision> placement;
  ExpertStreamingPlan streaming;  // the CPU's experts that stay in the file (engine/expert_streaming.h)
  ASSIGN_OR_RETURN(const ExpertCachePolicy cache_policy, parse_expert_cache_policy(flags.expert_cache_policy));
  if (flags.ram_budget_mib < 0) return Status::bad_input("--ram-budget must not be negative");
  std::vector<std::string> repack;  // weights to repack after the load (engine/repack.h)
  if (options.need_model) {
    auto hp = read_hparams(header);
    if (!hp) return hp.status().with_context(flags.model_path);
    const ArchInfo* info = find_arch(hp->arch);
    if (!info || !info->create_model) {
      return Status::bad_input(fmt::format("architecture '{}' can be inspected but not run yet", hp->arch))
          .with_context(flags.model_path);
    }
    const int64_t n_ctx = flags.n_ctx == 0 ? hp->n_ctx_train : flags.n_ctx;
    if (report && hp->n_ctx_train > 0 && n_ctx > hp->n_ctx_train) {
      // As llama.cpp: allowed, with a warning; positions past the training length may degrade.
      report->note(fmt::format("warning: -c {} is above the model's training context of {} tokens; output past {} "
                               "tokens may degrade",
                               n_ctx, hp->n_ctx_train, hp->n_ctx_train));
    }
    s.n_ctx = n_ctx;
    s.kv = {.n_ctx = n_ctx, .type_k = type_k, .type_v = type_v};
    ASSIGN_OR_RETURN(placement, plan_session(header, *hp, flags, options, s.kv));
    if (!flags.no_repack) repack = repack_candidates(header, *hp, *placement);
    const std::vector<std::string> cpu_tensors = cpu_weight_tensors(header, *hp, placement->plan);
    const uint64_t working_bytes = cpu_working_bytes(placement->plan);
    if (load.mode == gguf::LoadMode::kMmap) {
      load.expert_tensors = cpu_tensors;
      load.working_bytes = working_bytes;
    }
    ASSIGN_OR_RETURN(streaming, plan_expert_streaming(header, *hp,
                                                      {.cpu_tensors = cpu_tensors,
                                                       .working_bytes = static_cast<int64_t>(working_bytes),
                                                       .expert_pages = flags.expert_pages,
                                                       .ram_budget_mib = flags.ram_budget_mib,
                                                       .repack = !flags.no_repack}));
    exclude_streamed_from_load(streaming, load, repack);
    if (report && streaming.tiers.stream) report->note(streaming.tiers.summary);
  }
  // The pool's threads and CPUs (engine/cpu_threads.h); -t 0 or below: the default, as llama.cpp's -t -1.
  ASSIGN_OR_RETURN(s.cpu_threads, choose_cpu_threads(platform::cpu_topology(), platform::usable_cpus(),
                                                     {.threads = std::max(0, flags.n_threads),
                                                      .mask = flags.cpu_mask,
                                                      .strict = flags.cpu_strict}));
  const int threads = s.cpu_threads.threads;
  load.copy_threads = std::min(threads, 4);
  ASSIGN_OR_RETURN(s.file, gguf::ModelFile::open(flags.model_path, std::move(header), load));
  if (report && !s.file->stats().expert_pages_note.empty()) report->note(s.file->stats().expert_pages_note);
  if (const RepackResult r = repack_weights(*s.file, repack, load.copy_threads); report && !r.note.empty()) {
    report->note(r.note);
  }
  if (streaming.tiers.stream) {
    ASSIGN_OR_RETURN(s.experts, open_expert_store(*s.file, read_hparams(s.file->header()).value(), streaming,
                                                  {.policy = cache_policy,
                                                   .repack = !flags.no_repack,
                                                   .mlock = flags.mlock,
                                                   .progress = report != nullptr}));
    if (report) {
      report->note(fmt::format("expert cache: {} in {} slots, filled in {:.1f} s; {} eviction, reads ahead from the "
                               "next layer's router",
                               format_bytes(s.experts->slot_bytes()), s.experts->experts_in_memory(),
                               s.experts->fill_seconds(), expert_cache_policy_name(cache_policy)));
    }
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
  RETURN_IF_ERROR(apply_cpu_threads(*s.pool, s.cpu_threads));
  if (s.experts) s.model->attach_experts(*s.experts);
  if (report) {
    report->note(fmt::format("{} ({}, {} layers), ctx {}, {} threads, cpu {}", hp.name, hp.arch, hp.n_layer, s.n_ctx,
                             threads, cpu_features().describe()));
    if (s.cpu_threads.pin || s.cpu_threads.hybrid) report->note(describe_cpu_threads(s.cpu_threads));
  }
  RETURN_IF_ERROR(place_model(s, std::move(*placement), options));
  if (options.need_sequence) {
    ASSIGN_OR_RETURN(SequenceState seq, s.model->new_sequence(s.kv));
    s.sequence = std::move(seq);
  }
  return s;
}

}  // namespace moetier
