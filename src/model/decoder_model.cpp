#include "model/decoder_model.h"

#include <algorithm>

#include "console/progress.h"
#include "cpu/ops.h"

namespace moetier {

void DecoderModel::bind_embeddings(WeightBinder& b) {
  token_embd_ = b.matrix("token_embd.weight");
  output_ = b.matrix("output.weight");
  output_norm_ = b.f32("output_norm.weight");
}

Result<SequenceState> DecoderModel::new_sequence(const KvCacheOptions& options) const {
  std::vector<LayerStateSpec> specs = state_specs();
  if (gpu_) {
    for (size_t il = 0; il < specs.size() && il < placement_.layer_on_gpu.size(); ++il) {
      specs[il].on_device = placement_.layer_on_gpu[il];
    }
  }
  ASSIGN_OR_RETURN(SequenceState seq, SequenceState::create(specs, options));
  if (gpu_) {
    ASSIGN_OR_RETURN(auto device_state, gpu_->new_state(specs, options));
    seq.set_device_state(std::move(device_state));
  }
  return seq;
}

Status DecoderModel::place_on_gpu(const GpuPlacement& placement) {
  gpu_.reset();
  if (!placement.any()) return Status::ok();
  GpuPlacement p = placement;
  p.layer_on_gpu.resize(static_cast<size_t>(hp_.n_layer), false);
  p.experts_on_gpu.resize(static_cast<size_t>(hp_.n_layer), false);
  for (size_t il = 0; il < p.experts_on_gpu.size(); ++il) p.experts_on_gpu[il] = p.experts_on_gpu[il] && p.layer_on_gpu[il];
  p.mtp_on_gpu = p.mtp_on_gpu && has_mtp_block();
  // The MTP block runs as layer n_layer of the backend.
  p.layer_on_gpu.push_back(p.mtp_on_gpu);
  p.experts_on_gpu.push_back(p.mtp_on_gpu && p.mtp_experts_on_gpu);
  if (p.create_backend == nullptr) return Status::runtime("no GPU backend was given for the GPU placement");
  ASSIGN_OR_RETURN(auto backend, p.create_backend(hp_, {.device = p.device,
                                                          .n_ubatch = n_ubatch(),
                                                          .n_layer = hp_.n_layer + 1,
                                                          .layer_on_gpu = p.layer_on_gpu,
                                                          .experts_on_gpu = p.experts_on_gpu,
                                                          .output_on_gpu = p.output_on_gpu,
                                                          .memory_limit_bytes = p.memory_limit_bytes,
                                                          .op_offload = p.op_offload,
                                                          .op_offload_limit_bytes = p.op_offload_limit_bytes,
                                                          .op_offload_min_tokens = p.op_offload_min_tokens,
                                                          .op_offload_always = p.op_offload_always,
                                                          .exact_kernels = p.exact_kernels,
                                                          .expert_cache_slots = p.expert_cache_slots}));
  // Upload the GPU layers' weights: each layer's code runs once in prepare mode, which
  // uploads every tensor its blocks read (so no architecture needs GPU-specific code).
  int n_gpu = 0;
  for (bool b : p.layer_on_gpu) n_gpu += b ? 1 : 0;
  ProgressBar progress({.label = "uploading to the GPU", .total = static_cast<uint64_t>(n_gpu + (p.output_on_gpu ? 1 : 0)),
                        .bytes = false, .enabled = p.progress});
  ThreadPool pool(1);
  ASSIGN_OR_RETURN(SequenceState dummy, SequenceState::create({}, {.n_ctx = 1}));  // prepare mode reads no state
  const SeqRows rows{.seq = &dummy, .row_begin = 0, .n_rows = 1};
  for (int il = 0; il < hp_.n_layer; ++il) {
    if (!p.layer_on_gpu[static_cast<size_t>(il)]) continue;
    forward_layer(il, backend->begin_layer(il, std::span<const SeqRows>(&rows, 1), pool, nullptr, true));
    RETURN_IF_ERROR(backend->finish());
    progress.add(1);
  }
  if (p.mtp_on_gpu) {
    mtp_block_->forward(backend->begin_layer(static_cast<int>(hp_.n_layer), std::span<const SeqRows>(&rows, 1), pool,
                                             nullptr, true));
    RETURN_IF_ERROR(backend->finish());
  }
  if (p.output_on_gpu) {
    RETURN_IF_ERROR(backend->lm_head(output_, output_norm_, {}, nullptr, true));
    progress.add(1);
  }
  progress.finish();
  gpu_ = std::move(backend);
  placement_ = std::move(p);
  return Status::ok();
}

Status DecoderModel::forward_layer_placed(int layer, float* x, int64_t n, SequenceState& seq, ThreadPool& pool) {
  if (!gpu_ || !placement_.layer_on_gpu[static_cast<size_t>(layer)]) {
    forward_layer(layer, x, n, seq, nullptr, pool);
    return Status::ok();
  }
  const SeqRows rows{.seq = &seq, .row_begin = 0, .n_rows = n};
  RETURN_IF_ERROR(gpu_->upload_x(x, n));
  forward_layer(layer, gpu_->begin_layer(layer, std::span<const SeqRows>(&rows, 1), pool, profiler(), false));
  RETURN_IF_ERROR(gpu_->download_x(x, n));
  return gpu_->finish();
}

Status DecoderModel::lm_head_rows(const float* x, int64_t n, const float* norm, float* logits, ThreadPool& pool) {
  if (gpu_ && placement_.output_on_gpu) {
    RETURN_IF_ERROR(gpu_->upload_x(x, n));
    lm_head_rows_.resize(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) lm_head_rows_[static_cast<size_t>(r)] = r;
    RETURN_IF_ERROR(gpu_->lm_head(output_, norm, lm_head_rows_, logits, false));
    return gpu_->finish();
  }
  lm_head(output_, norm, hp_.rms_eps, x, n, logits, mtp_lm_head_scratch_, pool);
  return Status::ok();
}

Result<SequenceState> DecoderModel::new_mtp_sequence(const LayerStateSpec& spec, const KvCacheOptions& options) const {
  LayerStateSpec s = spec;
  s.on_device = mtp_on_gpu();
  ASSIGN_OR_RETURN(SequenceState seq, SequenceState::create({s}, options));
  if (s.on_device) {
    ASSIGN_OR_RETURN(auto device_state, gpu_->new_state({s}, options));
    seq.set_device_state(std::move(device_state));
  }
  return seq;
}

Status DecoderModel::run_mtp_block_on_gpu(float* x, int64_t n, SequenceState& seq, const float* head_norm,
                                          float* hidden_out, float* logits_last, ThreadPool& pool) {
  CHECK(mtp_on_gpu());
  const SeqRows rows{.seq = &seq, .row_begin = 0, .n_rows = n};
  RETURN_IF_ERROR(gpu_->upload_x(x, n));
  mtp_block_->forward(gpu_->begin_layer(static_cast<int>(hp_.n_layer), std::span<const SeqRows>(&rows, 1), pool,
                                        profiler(), false));
  RETURN_IF_ERROR(gpu_->download_x(x, n));
  if (hidden_out) {
    for (int64_t r = 0; r < n; ++r) cpu::rms_norm(x + r * hp_.n_embd, head_norm, hp_.n_embd, hp_.rms_eps, hidden_out + r * hp_.n_embd);
  }
  if (logits_last) {
    if (placement_.output_on_gpu) {
      const int64_t last = n - 1;
      RETURN_IF_ERROR(gpu_->lm_head(output_, head_norm, {&last, 1}, logits_last, false));
    } else {
      lm_head(output_, head_norm, hp_.rms_eps, x + (n - 1) * hp_.n_embd, 1, logits_last, mtp_lm_head_scratch_, pool);
    }
  }
  return gpu_->finish();
}

Result<std::unique_ptr<MtpHead>> DecoderModel::mtp_head() {
  RETURN_IF_ERROR(mtp_status_);
  if (!has_mtp_block()) return Model::mtp_head();
  return make_mtp_head();
}

std::optional<GpuMemoryReport> DecoderModel::gpu_memory() const {
  if (!gpu_) return std::nullopt;
  return gpu_->memory();
}

Status DecoderModel::forward_ubatch(std::span<const int32_t> tokens, std::span<const SeqRows> seqs,
                                    std::span<const int64_t> logit_rows, float* logits_out, float* hidden_out,
                                    ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t d = hp_.n_embd;
  x_.resize(static_cast<size_t>(n * d));
  {
    ScopedProfile p(profiler(), ProfileBlock::kEmbedding);
    embed_tokens(token_embd_, tokens, x_.data());
  }
  if (!cpu_exec_) cpu_exec_ = std::make_unique<CpuExec>(hp_.n_embd, hp_.rms_eps);
  cpu_exec_->set_attention_options({.flash = flash_attention()});
  // The residual stream moves to the GPU before a GPU layer and back before a CPU one.
  bool x_on_gpu = false;
  for (int il = 0; il < hp_.n_layer; ++il) {
    if (gpu_ && placement_.layer_on_gpu[static_cast<size_t>(il)]) {
      if (!x_on_gpu) RETURN_IF_ERROR(gpu_->upload_x(x_.data(), n));
      x_on_gpu = true;
      forward_layer(il, gpu_->begin_layer(il, seqs, pool, profiler(), false));
      continue;
    }
    if (x_on_gpu) RETURN_IF_ERROR(gpu_->download_x(x_.data(), n));
    x_on_gpu = false;
    cpu_exec_->begin(x_.data(), seqs, pool, profiler());
    forward_layer(il, *cpu_exec_);
  }
  if (hidden_out) {  // the MTP head's input: every row's final-norm hidden state, on the host
    if (x_on_gpu) RETURN_IF_ERROR(gpu_->download_x(x_.data(), n));
    for (int64_t r = 0; r < n; ++r) cpu::rms_norm(x_.data() + r * d, output_norm_, d, hp_.rms_eps, hidden_out + r * d);
  }
  if (gpu_ && placement_.output_on_gpu && !logit_rows.empty()) {
    if (!x_on_gpu) RETURN_IF_ERROR(gpu_->upload_x(x_.data(), n));
    ScopedProfile p(profiler(), ProfileBlock::kLmHead);
    RETURN_IF_ERROR(gpu_->lm_head(output_, output_norm_, logit_rows, logits_out, false));
    return gpu_->finish();
  }
  if (logit_rows.empty()) return gpu_ ? gpu_->finish() : Status::ok();  // a prompt chunk: no logits, x stays
  if (x_on_gpu) RETURN_IF_ERROR(gpu_->download_x(x_.data(), n));
  if (gpu_) RETURN_IF_ERROR(gpu_->finish());
  ScopedProfile p(profiler(), ProfileBlock::kLmHead);
  const int64_t m = static_cast<int64_t>(logit_rows.size());
  const float* rows = x_.data() + logit_rows[0] * d;
  bool contiguous = true;
  for (int64_t i = 1; i < m; ++i) contiguous = contiguous && logit_rows[i] == logit_rows[0] + i;
  if (!contiguous) {
    logit_x_.resize(static_cast<size_t>(m * d));
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(x_.data() + logit_rows[i] * d, d, logit_x_.data() + i * d);
    }
    rows = logit_x_.data();
  }
  lm_head(output_, output_norm_, hp_.rms_eps, rows, m, logits_out, lm_head_scratch_, pool);
  return Status::ok();
}

}  // namespace moetier
