#include "model/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "gguf/model_file.h"
#include "model/cpu_exec.h"

namespace moetier {

namespace {

Status check_tokens(std::span<const int32_t> tokens, int64_t n_vocab) {
  for (int32_t t : tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::bad_input(fmt::format("token id {} is out of range (vocabulary has {} tokens)", t, n_vocab));
    }
  }
  return Status::ok();
}

Status check_fits(const SequenceState& seq, int64_t n) {
  if (seq.n_past() + n > seq.n_ctx()) {
    return Status::bad_input(fmt::format("{} tokens do not fit the context: {} already used of {} (-c)", n,
                                         seq.n_past(), seq.n_ctx()));
  }
  return Status::ok();
}

}  // namespace

bool GpuPlacement::any() const {
  for (bool b : layer_on_gpu) {
    if (b) return true;
  }
  return output_on_gpu;
}

Status Model::place_on_gpu(const GpuPlacement& placement) {
  if (!placement.any()) return Status::ok();
  return Status::bad_input("this model cannot run on the GPU");
}

void Model::forward_layer(int layer, float* x, int64_t n, SequenceState& seq, float* after_mixer, ThreadPool& pool) {
  const HParams& hp = hparams();
  CpuExec exec(hp.n_embd, hp.rms_eps);
  exec.set_attention_options({.flash = flash_attention()});
  const SeqRows rows{.seq = &seq, .row_begin = 0, .n_rows = n};
  exec.begin(x, std::span<const SeqRows>(&rows, 1), pool, profiler(), after_mixer);
  forward_layer(layer, exec);
}

Status Model::forward(std::span<const int32_t> tokens, SequenceState& seq, const ForwardOptions& options,
                      std::vector<float>& logits, ThreadPool& pool) {
  const HParams& hp = hparams();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status::bad_input("no tokens to process");
  RETURN_IF_ERROR(check_tokens(tokens, hp.n_vocab));
  RETURN_IF_ERROR(check_fits(seq, n));
  const int64_t rows = options.all_logits ? n : 1;
  logits.resize(static_cast<size_t>(rows * hp.n_vocab));
  std::vector<int64_t> logit_rows;
  std::vector<float> hidden;
  for (int64_t begin = 0; begin < n; begin += n_ubatch_) {
    const int64_t count = std::min(n_ubatch_, n - begin);
    const bool last_chunk = begin + count == n;
    logit_rows.clear();
    float* out = nullptr;
    if (options.all_logits) {
      for (int64_t r = 0; r < count; ++r) logit_rows.push_back(r);
      out = logits.data() + begin * hp.n_vocab;
    } else if (last_chunk) {
      logit_rows.push_back(count - 1);
      out = logits.data();
    }
    const SeqRows layout{.seq = &seq, .row_begin = 0, .n_rows = count};
    const auto chunk = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(count));
    if (options.on_hidden) hidden.resize(static_cast<size_t>(count * hp.n_embd));
    RETURN_IF_ERROR(forward_ubatch(chunk, {&layout, 1}, logit_rows, out, options.on_hidden ? hidden.data() : nullptr, pool));
    if (options.on_hidden) (*options.on_hidden)(chunk, seq.n_past(), hidden.data());
    seq.set_n_past(seq.n_past() + count);
  }
  return Status::ok();
}

Status Model::forward_batch(std::span<const BatchEntry> entries, std::vector<float>& logits, ThreadPool& pool) {
  const HParams& hp = hparams();
  if (entries.empty()) return Status::bad_input("no sequences to process");
  int64_t n_logits = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    if (!e.seq || e.tokens.empty()) return Status::bad_input("a batch entry has no tokens");
    for (size_t j = 0; j < i; ++j) {
      if (entries[j].seq == e.seq) return Status::bad_input("a sequence appears twice in one batch");
    }
    RETURN_IF_ERROR(check_tokens(e.tokens, hp.n_vocab));
    RETURN_IF_ERROR(check_fits(*e.seq, static_cast<int64_t>(e.tokens.size())));
    if (e.all_logits) {
      n_logits += static_cast<int64_t>(e.tokens.size());
    } else if (e.want_logits) {
      ++n_logits;
    }
  }
  logits.resize(static_cast<size_t>(n_logits * hp.n_vocab));

  // Cut the entries, in order, into micro-batches of at most n_ubatch tokens; an entry may
  // straddle two (its sequence's n_past advances in between).
  std::vector<int32_t> tokens;
  std::vector<SeqRows> layout;
  std::vector<int64_t> logit_rows;
  // Per micro-batch: which entry each layout part belongs to and its offset in the entry.
  std::vector<std::pair<size_t, int64_t>> parts;
  std::vector<float> hidden;
  bool any_hidden = false;
  for (const BatchEntry& e : entries) any_hidden = any_hidden || e.on_hidden != nullptr;
  size_t entry = 0;
  int64_t offset = 0;       // tokens of entries[entry] already consumed
  int64_t logits_done = 0;  // logit rows written so far
  while (entry < entries.size()) {
    tokens.clear();
    layout.clear();
    logit_rows.clear();
    parts.clear();
    while (entry < entries.size() && static_cast<int64_t>(tokens.size()) < n_ubatch_) {
      const BatchEntry& e = entries[entry];
      const int64_t left = static_cast<int64_t>(e.tokens.size()) - offset;
      const int64_t take = std::min(left, n_ubatch_ - static_cast<int64_t>(tokens.size()));
      layout.push_back({.seq = e.seq, .row_begin = static_cast<int64_t>(tokens.size()), .n_rows = take});
      parts.emplace_back(entry, offset);
      if (e.all_logits) {
        for (int64_t r = 0; r < take; ++r) logit_rows.push_back(static_cast<int64_t>(tokens.size()) + r);
      }
      tokens.insert(tokens.end(), e.tokens.begin() + offset, e.tokens.begin() + offset + take);
      offset += take;
      if (offset == static_cast<int64_t>(e.tokens.size())) {
        if (e.want_logits && !e.all_logits) logit_rows.push_back(static_cast<int64_t>(tokens.size()) - 1);
        ++entry;
        offset = 0;
      }
    }
    if (any_hidden) hidden.resize(tokens.size() * static_cast<size_t>(hp.n_embd));
    RETURN_IF_ERROR(forward_ubatch(tokens, layout, logit_rows,
                                   logit_rows.empty() ? nullptr : logits.data() + logits_done * hp.n_vocab,
                                   any_hidden ? hidden.data() : nullptr, pool));
    logits_done += static_cast<int64_t>(logit_rows.size());
    for (size_t i = 0; i < layout.size(); ++i) {
      const SeqRows& r = layout[i];
      const BatchEntry& e = entries[parts[i].first];
      if (e.on_hidden) {
        (*e.on_hidden)(e.tokens.subspan(static_cast<size_t>(parts[i].second), static_cast<size_t>(r.n_rows)),
                       r.seq->n_past(), hidden.data() + r.row_begin * hp.n_embd);
      }
      r.seq->set_n_past(r.seq->n_past() + r.n_rows);
    }
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
