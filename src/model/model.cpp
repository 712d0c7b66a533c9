#include "model/model.h"

#include <fmt/format.h>

#include "gguf/model_file.h"

namespace moetier {

Status Model::forward(std::span<const int32_t> tokens, SequenceState& seq, const ForwardOptions& options,
                      std::vector<float>& logits, ThreadPool& pool) {
  const HParams& hp = hparams();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::bad_input("no tokens to process");
  for (int32_t t : tokens) {
    if (t < 0 || t >= hp.n_vocab) {
      return Status::bad_input(fmt::format("token id {} is out of range (vocabulary has {} tokens)", t, hp.n_vocab));
    }
  }
  if (seq.n_past() + n > seq.n_ctx()) {
    return Status::bad_input(fmt::format("{} tokens do not fit the context: {} already used of {} (-c)", n,
                                         seq.n_past(), seq.n_ctx()));
  }
  const int64_t rows = options.all_logits ? n : 1;
  logits.resize(static_cast<size_t>(rows * hp.n_vocab));
  for (int64_t begin = 0; begin < n; begin += n_ubatch_) {
    const int64_t count = std::min(n_ubatch_, n - begin);
    const bool last_chunk = begin + count == n;
    LogitRows mode = LogitRows::kNone;
    float* out = nullptr;
    if (options.all_logits) {
      mode = LogitRows::kAll;
      out = logits.data() + begin * hp.n_vocab;
    } else if (last_chunk) {
      mode = LogitRows::kLast;
      out = logits.data();
    }
    forward_ubatch(tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), seq, mode, out, pool);
    seq.set_n_past(seq.n_past() + count);
  }
  return Status::ok();
}

}  // namespace moetier

namespace moetier {

Result<std::unique_ptr<Model>> load_model(const gguf::ModelFile& file, const ModelOptions& options) {
  ASSIGN_OR_RETURN(HParams hp, read_hparams(file.header()));
  const ArchInfo* info = find_arch(hp.arch);
  if (!info || !info->create_model) {
    return Status::bad_input(fmt::format("architecture '{}' can be inspected but not run yet", hp.arch));
  }
  return info->create_model(file, hp, options);
}

}  // namespace moetier
