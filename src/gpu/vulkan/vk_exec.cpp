#include "gpu/vulkan/vk_exec.h"

#include "gpu/gpu.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

namespace moetier {

// --- the engine's entry points (gpu/gpu.h) ------------------------------------

Result<std::unique_ptr<GpuBackend>> create_gpu_backend(const HParams& hp, const GpuBackendOptions& options) {
  ASSIGN_OR_RETURN(auto backend, vk::VulkanBackend::create(hp, options));
  return std::unique_ptr<GpuBackend>(std::move(backend));
}

Result<std::vector<GpuDeviceInfo>> list_gpu_devices() {
  ASSIGN_OR_RETURN(auto devices, vk::list_devices());
  std::vector<GpuDeviceInfo> out;
  for (const auto& d : devices) {
    out.push_back({.description = fmt::format("{}: {}", d.index, d.describe()),
                   .software = d.type == "CPU (software)",
                   .free_bytes = d.budget_bytes > d.used_bytes ? d.budget_bytes - d.used_bytes : 0,
                   .used_bytes = d.used_bytes,
                   .free_from_driver = d.has_memory_budget,
                   .luid = d.luid_valid ? std::optional<std::array<uint8_t, 8>>(d.luid) : std::nullopt,
                   .details = vk::describe_device_details(d)});
  }
  return out;
}

}  // namespace moetier

namespace moetier::vk {

void GpuSequenceState::clear() {
  for (const auto& l : layers_) {
    if (l.conv.valid()) dev_.stream().fill_zero(l.conv);
    if (l.ssm.valid()) dev_.stream().fill_zero(l.ssm);
  }
  (void)dev_.stream().finish();
}

Status GpuSequenceState::reserve_journal(int64_t max_tokens) {
  if (max_tokens <= journal_capacity_) return Status::ok();
  // The allocator does not free: a larger journal replaces the old one (a speculator asks for
  // its largest size once, up front).
  Allocator& a = dev_.allocator();
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& l = layers_[il];
    if (!l.conv.valid()) continue;
    ASSIGN_OR_RETURN(journal_[il].conv, a.allocate(l.conv.size * static_cast<uint64_t>(max_tokens), MemoryUse::kState));
    ASSIGN_OR_RETURN(journal_[il].ssm, a.allocate(l.ssm.size * static_cast<uint64_t>(max_tokens), MemoryUse::kState));
    bytes_ += (l.conv.size + l.ssm.size) * static_cast<uint64_t>(max_tokens);
  }
  journal_capacity_ = max_tokens;
  return Status::ok();
}

Status GpuSequenceState::restore_journal(int64_t slot) {
  if (slot < 0 || slot >= journal_capacity_) return Status::runtime("journal slot out of range (a bug)");
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& l = layers_[il];
    if (!l.conv.valid()) continue;
    dev_.stream().copy(journal_conv(static_cast<int>(il), slot), l.conv, l.conv.size);
    dev_.stream().copy(journal_ssm(static_cast<int>(il), slot), l.ssm, l.ssm.size);
  }
  return Status::ok();
}

Status GpuSequenceState::read_kv(int il, int64_t pos, int64_t n, uint8_t* k, uint8_t* v) {
  const Layer& l = layers_[static_cast<size_t>(il)];
  if (!l.k.valid()) return Status::runtime("no KV cache on the GPU for this layer (a bug)");
  if (n == 0) return Status::ok();
  const auto kb = static_cast<uint64_t>(l.k_row_bytes), vb = static_cast<uint64_t>(l.v_row_bytes);
  const auto p = static_cast<uint64_t>(pos), m = static_cast<uint64_t>(n);
  const Device::Download d[] = {{.src = l.k.slice(p * kb, m * kb), .data = k, .bytes = m * kb},
                                {.src = l.v.slice(p * vb, m * vb), .data = v, .bytes = m * vb}};
  return dev_.download(d);
}

Status GpuSequenceState::write_kv(int il, int64_t pos, int64_t n, const uint8_t* k, const uint8_t* v) {
  const Layer& l = layers_[static_cast<size_t>(il)];
  if (!l.k.valid()) return Status::runtime("no KV cache on the GPU for this layer (a bug)");
  if (n == 0) return Status::ok();
  const auto kb = static_cast<uint64_t>(l.k_row_bytes), vb = static_cast<uint64_t>(l.v_row_bytes);
  const auto p = static_cast<uint64_t>(pos), m = static_cast<uint64_t>(n);
  RETURN_IF_ERROR(dev_.upload(l.k.slice(p * kb, m * kb), k, m * kb));
  RETURN_IF_ERROR(dev_.upload(l.v.slice(p * vb, m * vb), v, m * vb));
  return dev_.stream().finish();
}

Status GpuSequenceState::read_recurrent(int il, float* conv, float* ssm) {
  const Layer& l = layers_[static_cast<size_t>(il)];
  if (!l.conv.valid()) return Status::runtime("no recurrent state on the GPU for this layer (a bug)");
  const Device::Download d[] = {{.src = l.conv, .data = conv, .bytes = l.conv.size},
                                {.src = l.ssm, .data = ssm, .bytes = l.ssm.size}};
  return dev_.download(d);
}

Status GpuSequenceState::write_recurrent(int il, const float* conv, const float* ssm) {
  const Layer& l = layers_[static_cast<size_t>(il)];
  if (!l.conv.valid()) return Status::runtime("no recurrent state on the GPU for this layer (a bug)");
  RETURN_IF_ERROR(dev_.upload(l.conv, conv, l.conv.size));
  RETURN_IF_ERROR(dev_.upload(l.ssm, ssm, l.ssm.size));
  return dev_.stream().finish();
}

BufferRef GpuSequenceState::journal_conv(int il, int64_t slot) const {
  const uint64_t n = layers_[static_cast<size_t>(il)].conv.size;
  return journal_[static_cast<size_t>(il)].conv.slice(static_cast<uint64_t>(slot) * n, n);
}

BufferRef GpuSequenceState::journal_ssm(int il, int64_t slot) const {
  const uint64_t n = layers_[static_cast<size_t>(il)].ssm.size;
  return journal_[static_cast<size_t>(il)].ssm.slice(static_cast<uint64_t>(slot) * n, n);
}

Result<std::unique_ptr<VulkanBackend>> VulkanBackend::create(const HParams& hp, const GpuBackendOptions& options) {
  std::unique_ptr<VulkanBackend> b(new VulkanBackend(hp, options));
  ASSIGN_OR_RETURN(b->dev_, Device::open(options.device));
  b->kernels_ = options.exact_kernels || !b->dev_->info().fast_kernels_supported() ? KernelSet::kExact : KernelSet::kFast;
  if (!options.exact_kernels && b->kernels_ == KernelSet::kExact) {
    std::fprintf(stderr,
                 "moetier: GPU %s lacks what the fast kernels need (Vulkan 1.2, subgroup arithmetic and shuffles "
                 "in compute shaders, subgroups of 8+, 32 KiB of shared memory): using the exact kernels, which are "
                 "slower\n",
                 b->dev_->info().name.c_str());
  }
  b->dev_->allocator().set_limit(options.memory_limit_bytes);
  RETURN_IF_ERROR(b->allocate_scratch());
  return b;
}

Status VulkanBackend::allocate_scratch() {
  const HParams& hp = hp_;
  const int64_t R = std::max<int64_t>(1, options_.n_ubatch);
  capacity_ = R;
  const int64_t k = std::max<int64_t>(1, hp.n_expert_used);
  const int64_t q_width = hp.n_head * hp.head_dim_k * 2;  // room for [query | gate]
  const int64_t key_dim = hp.ssm_n_group * hp.ssm_d_state;
  const int64_t channels = 2 * key_dim + hp.ssm_d_inner;
  const int64_t widest_in = std::max({hp.n_embd, hp.n_head * hp.head_dim_v, hp.ssm_d_inner, hp.n_ff_exp, hp.n_ff_shexp});
  Allocator& a = dev_->allocator();
  auto take = [&](uint64_t bytes, BufferRef& out) -> Status {
    ASSIGN_OR_RETURN(out, a.allocate(std::max<uint64_t>(bytes, 16), MemoryUse::kScratch));
    return Status::ok();
  };
  const uint64_t row_f32 = static_cast<uint64_t>(hp.n_embd) * 4;
  RETURN_IF_ERROR(take(R * row_f32, x_));
  RETURN_IF_ERROR(take(R * row_f32, h_));
  RETURN_IF_ERROR(take(R * row_f32, mix_));
  const uint64_t xq_bytes = static_cast<uint64_t>(std::max(R * widest_in, R * k * hp.n_ff_exp)) * 4;
  RETURN_IF_ERROR(take(xq_bytes, xq_));
  RETURN_IF_ERROR(take(xq_bytes, xq2_));
  RETURN_IF_ERROR(take(xq_bytes, xq3_));
  // The block intermediates, each sized for its largest use (vk_blocks.cpp): [0] q|gate,
  // qkv, router logits; [1] k, conv out, gate products; [2] v, z, up products; [3] q, y,
  // SwiGLU outputs; [4] attention out, routed experts' outputs per pair (only when experts
  // can run on the GPU: placed there, streamed for prompts, or copied to the VRAM expert
  // cache); [5] shared expert out.
  const int64_t kv_width = hp.n_head_kv * hp.head_dim_k, q_dim = hp.n_head * hp.head_dim_v;
  const int64_t pairs_ff = R * k * hp.n_ff_exp;
  bool experts_on_gpu = options_.op_offload;
  for (bool b : options_.experts_on_gpu) experts_on_gpu = experts_on_gpu || b;
  for (int slots : options_.expert_cache_slots) experts_on_gpu = experts_on_gpu || slots > 0;
  const int64_t big_floats[kBig] = {
      std::max({R * q_width, R * channels, R * hp.n_expert}),
      std::max({R * kv_width, R * channels, R * hp.ssm_d_inner, pairs_ff, R * hp.n_ff_shexp}),
      std::max({R * kv_width, R * hp.ssm_d_inner, pairs_ff, R * hp.n_ff_shexp}),
      std::max({R * q_dim, R * hp.ssm_d_inner, pairs_ff, R * hp.n_ff_shexp}),
      std::max(R * q_dim, experts_on_gpu ? R * k * hp.n_embd : 0),
      R * hp.n_embd};
  for (int i = 0; i < kBig; ++i) RETURN_IF_ERROR(take(static_cast<uint64_t>(big_floats[i]) * 4, big_[i]));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * std::max<int64_t>(hp.ssm_dt_rank, 1)) * 4, small_a_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * std::max<int64_t>(hp.ssm_dt_rank, 1)) * 4, small_b_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * std::max<int64_t>(hp.n_rot, 2)) * 4, cos_sin_));
  if (kernels_ == KernelSet::kExact) {
    RETURN_IF_ERROR(take(std::min<uint64_t>(32ull << 20, a.max_range()), scores_));
  } else if (hp.n_head > 0 && hp.head_dim_k > 0 && hp.n_head_kv > 0) {
    // Flash attention's split-K partials: enough for a whole micro-batch at 32K keys where
    // that stays under 32 MiB, and at least what one row at the model's full context needs
    // (longer calls then go in row pieces).
    const int64_t max_ctx = std::max<int64_t>(hp.n_ctx_train, 4096);
    ASSIGN_OR_RETURN(const uint64_t least, flash_attention_scratch_bytes(dev_->info(), 1, hp.n_head, hp.n_head_kv,
                                                                         max_ctx, hp.head_dim_k));
    ASSIGN_OR_RETURN(const uint64_t batch, flash_attention_scratch_bytes(dev_->info(), R, hp.n_head, hp.n_head_kv,
                                                                         std::min<int64_t>(max_ctx, 32768), hp.head_dim_k));
    const uint64_t bytes = std::max(least, std::min<uint64_t>(batch, 32ull << 20));
    if (bytes > 0) RETURN_IF_ERROR(take(std::min(bytes, a.max_range()), scores_));
  }
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * k) * 4, ids_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * k) * 4, weights_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * k) * 4, pair_rows_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * k) * 4, pair_map_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(std::max<int64_t>(hp.n_expert, 1) + 1) * 4, group_offsets_));
  RETURN_IF_ERROR(take(static_cast<uint64_t>(R * k) * 4, group_order_));
  std::vector<uint32_t> iota(static_cast<size_t>(R * k));
  for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<uint32_t>(i);
  ASSIGN_OR_RETURN(iota_, dev_->create_buffer(iota.data(), iota.size() * 4, MemoryUse::kScratch));
  const uint64_t vocab_row = static_cast<uint64_t>(std::max<int64_t>(hp.n_vocab, 1)) * 4;
  // Logits come down in pieces of this many rows (16 MiB: 16 rows of a 248K vocabulary).
  logits_rows_ = std::clamp<int64_t>(static_cast<int64_t>(std::min<uint64_t>(16ull << 20, a.max_range()) / vocab_row), 1, R);
  RETURN_IF_ERROR(take(static_cast<uint64_t>(logits_rows_) * vocab_row, logits_));
  return Status::ok();
}

BufferRef VulkanBackend::rows(Act a) const {
  switch (a) {
    case Act::kX: return x_;
    case Act::kH: return h_;
    case Act::kMix: return mix_;
  }
  return x_;
}

LayerExec& VulkanBackend::begin_layer(int layer, std::span<const SeqRows> seqs, ThreadPool& pool, Profiler* profiler,
                                      bool prepare) {
  flush_output({});  // (a layer ends with its residual add, which takes the pending op)
  prequantized_ = {};
  layer_ = layer;
  seqs_ = seqs;
  n_ = seqs.empty() ? 0 : seqs.back().row_begin + seqs.back().n_rows;
  pool_ = &pool;
  profiler_ = profiler;
  prepare_ = prepare;
  if (n_ > capacity_) fail(Status::runtime(fmt::format("{} rows exceed the GPU scratch of {} rows", n_, capacity_)));
  return *this;
}

Status VulkanBackend::upload_x(const float* x, int64_t n) {
  flush_output({});
  return dev_->upload(x_, x, static_cast<uint64_t>(n * hp_.n_embd) * 4);
}

Status VulkanBackend::download_x(float* x, int64_t n) {
  flush_output({});
  RETURN_IF_ERROR(status_);
  return dev_->download(x_, x, static_cast<uint64_t>(n * hp_.n_embd) * 4);
}

Status VulkanBackend::finish() {
  flush_output({});
  if (Status s = dev_->stream().finish(); !s) fail(s);
  return status_;
}

void VulkanBackend::defer_projection(const cpu::WeightMatrix& w, const BufferRef& in, int64_t in_stride, Act out) {
  if (kernels_ == KernelSet::kExact) {  // the exact kernels do not fuse
    project(w, in, n_, in_stride, rows(out), hp_.n_embd);
    return;
  }
  pending_ = {.kind = PendingOutput::Kind::kProjection, .out = out, .w = &w, .in = in, .in_stride = in_stride};
}

void VulkanBackend::defer_combine(bool has_routed, bool has_shared, int64_t k, Act out, bool pair_map) {
  pending_ = {.kind = PendingOutput::Kind::kCombine, .out = out, .has_routed = has_routed, .has_shared = has_shared,
              .pair_map = pair_map, .k = k};
}

void VulkanBackend::flush_output(const BufferRef& residual) {
  const PendingOutput p = pending_;
  pending_ = {};
  const int64_t d = hp_.n_embd;
  switch (p.kind) {
    case PendingOutput::Kind::kNone: return;
    case PendingOutput::Kind::kProjection: {
      const GpuMatrix* m = matrix(*p.w);
      if (!m) return;
      const Converted xq = convert(*m, p.in, n_, p.w->n_in, p.in_stride, xq3_);
      if (!xq.buffer.valid()) return;
      const bool into_x = residual.valid();
      fail(vk::matmul(*dev_, kernels_,
                      {.w = m, .xq = xq.buffer, .x_row_bytes = xq.row_bytes, .n_tok = n_, .y = into_x ? residual : rows(p.out),
                       .y_stride = d, .accumulate = into_x}));
      return;
    }
    case PendingOutput::Kind::kCombine:
      fail(moe_combine(*dev_, {.experts = p.has_routed ? big_[4] : BufferRef{},
                               .weights = p.has_routed ? weights_ : BufferRef{},
                               .shared = big_[5],
                               .shared_gate = small_a_,
                               .out = rows(p.out),
                               .residual = residual,
                               .pair_map = p.pair_map ? pair_map_ : BufferRef{},
                               .n_embd = d,
                               .k = p.k,
                               .n_rows = n_,
                               .has_routed = p.has_routed,
                               .has_shared = p.has_shared}));
      return;
  }
}

bool VulkanBackend::fuse_swiglu(const cpu::WeightMatrix& w, const cpu::WeightMatrix& up) const {
  return kernels_ == KernelSet::kFast && n_ <= kMatvecMaxCols && w.type == up.type && w.n_in == up.n_in &&
         w.n_out == up.n_out && w.n_mat == up.n_mat;
}

const GpuMatrix* VulkanBackend::matrix(const cpu::WeightMatrix& w) {
  if (auto it = matrices_.find(w.data); it != matrices_.end()) return &it->second;
  auto m = upload_matrix(*dev_, w.type, w.n_in, w.n_out, w.n_mat, w.row_bytes, w.data);
  if (!m) {
    fail(m.status());
    return nullptr;
  }
  return &matrices_.emplace(w.data, std::move(m).value()).first->second;
}

BufferRef VulkanBackend::vector(const float* host, int64_t n) {
  if (auto it = vectors_.find(host); it != vectors_.end()) return it->second;
  auto b = dev_->create_buffer(host, static_cast<uint64_t>(n) * 4, MemoryUse::kWeights);
  if (!b) {
    fail(b.status());
    return {};
  }
  vectors_.emplace(host, *b);
  return *b;
}

VulkanBackend::Converted VulkanBackend::convert(const GpuMatrix& w, const BufferRef& in, int64_t n_rows, int64_t n_in,
                                                int64_t in_stride, const BufferRef& scratch) {
  auto act = gpu_activation_type(w.type);
  if (!act) {
    fail(act.status());
    return {};
  }
  if (*act == DType::F32 && in_stride == n_in) return {in, static_cast<uint64_t>(n_in) * 4};
  const uint64_t row_bytes = gpu_activation_row_bytes(*act, n_in);
  fail(quantize_rows(*dev_, *act, in, n_rows, n_in, in_stride, scratch));
  return {scratch, row_bytes};
}

void VulkanBackend::project(const cpu::WeightMatrix& w, const BufferRef& in, int64_t n_rows, int64_t in_stride,
                            const BufferRef& y, int64_t y_stride) {
  const GpuMatrix* m = matrix(w);
  if (!m || prepare_) return;
  const Converted xq = convert(*m, in, n_rows, w.n_in, in_stride, xq3_);
  if (!xq.buffer.valid()) return;
  fail(vk::matmul(*dev_, kernels_,
                  {.w = m, .xq = xq.buffer, .x_row_bytes = xq.row_bytes, .n_tok = n_rows, .y = y, .y_stride = y_stride}));
}

void VulkanBackend::begin_input(Act in) {
  input_ = in;
  for (auto& slot : input_slots_) slot.used = false;
  if (prequantized_.valid && prequantized_.act == in) {
    const int64_t d = hp_.n_embd;
    input_slots_[0] = {.used = true, .type = DType::Q8_K, .conv = {xq_, gpu_activation_row_bytes(DType::Q8_K, d)}};
    input_slots_[1] = {.used = true, .type = DType::Q8_0, .conv = {xq2_, gpu_activation_row_bytes(DType::Q8_0, d)}};
  }
  prequantized_ = {};  // from here on the slots say what xq_ and xq2_ hold
}

VulkanBackend::Converted VulkanBackend::input_for(const GpuMatrix& w) {
  auto act = gpu_activation_type(w.type);
  if (!act) {
    fail(act.status());
    return {};
  }
  const int64_t d = hp_.n_embd;
  if (*act == DType::F32) return {rows(input_), static_cast<uint64_t>(d) * 4};
  for (const auto& slot : input_slots_) {
    if (slot.used && slot.type == *act) return slot.conv;
  }
  for (int i = 0; i < 2; ++i) {
    InputSlot& slot = input_slots_[i];
    if (slot.used) continue;
    slot = {.used = true, .type = *act, .conv = convert(w, rows(input_), n_, d, d, i == 0 ? xq_ : xq2_)};
    return slot.conv;
  }
  return convert(w, rows(input_), n_, d, d, xq3_);  // a third type in one block: converted for this use
}

void VulkanBackend::project_input(const cpu::WeightMatrix& w, const BufferRef& y, int64_t y_stride,
                                  const cpu::WeightMatrix* up) {
  const GpuMatrix* m = matrix(w);
  const GpuMatrix* m_up = up ? matrix(*up) : nullptr;
  if (!m || (up && !m_up) || prepare_) return;
  const Converted xq = input_for(*m);
  if (!xq.buffer.valid()) return;
  fail(vk::matmul(*dev_, kernels_,
                  {.w = m, .xq = xq.buffer, .x_row_bytes = xq.row_bytes, .n_tok = n_, .y = y, .y_stride = y_stride,
                   .up = m_up}));
}

Status VulkanBackend::lm_head(const cpu::WeightMatrix& output, const float* output_norm,
                              std::span<const int64_t> logit_rows, float* logits, bool prepare) {
  const BufferRef norm = vector(output_norm, hp_.n_embd);
  const GpuMatrix* m = matrix(output);
  if (prepare || !m) return status_;
  const int64_t d = hp_.n_embd;
  flush_output({});
  prequantized_ = {};  // h_ and xq_ are reused below
  for (size_t r0 = 0; r0 < logit_rows.size(); r0 += static_cast<size_t>(logits_rows_)) {
    const int64_t rows = std::min<int64_t>(logits_rows_, static_cast<int64_t>(logit_rows.size() - r0));
    // Gather the rows, normalise them, project them.
    for (int64_t i = 0; i < rows; ++i) {
      dev_->stream().copy(x_.slice(static_cast<uint64_t>(logit_rows[r0 + i] * d) * 4, static_cast<uint64_t>(d) * 4),
                          h_.slice(static_cast<uint64_t>(i * d) * 4, static_cast<uint64_t>(d) * 4),
                          static_cast<uint64_t>(d) * 4);
    }
    fail(vk::rms_norm(*dev_, {.n = d, .n_rows = rows, .row_stride = d, .out_row_stride = d, .eps = hp_.rms_eps}, h_,
                      norm, h_));
    const Converted xq = convert(*m, h_, rows, d, d, xq_);
    if (!xq.buffer.valid()) return status_;
    fail(vk::matmul(*dev_, kernels_,
                    {.w = m, .xq = xq.buffer, .x_row_bytes = xq.row_bytes, .n_tok = rows, .y = logits_,
                     .y_stride = hp_.n_vocab}));
    RETURN_IF_ERROR(status_);
    RETURN_IF_ERROR(dev_->download(logits_, logits + r0 * static_cast<size_t>(hp_.n_vocab),
                                   static_cast<uint64_t>(rows * hp_.n_vocab) * 4));
  }
  return status_;
}

Result<std::unique_ptr<DeviceState>> VulkanBackend::new_state(const std::vector<LayerStateSpec>& specs,
                                                              const KvCacheOptions& options) {
  std::vector<GpuSequenceState::Layer> layers(specs.size());
  uint64_t bytes = 0;
  Allocator& a = dev_->allocator();
  for (size_t il = 0; il < specs.size(); ++il) {
    const LayerStateSpec& s = specs[il];
    if (!s.on_device) continue;
    auto& l = layers[il];
    if (s.k_row_elems > 0) {
      const uint64_t k_bytes = static_cast<uint64_t>(dtype_row_bytes(options.type_k, s.k_row_elems) * options.n_ctx);
      const uint64_t v_bytes = static_cast<uint64_t>(dtype_row_bytes(options.type_v, s.v_row_elems) * options.n_ctx);
      if (k_bytes > a.max_range() || v_bytes > a.max_range()) {
        return Status::bad_input(fmt::format("a {}-token KV cache of one layer ({:.0f} MiB) exceeds the GPU's largest "
                                             "buffer binding ({:.0f} MiB); use a smaller -c",
                                             options.n_ctx, k_bytes / 1048576.0, a.max_range() / 1048576.0));
      }
      l.k_row_bytes = dtype_row_bytes(options.type_k, s.k_row_elems);
      l.v_row_bytes = dtype_row_bytes(options.type_v, s.v_row_elems);
      ASSIGN_OR_RETURN(l.k, a.allocate(k_bytes, MemoryUse::kKvCache));
      ASSIGN_OR_RETURN(l.v, a.allocate(v_bytes, MemoryUse::kKvCache));
      bytes += k_bytes + v_bytes;
    }
    if (s.conv_state_elems > 0) {
      ASSIGN_OR_RETURN(l.conv, a.allocate(static_cast<uint64_t>(s.conv_state_elems) * 4, MemoryUse::kState));
      ASSIGN_OR_RETURN(l.ssm, a.allocate(static_cast<uint64_t>(s.ssm_state_elems) * 4, MemoryUse::kState));
      dev_->stream().fill_zero(l.conv);
      dev_->stream().fill_zero(l.ssm);
      bytes += static_cast<uint64_t>(s.conv_state_elems + s.ssm_state_elems) * 4;
    }
  }
  RETURN_IF_ERROR(dev_->stream().finish());
  return std::unique_ptr<DeviceState>(new GpuSequenceState(*dev_, std::move(layers), bytes));
}

GpuSequenceState* VulkanBackend::state_of(const SeqRows& s) {
  auto* st = dynamic_cast<GpuSequenceState*>(s.seq->device_state());
  if (!st) fail(Status::runtime("a sequence without GPU state reached a GPU layer (a bug)"));
  return st;
}

std::string VulkanBackend::describe() const {
  return fmt::format("Vulkan, {} kernels: {}", kernel_set_name(kernels_), dev_->info().name);
}

GpuMemoryReport VulkanBackend::memory() const {
  const Allocator& a = dev_->allocator();
  const DeviceInfo info = dev_->context().refreshed_info();
  return {.device = info.name,
          .weight_bytes = a.bytes(MemoryUse::kWeights),
          .kv_bytes = a.bytes(MemoryUse::kKvCache),
          .state_bytes = a.bytes(MemoryUse::kState),
          .scratch_bytes = a.bytes(MemoryUse::kScratch),
          .budget_bytes = info.budget_bytes,
          .used_bytes = info.used_bytes};
}

}  // namespace moetier::vk
