#include "engine/speculation.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/format.h"
#include "gpu/gpu.h"
#include "runtime/draft_model_drafter.h"
#include "runtime/mtp_drafter.h"

namespace moetier {

Status check_spec_options(SpecOptions& f) {
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
    // llama.cpp ignores -ngld without a draft model (its presets pass it anyway).
    f.notes.push_back(fmt::format("-ngld {}: no draft model to place (--spec-type {}), so it has nothing to act on",
                                  f.draft_gpu_layers, f.type));
    f.draft_gpu_layers = 0;
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

Status draft_mismatch(const SpecOptions& f, const char* what, const auto& draft, const auto& model) {
  return Status::bad_input(
      fmt::format("-md {}: the draft's {} ({}) differs from the model's ({})", f.draft_model, what, draft, model));
}

// Checks that the -md file (opened once by check_spec_options; the server's slots share it)
// speaks the target's vocabulary: the same size and, when both files carry them, the same token strings.
Result<HParams> open_draft(SpecOptions& f, Session& session) {
  CHECK_MSG(f.draft_file != nullptr, "-md {} was not opened by check_spec_options", f.draft_model);
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
// does) on the model's GPU, experts included. Without a GPU part the draft stays on the CPU
// with the model, said in one line (as -ngl says it).
Status place_draft_on_gpu(SpecOptions& f, Session& session) {
  if (session.gpu_device < 0) {
    if (session.reporter) {
      session.reporter->note(fmt::format("-ngld {}: the model runs on the CPU here (no GPU part), so the draft model "
                                         "runs on the CPU too", f.draft_gpu_layers));
    }
    return Status::ok();
  }
  const int64_t n_layer = f.draft->hparams().n_layer;
  const int64_t n_gpu = f.draft_gpu_layers < 0 ? n_layer + 1 : std::min<int64_t>(f.draft_gpu_layers, n_layer + 1);
  GpuPlacement p{.create_backend = create_gpu_backend, .device = session.gpu_device, .progress = false};
  for (int64_t il = 0; il < n_layer; ++il) p.layer_on_gpu.push_back(il >= n_layer + 1 - n_gpu);
  p.experts_on_gpu = p.layer_on_gpu;
  p.output_on_gpu = n_gpu > 0;
  RETURN_IF_ERROR(f.draft->place_on_gpu(p).with_context("-ngld: placing the draft model on the GPU"));
  const auto m = f.draft->gpu_memory();
  if (session.reporter) {
    session.reporter->note(fmt::format("draft model: {} of {} layers on the GPU ({} of weights)", n_gpu, n_layer + 1,
                                       m ? format_bytes(m->weight_bytes) : "?"));
  }
  return Status::ok();
}

// The MTP head of the -md file, checked against the target: same architecture and widths too.
Result<std::unique_ptr<MtpHead>> draft_mtp_head(SpecOptions& f, Session& session) {
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

Result<std::unique_ptr<Speculator>> make_speculator(SpecOptions& f, Session& session) {
  return make_speculator(f, session, session.kv);
}

Result<std::unique_ptr<Speculator>> make_speculator(SpecOptions& f, Session& session, const KvCacheOptions& cache) {
  RETURN_IF_ERROR(check_spec_options(f));
  if (session.reporter) {
    for (const std::string& note : f.notes) session.reporter->note(note);
  }
  f.notes.clear();  // said once, not once per slot
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

SessionOptions spec_session_options(const SpecOptions& f, SessionOptions options) {
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


}  // namespace moetier
