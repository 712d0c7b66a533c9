// Speculative decoding as the engine sets it up: the options (llama.cpp's --spec-* flags
// resolved), their validation before anything loads, and the speculator for a session's
// model — n-gram drafters, a draft model (-md, draft-simple) or the model's MTP head
// (draft-mtp, from the model file or an MTP-only GGUF). docs/speculative.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/session.h"
#include "runtime/speculative.h"

namespace moetier {

struct SpecOptions {
  SpecParams params;
  std::string type = "none";
  std::string draft_model;   // -md / --spec-draft-model: a draft model or an MTP-only GGUF
  std::shared_ptr<const gguf::ModelFile> draft_file;  // opened by check_spec_options, shared by slots
  std::shared_ptr<Model> draft;  // draft-simple: the loaded draft model (shared by slots)
  int32_t draft_gpu_layers = 0;  // -ngld: the draft model's last N layers (and its LM head) on the model's GPU; -1: all
  bool checked = false;          // check_spec_options succeeded (it resolves the type once)
  bool p_min_given = false;      // --spec-draft-p-min / --draft-p-min (value in params.p_min)
  // What the options ask for that has nothing to act on here (llama.cpp ignores it; moetier
  // says so once, through the session's LoadReporter, when the first speculator is made).
  std::vector<std::string> notes;
};

// Validates the options before anything is loaded (sets params.type; opens -md's header);
// the error names the flag.
Status check_spec_options(SpecOptions& options);
// The speculator the options ask for (nullptr for --spec-type none), or the error; draft-mtp
// runs the session's model's MTP head (an error when the file has none).
Result<std::unique_ptr<Speculator>> make_speculator(SpecOptions& options, Session& session);
// The same for one sequence of `cache`'s size (the server makes one per slot).
Result<std::unique_ptr<Speculator>> make_speculator(SpecOptions& options, Session& session,
                                                    const KvCacheOptions& cache);
// Speculation on a sequence with recurrent state needs its rollback journal: allocates it
// up front, so a placement that cannot journal (DeltaNet on a GPU) or a lack of memory is
// an error before anything is generated. Nothing to do without a speculator.
Status prepare_speculation(const Speculator* speculator, SequenceState& sequence);
// What the plan needs to know of the speculation asked for (after check_spec_options).
SessionOptions spec_session_options(const SpecOptions& options, SessionOptions session_options = {});

}  // namespace moetier
