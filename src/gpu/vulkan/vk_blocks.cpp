// The blocks of model/blocks/ as GPU kernels (VulkanBackend's LayerExec methods). Each
// mirrors its CPU twin step for step (same activation rounding, same order of additions
// where the CPU has one), so GPU and CPU layers can be mixed freely. In prepare mode a
// block only uploads the weights it reads.
#include <bit>
#include <chrono>
#include <cmath>

#include "cpu/ops.h"
#include "gpu/vulkan/vk_exec.h"

namespace moetier::vk {

void VulkanBackend::rms_norm(Act in, const float* w, Act out) {
  const int64_t d = hp_.n_embd;
  const BufferRef wb = vector(w, d);
  if (prepare_ || !status_) return;
  flush_output({});
  const NormShape shape{.n = d, .n_rows = n_, .row_stride = d, .out_row_stride = d, .eps = hp_.rms_eps};
  prequantized_ = {};
  if (kernels_ == KernelSet::kFast && d % 256 == 0 && d / 32 <= 2048) {
    // The next block's input conversions come with the norm (the quantized weight types'
    // activation types: Q8_K for K-quants and IQ4_XS, Q8_0 for Q8_0 and Q4_0).
    fail(vk::rms_norm(*dev_, shape, rows(in), wb, rows(out),
                      {.q8_k = xq_, .q8_k_stride = gpu_activation_row_bytes(DType::Q8_K, d), .q8_0 = xq2_,
                       .q8_0_stride = gpu_activation_row_bytes(DType::Q8_0, d)}));
    prequantized_ = {.valid = true, .act = out};
    return;
  }
  fail(vk::rms_norm(*dev_, shape, rows(in), wb, rows(out)));
}

void VulkanBackend::add(Act x, Act y) {
  if (prepare_ || !status_) return;
  if (pending_.kind != PendingOutput::Kind::kNone && pending_.out == y && x != y) {
    flush_output(rows(x));  // the block's last op adds into x itself
    if (prequantized_.act == x) prequantized_ = {};
    return;
  }
  flush_output({});
  if (prequantized_.act == x) prequantized_ = {};
  const int64_t d = hp_.n_embd;
  fail(vk::add(*dev_, {.buffer = rows(x), .stride = d}, {.buffer = rows(y), .stride = d}, d, n_));
}

void VulkanBackend::attention(const AttentionWeights& w, const AttentionShape& s, Act in, int layer, Act out) {
  const int64_t hd = s.head_dim;
  const int64_t q_width = s.n_head * hd * (s.output_gate ? 2 : 1), kv_width = s.n_head_kv * hd, q_dim = s.n_head * hd;
  const BufferRef q_norm = vector(w.q_norm, hd), k_norm = vector(w.k_norm, hd);
  for (const auto* m : {&w.q, &w.k, &w.v, &w.out}) matrix(*m);
  if (prepare_ || !status_) return;
  flush_output({});
  const BufferRef q_full = big_[0], k = big_[1], v = big_[2], q = big_[3], attn = big_[4];
  begin_input(in);
  project_input(w.q, q_full, q_width);
  project_input(w.k, k, kv_width);
  project_input(w.v, v, kv_width);
  // Per-head RMSNorm: q out of [query | gate] into q; k in place.
  fail(vk::rms_norm(*dev_,
                    {.n = hd, .n_rows = n_, .n_heads = s.n_head, .head_stride = hd * (s.output_gate ? 2 : 1),
                     .row_stride = q_width, .out_head_stride = hd, .out_row_stride = q_dim, .eps = s.rms_eps},
                    q_full, q_norm, q));
  fail(vk::rms_norm(*dev_,
                    {.n = hd, .n_rows = n_, .n_heads = s.n_head_kv, .head_stride = hd, .row_stride = kv_width,
                     .out_head_stride = hd, .out_row_stride = kv_width, .eps = s.rms_eps},
                    k, k_norm, k));
  // Rotary angles per row, computed as the CPU does (in double) and uploaded once per
  // micro-batch: every attention layer of it sees the same positions.
  std::vector<int64_t> key = {s.n_rot, static_cast<int64_t>(std::bit_cast<uint32_t>(s.rope_base))};
  for (const SeqRows& sr : seqs_) key.insert(key.end(), {sr.row_begin, sr.n_rows, sr.seq->n_past()});
  if (key != cos_sin_key_) {
    host_cos_sin_.resize(static_cast<size_t>(n_ * s.n_rot));
    for (const SeqRows& sr : seqs_) {
      for (int64_t i = 0; i < sr.n_rows; ++i) {
        cpu::rope_angles(s.n_rot, sr.seq->n_past() + i, s.rope_base, host_cos_sin_.data() + (sr.row_begin + i) * s.n_rot);
      }
    }
    fail(dev_->upload(cos_sin_, host_cos_sin_.data(), host_cos_sin_.size() * 4));
    cos_sin_key_ = std::move(key);
  }
  fail(rope_neox(*dev_, q, n_, s.n_head, hd, q_dim, s.n_rot, cos_sin_));
  fail(rope_neox(*dev_, k, n_, s.n_head_kv, hd, kv_width, s.n_rot, cos_sin_));
  for (const SeqRows& sr : seqs_) {
    GpuSequenceState* st = state_of(sr);
    if (!st) return;
    const auto& cache = st->layer(layer);
    const DType type_k = sr.seq->options().type_k, type_v = sr.seq->options().type_v;
    const int64_t pos0 = sr.seq->n_past();
    fail(kv_store(*dev_, {.buffer = k, .stride = kv_width, .offset = sr.row_begin * kv_width}, sr.n_rows, kv_width,
                  cache.k, pos0, type_k));
    fail(kv_store(*dev_, {.buffer = v, .stride = kv_width, .offset = sr.row_begin * kv_width}, sr.n_rows, kv_width,
                  cache.v, pos0, type_v));
    const AttentionDispatch dispatch{.hd = hd, .n_head = s.n_head, .n_head_kv = s.n_head_kv, .n_rows = sr.n_rows,
                                     .row_base = sr.row_begin, .pos0 = pos0,
                                     .scale = 1.0f / std::sqrt(static_cast<float>(hd)), .k_type = type_k,
                                     .v_type = type_v, .has_gate = s.output_gate, .gate_row_stride = q_width,
                                     .gate_head_stride = 2 * hd, .gate_offset = hd};
    if (kernels_ == KernelSet::kFast) {
      fail(vk::flash_attention(*dev_, dispatch, q, cache.k, cache.v, scores_, attn, q_full));
    } else {
      fail(vk::attention(*dev_, dispatch, q, cache.k, cache.v, scores_, attn, q_full));
    }
  }
  defer_projection(w.out, attn, q_dim, out);
}

void VulkanBackend::delta_net(const DeltaNetWeights& w, const DeltaNetShape& s, Act in, int layer, Act out) {
  const int64_t ch = s.channels(), vd = s.value_dim(), nv = s.n_v_heads, dk = s.d_state;
  for (const auto* m : {&w.qkv, &w.gate, &w.beta, &w.alpha, &w.out}) matrix(*m);
  const BufferRef conv_w = vector(w.conv, ch * s.d_conv);
  // dt_bias | A | norm in one buffer (the kernel has 8 bindings).
  BufferRef params;
  if (auto it = vectors_.find(w.dt_bias); it != vectors_.end()) {
    params = it->second;
  } else {
    std::vector<float> p(static_cast<size_t>(2 * nv + dk));
    std::copy(w.dt_bias, w.dt_bias + nv, p.begin());
    std::copy(w.a, w.a + nv, p.begin() + nv);
    std::copy(w.norm, w.norm + dk, p.begin() + 2 * nv);
    auto b = dev_->create_buffer(p.data(), p.size() * 4, MemoryUse::kWeights);
    if (!b) return fail(b.status());
    params = *b;
    vectors_.emplace(w.dt_bias, params);
  }
  if (prepare_ || !status_) return;
  flush_output({});
  const BufferRef qkv = big_[0], conv_out = big_[1], z = big_[2], y = big_[3];
  begin_input(in);
  project_input(w.qkv, qkv, ch);
  project_input(w.gate, z, vd);
  project_input(w.beta, small_a_, nv);
  project_input(w.alpha, small_b_, nv);
  // A verify batch under a rollback journal (speculative decoding) runs token by token, and
  // the state after each token is copied into its journal slot; otherwise one dispatch per
  // sequence. Token by token gives the same bits: the recurrence is sequential either way.
  const auto journal_slot = [](const SeqRows& sr) { return sr.seq->journal_slot(sr.seq->n_past()); };
  for (const SeqRows& sr : seqs_) {
    GpuSequenceState* st = state_of(sr);
    if (!st) return;
    const GpuSequenceState::Layer& ls = st->layer(layer);
    if (const int64_t slot0 = journal_slot(sr); slot0 >= 0) {
      for (int64_t r = 0; r < sr.n_rows; ++r) {
        fail(ssm_conv(*dev_, {.n_rows = 1, .channels = ch, .taps = s.d_conv, .row_begin = sr.row_begin + r}, qkv,
                      conv_w, ls.conv, conv_out));
        if (sr.seq->journal_slot(sr.seq->n_past() + r) >= 0) {
          dev_->stream().copy(ls.conv, st->journal_conv(layer, slot0 + r), ls.conv.size);
        }
      }
      continue;
    }
    fail(ssm_conv(*dev_, {.n_rows = sr.n_rows, .channels = ch, .taps = s.d_conv, .row_begin = sr.row_begin}, qkv,
                  conv_w, ls.conv, conv_out));
  }
  fail(l2_norm(*dev_,
               {.n = dk, .n_rows = n_, .n_heads = 2 * s.n_k_heads, .head_stride = dk, .row_stride = ch,
                .out_head_stride = dk, .out_row_stride = ch, .eps = s.rms_eps},
               conv_out, conv_out));
  for (const SeqRows& sr : seqs_) {
    GpuSequenceState* st = state_of(sr);
    if (!st) return;
    const DeltaRuleDispatch dispatch{.n_rows = sr.n_rows, .row_begin = sr.row_begin, .dk = dk, .dv = dk,
                                     .n_k_heads = s.n_k_heads, .n_v_heads = nv, .channels = ch,
                                     .key_dim = s.key_dim(), .value_dim = vd,
                                     .q_scale = 1.0f / std::sqrt(static_cast<float>(dk)), .eps = s.rms_eps};
    const BufferRef& ssm = st->layer(layer).ssm;
    const auto run = [&](const DeltaRuleDispatch& dd) {
      if (kernels_ == KernelSet::kFast) {
        fail(delta_rule_fast(*dev_, dd, conv_out, small_a_, small_b_, params, ssm, z, y));
      } else {
        fail(delta_rule(*dev_, dd, conv_out, small_a_, small_b_, params, ssm, z, y));
      }
    };
    const int64_t slot0 = journal_slot(sr);
    if (slot0 < 0) {
      run(dispatch);
      continue;
    }
    for (int64_t r = 0; r < sr.n_rows; ++r) {
      DeltaRuleDispatch one = dispatch;
      one.n_rows = 1;
      one.row_begin = sr.row_begin + r;
      run(one);
      if (sr.seq->journal_slot(sr.seq->n_past() + r) >= 0) {
        dev_->stream().copy(ssm, st->journal_ssm(layer, slot0 + r), ssm.size);
      }
    }
  }
  defer_projection(w.out, y, vd, out);
}

void VulkanBackend::moe(const MoeWeights& w, const MoeShape& s, Act in, Act out) {
  const int64_t d = s.n_embd, k = s.n_expert_used, n_pairs = n_ * s.n_expert_used;
  const bool gpu_experts = options_.experts_on_gpu[static_cast<size_t>(layer_)];
  matrix(w.router);
  if (w.has_shared) {
    for (const auto* m : {&w.shared_gate_inp, &w.gate_shexp, &w.up_shexp, &w.down_shexp}) matrix(*m);
  }
  if (gpu_experts) {
    for (const auto* m : {&w.gate_exps, &w.up_exps, &w.down_exps}) matrix(*m);
  } else if (prepare_) {
    expert_cache(w);  // a VRAM expert cache is allocated at load
  }
  if (prepare_ || !status_) return;
  flush_output({});
  const BufferRef logits = big_[0];
  begin_input(in);
  project_input(w.router, logits, s.n_expert);

  if (gpu_experts) {
    const GpuMatrix* gate = matrix(w.gate_exps);
    const GpuMatrix* up = matrix(w.up_exps);
    const GpuMatrix* down = matrix(w.down_exps);
    if (!gate || !up || !down) return;
    fail(moe_router(*dev_, kernels_, logits, s.n_expert, k, n_, ids_, weights_, pair_rows_));
    routed_on_gpu(s, *gate, *up, *down, n_pairs);
    shared_expert(w, s);
    defer_combine(true, w.has_shared, k, out);
    return;
  }

  // A prompt batch: stream this layer's experts to the GPU when that is faster.
  if (stream_experts(w, n_pairs)) {
    // The three stacks go into the streaming area, each a run of binding-sized parts.
    std::vector<GpuMatrix> staged;
    size_t piece = 0;
    uint64_t used = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const cpu::WeightMatrix* m : {&w.gate_exps, &w.up_exps, &w.down_exps}) {
      GpuMatrix g{.type = m->type, .n_in = m->n_in, .n_out = m->n_out, .n_mat = m->n_mat, .row_bytes = m->row_bytes};
      const uint64_t mat_bytes = static_cast<uint64_t>(m->row_bytes * m->n_out);
      for (int64_t first = 0; first < m->n_mat;) {
        // Matrices that still fit the current piece.
        while (piece < stream_area_.buffers.size() && stream_area_.buffers[piece].size - used < mat_bytes) {
          ++piece;
          used = 0;
        }
        if (piece == stream_area_.buffers.size()) return fail(Status::runtime("expert streaming area too small (a bug)"));
        const BufferRef& b = stream_area_.buffers[piece];
        const int64_t count = std::min<int64_t>(m->n_mat - first, static_cast<int64_t>((b.size - used) / mat_bytes));
        const BufferRef part = b.slice(used, mat_bytes * static_cast<uint64_t>(count));
        fail(dev_->upload(part, m->data + mat_bytes * static_cast<uint64_t>(first), part.size));
        g.parts.push_back({.buffer = part, .first = first, .count = count});
        used += (part.size + 255) / 256 * 256;
        first += count;
      }
      staged.push_back(std::move(g));
    }
    fail(moe_router(*dev_, kernels_, logits, s.n_expert, k, n_, ids_, weights_, pair_rows_));
    routed_on_gpu(s, staged[0], staged[1], staged[2], n_pairs);
    shared_expert(w, s);
    fail(moe_combine(*dev_, {.experts = big_[4], .weights = weights_, .shared = big_[5], .shared_gate = small_a_,
                             .out = rows(out), .n_embd = d, .k = k, .n_rows = n_, .has_routed = true,
                             .has_shared = w.has_shared}));
    fail(dev_->stream().finish());  // the area is reused by the next layer
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double bytes = static_cast<double>(stream_area_.bytes);
    const double upload = h2d_gbps_ > 0 ? bytes / (h2d_gbps_ * 1e9) : 0;
    const double per_pair = std::max(0.0, seconds - upload) / static_cast<double>(n_pairs);
    gpu_seconds_per_pair_ = gpu_seconds_per_pair_ > 0 ? 0.7 * gpu_seconds_per_pair_ + 0.3 * per_pair : per_pair;
    ++streamed_layers_;
    return;
  }

  // Some experts copied to VRAM: those on the GPU, the rest on the CPU, at once.
  if (ExpertCacheLayer* cache = expert_cache(w)) return moe_with_expert_cache(w, s, in, out, *cache, logits);

  // Routed experts on the CPU: hand it the normalised rows and the router logits, run the
  // shared expert on the GPU meanwhile, then add the CPU's routed sum.
  if (!download_for_cpu_experts(s, in, logits)) return;
  shared_expert(w, s);
  fail(dev_->stream().submit());
  cpu_.begin(host_a_.data(), seqs_, *pool_, profiler_);
  const auto t0 = std::chrono::steady_clock::now();
  cpu_.moe_routed(w, s, host_a_.data(), {.router_logits = host_b_.data()}, host_c_.data());
  if (n_ >= options_.op_offload_min_tokens) {  // the cost model's CPU side, from prompt batches only
    const double per_pair =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / static_cast<double>(n_pairs);
    cpu_seconds_per_pair_ = cpu_seconds_per_pair_ > 0 ? 0.7 * cpu_seconds_per_pair_ + 0.3 * per_pair : per_pair;
  }
  fail(dev_->upload(rows(out), host_c_.data(), host_c_.size() * 4));
  defer_combine(false, w.has_shared, k, out);
}

bool VulkanBackend::download_for_cpu_experts(const MoeShape& s, Act in, const BufferRef& logits) {
  host_a_.resize(static_cast<size_t>(n_ * s.n_embd));
  host_b_.resize(static_cast<size_t>(n_ * s.n_expert));
  host_c_.resize(static_cast<size_t>(n_ * s.n_embd));
  const Device::Download downloads[] = {{.src = rows(in), .data = host_a_.data(), .bytes = host_a_.size() * 4},
                                        {.src = logits, .data = host_b_.data(), .bytes = host_b_.size() * 4}};
  fail(dev_->download(downloads));
  return status_.is_ok();
}

void VulkanBackend::shared_expert(const MoeWeights& w, const MoeShape& s) {
  if (!w.has_shared) return;
  project_input(w.shared_gate_inp, small_a_, 1);
  if (fuse_swiglu(w.gate_shexp, w.up_shexp)) {
    project_input(w.gate_shexp, big_[3], s.n_ff_shexp, &w.up_shexp);
  } else {
    project_input(w.gate_shexp, big_[1], s.n_ff_shexp);
    project_input(w.up_shexp, big_[2], s.n_ff_shexp);
    fail(silu_mul(*dev_, {.buffer = big_[1], .stride = s.n_ff_shexp}, {.buffer = big_[2], .stride = s.n_ff_shexp},
                  {.buffer = big_[3], .stride = s.n_ff_shexp}, s.n_ff_shexp, n_));
  }
  project(w.down_shexp, big_[3], n_, s.n_ff_shexp, big_[5], s.n_embd);
}

// The routed experts of the n_pairs pairs in ids_/pair_rows_ on the GPU: gate and up per
// pair, SwiGLU, down per pair into big_[4] (pair order).
void VulkanBackend::routed_on_gpu(const MoeShape& s, const GpuMatrix& gate, const GpuMatrix& up,
                                  const GpuMatrix& down, int64_t n_pairs) {
  const int64_t d = s.n_embd;
  const Converted xg = input_for(gate);
  const Converted xu = input_for(up);
  // Prompt batches (fast kernels): the pairs grouped by expert once, every stack then tiled
  // per expert; decode: one mat-vec per pair, gate and up fused with the SwiGLU.
  const bool grouped = kernels_ == KernelSet::kFast && n_pairs > kMatvecMaxCols;
  const MatmulIdArgs pairs{.ids = ids_, .rows = pair_rows_, .n_pairs = n_pairs,
                           .group_offsets = grouped ? group_offsets_ : BufferRef{},
                           .group_order = grouped ? group_order_ : BufferRef{}, .n_rows_x = n_};
  const bool fused = kernels_ == KernelSet::kFast && !grouped && gate.type == up.type && gate.n_out == up.n_out &&
                     gate.parts.size() == up.parts.size();
  // The grouping is made by the first stack that runs tiled and reused by the next ones (a
  // stack whose rows the tiles do not take runs as mat-vecs and leaves it to the next).
  bool have_grouping = false;
  auto run = [&](MatmulIdArgs a) {
    a.grouped = have_grouping;
    fail(matmul_id(*dev_, kernels_, a));
    have_grouping = have_grouping || (grouped && matmat_supports(*a.w));
  };
  if (fused) {
    auto a = pairs;
    a.w = &gate, a.up = &up, a.xq = xg.buffer, a.x_row_bytes = xg.row_bytes, a.y = big_[3], a.y_stride = s.n_ff_exp;
    run(a);
  } else {
    auto a = pairs;
    a.w = &gate, a.xq = xg.buffer, a.x_row_bytes = xg.row_bytes, a.y = big_[1], a.y_stride = s.n_ff_exp;
    run(a);
    a.w = &up, a.xq = xu.buffer, a.x_row_bytes = xu.row_bytes, a.y = big_[2];
    run(a);
    fail(silu_mul(*dev_, {.buffer = big_[1], .stride = s.n_ff_exp}, {.buffer = big_[2], .stride = s.n_ff_exp},
                  {.buffer = big_[3], .stride = s.n_ff_exp}, s.n_ff_exp, n_pairs));
  }
  const Converted xd = convert(down, big_[3], n_pairs, s.n_ff_exp, s.n_ff_exp, xq3_);
  // The down products' rows are the pairs themselves (iota).
  auto a = pairs;
  a.w = &down, a.xq = xd.buffer, a.x_row_bytes = xd.row_bytes, a.rows = iota_, a.y = big_[4], a.y_stride = d;
  run(a);
}

bool VulkanBackend::stream_experts(const MoeWeights& w, int64_t n_pairs) {
  if (!options_.op_offload || stream_disabled_ || n_ < options_.op_offload_min_tokens) return false;
  // Experts read from the file on demand (engine/expert_store.h) are not all in memory.
  if (w.experts != nullptr) return false;
  const uint64_t bytes = static_cast<uint64_t>(w.gate_exps.row_bytes * w.gate_exps.n_out * w.gate_exps.n_mat +
                                               w.up_exps.row_bytes * w.up_exps.n_out * w.up_exps.n_mat +
                                               w.down_exps.row_bytes * w.down_exps.n_out * w.down_exps.n_mat);
  if (stream_area_.bytes < bytes) {
    // The area for the largest layer's experts, allocated once; if the GPU has no room for it
    // (e.g. --vram-budget, or --fit's budget would be passed), streaming is off for good.
    Allocator& a = dev_->allocator();
    if (options_.op_offload_limit_bytes > 0 && a.device_bytes() + bytes > options_.op_offload_limit_bytes) {
      stream_disabled_ = true;
      return false;
    }
    stream_area_ = {};
    const uint64_t piece = std::min<uint64_t>(a.max_range() / 256 * 256, 256ull << 20);
    for (uint64_t left = bytes + 3 * 256 * 16; left > 0;) {
      const uint64_t n = std::min(piece, left);
      auto b = a.allocate(n, MemoryUse::kScratch);
      if (!b) {
        stream_disabled_ = true;
        stream_area_ = {};
        return false;
      }
      stream_area_.buffers.push_back(*b);
      stream_area_.bytes += n;
      left -= n;
    }
    // Host→device bandwidth, measured once on this area.
    std::vector<uint8_t> probe(std::min<uint64_t>(64ull << 20, stream_area_.buffers[0].size));
    const auto t0 = std::chrono::steady_clock::now();
    if (!dev_->upload(stream_area_.buffers[0], probe.data(), probe.size()) || !dev_->stream().finish()) return false;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    h2d_gbps_ = s > 0 ? static_cast<double>(probe.size()) / s / 1e9 : 0;
  }
  if (options_.op_offload_always) return true;
  if (cpu_seconds_per_pair_ <= 0 || h2d_gbps_ <= 0) return false;  // measure the CPU first
  const double cpu = cpu_seconds_per_pair_ * static_cast<double>(n_pairs);
  const double gpu = static_cast<double>(bytes) / (h2d_gbps_ * 1e9) + gpu_seconds_per_pair_ * static_cast<double>(n_pairs);
  return gpu < cpu;
}

}  // namespace moetier::vk
