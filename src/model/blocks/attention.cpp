#include "model/blocks/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "cpu/dot.h"
#include "cpu/ops.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier {

namespace {

// A K or V row into the cache: f32, f16 (round to nearest even), or Q8_0 / Q4_0 blocks
// (-ctk/-ctv q8_0|q4_0: the reference quantizers, as llama-quantize rounds).
void store_row(DType type, const float* src, int64_t n, uint8_t* dst) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::F16: f32_to_fp16_row(src, reinterpret_cast<uint16_t*>(dst), n); break;
    default: type_ops(type)->quantize_row(src, dst, n); break;
  }
}

// Elements [first, first + n) of a cache row as f32 (for block types, first and n are
// multiples of the block size: a head's slice).
void load_row(DType type, const uint8_t* row, int64_t first, int64_t n, float* out) {
  switch (type) {
    case DType::F32:
      std::memcpy(out, reinterpret_cast<const float*>(row) + first, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::F16: fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row) + first, out, n); break;
    default: {
      const DTypeTraits& t = dtype_traits(type);
      type_ops(type)->dequantize_row(row + first / t.block_elems * t.block_bytes, out, n);
      break;
    }
  }
}

// Above this many bytes of part states a deep decode is not split over threads (it then runs
// one thread per task: the same results, bit for bit).
constexpr size_t kMaxPartialBytes = size_t{64} << 20;

// The flash path: tasks are (sequence, KV head, block of query rows) with all the group's
// query heads; when there are fewer tasks than threads (decode), tasks with several parts
// are split into one unit per part and their part states folded afterwards.
void flash_attention(const AttentionShape& s, std::span<const SeqRows> seqs, int layer, AttentionScratch& scratch,
                     ThreadPool& pool) {
  const int64_t hd = s.head_dim;
  const int64_t group = s.n_head / s.n_head_kv;
  const int64_t kv_width = s.n_head_kv * hd;
  const int64_t stride = s.n_head * hd;  // floats between rows of q, gate and attn
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Items cover every KV head (whole contiguous cache rows: see cpu/flash_attention.h)
  // unless that leaves threads idle (a short decode: one item of one part); then one KV
  // head per item. Either way each row's result is the same, bit for bit.
  const auto count_units = [&](int64_t rows_per_item) {
    int64_t n_items = 0, n_parts = 0;
    for (const SeqRows& sr : seqs) {
      const int64_t blocks = (sr.n_rows + rows_per_item - 1) / rows_per_item;
      n_items += blocks;
      n_parts += blocks * ((sr.seq->n_past() + sr.n_rows + cpu::kFlashPartKeys - 1) / cpu::kFlashPartKeys);
    }
    return n_items >= pool.size() ? n_items : n_parts;
  };
  int64_t kv_per_item = s.n_head_kv;
  int64_t rows_per_item = std::max<int64_t>(1, cpu::kFlashItemVectors / s.n_head);
  if (s.n_head_kv > 1 && count_units(rows_per_item) < pool.size()) {
    kv_per_item = 1;
    rows_per_item = std::max<int64_t>(1, cpu::kFlashItemVectors / group);
  }
  auto& items = scratch.flash_items;
  items.clear();
  for (const SeqRows& sr : seqs) {
    SequenceState& seq = *sr.seq;
    const KvCacheOptions& opt = seq.options();
    for (int64_t begin = 0; begin < sr.n_rows; begin += rows_per_item) {
      const int64_t t = sr.row_begin + begin;  // first row of the block in the micro-batch
      for (int64_t kvh = 0; kvh < s.n_head_kv; kvh += kv_per_item) {
        const int64_t at = (t * s.n_head + kvh * group) * hd;
        items.push_back({.task = {.head_dim = hd,
                                  .n_heads = group,
                                  .n_kv_heads = kv_per_item,
                                  .n_rows = std::min(rows_per_item, sr.n_rows - begin),
                                  .pos0 = seq.n_past() + begin,
                                  .q = scratch.q.data() + at,
                                  .q_row_stride = stride,
                                  .gate = s.output_gate ? scratch.gate.data() + at : nullptr,
                                  .gate_row_stride = stride,
                                  .out = scratch.attn.data() + at,
                                  .out_row_stride = stride,
                                  .k = {.data = seq.k_row(layer, 0),
                                        .row_bytes = dtype_row_bytes(opt.type_k, kv_width),
                                        .first = kvh * hd,
                                        .type = opt.type_k},
                                  .v = {.data = seq.v_row(layer, 0),
                                        .row_bytes = dtype_row_bytes(opt.type_v, kv_width),
                                        .first = kvh * hd,
                                        .type = opt.type_v},
                                  .scale = scale}});
      }
    }
  }
  // The costliest tasks (most rows × keys) first: threads take them from a shared counter.
  const auto cost = [](const AttentionScratch::FlashItem& it) { return it.task.n_rows * it.task.n_keys(); };
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) { return cost(a) > cost(b); });

  // Split over parts only where threads would otherwise idle.
  const int64_t n_items = static_cast<int64_t>(items.size());
  size_t slots = 0, slot_f = 0, slot_d = 0;
  if (n_items < pool.size()) {
    for (const auto& it : items) {
      if (it.task.n_parts() < 2) continue;
      slots += static_cast<size_t>(it.task.n_parts());
      slot_f += static_cast<size_t>(it.task.n_parts() * it.task.n_vectors() * (hd + 1));
      slot_d += static_cast<size_t>(it.task.n_parts() * it.task.n_vectors());
    }
    if (slot_f * sizeof(float) + slot_d * sizeof(double) > kMaxPartialBytes) slots = 0;
  }
  auto& units = scratch.flash_units;
  units.clear();
  if (slots > 0) {
    scratch.partial_f.resize(std::max(scratch.partial_f.size(), slot_f));
    scratch.partial_d.resize(std::max(scratch.partial_d.size(), slot_d));
    scratch.flash_partials.resize(slots);
    size_t slot = 0, f = 0, d = 0;
    for (int64_t i = 0; i < n_items; ++i) {
      auto& it = items[static_cast<size_t>(i)];
      const int64_t n_parts = it.task.n_parts(), n_vec = it.task.n_vectors();
      if (n_parts < 2) {
        units.push_back({.item = i, .part = -1});
        continue;
      }
      it.partial = static_cast<int64_t>(slot);
      for (int64_t p = 0; p < n_parts; ++p) {
        scratch.flash_partials[slot++] = {.o = scratch.partial_f.data() + f,
                                          .m = scratch.partial_f.data() + f + n_vec * hd,
                                          .l = scratch.partial_d.data() + d};
        f += static_cast<size_t>(n_vec * (hd + 1));
        d += static_cast<size_t>(n_vec);
        units.push_back({.item = i, .part = p});
      }
    }
  } else {
    for (int64_t i = 0; i < n_items; ++i) units.push_back({.item = i, .part = -1});
  }

  scratch.flash.resize(static_cast<size_t>(pool.size()));
  const cpu::FlashKernels& kernels = cpu::flash_kernels(cpu_features());
  const int64_t n_units = static_cast<int64_t>(units.size());
  std::atomic<int64_t> next_unit{0}, next_item{0};
  pool.run([&](int thread) {
    cpu::FlashScratch& fs = scratch.flash[static_cast<size_t>(thread)];
    for (int64_t u; (u = next_unit.fetch_add(1, std::memory_order_relaxed)) < n_units;) {
      const AttentionScratch::FlashUnit& unit = units[static_cast<size_t>(u)];
      const auto& it = items[static_cast<size_t>(unit.item)];
      if (unit.part < 0) {
        kernels.attend(it.task, fs);
      } else {
        const cpu::FlashPartial& slot = scratch.flash_partials[static_cast<size_t>(it.partial + unit.part)];
        kernels.attend_part(it.task, unit.part, fs, slot);
      }
    }
    if (slots == 0) return;
    pool.barrier();  // every part state is written
    for (int64_t i; (i = next_item.fetch_add(1, std::memory_order_relaxed)) < n_items;) {
      const auto& it = items[static_cast<size_t>(i)];
      if (it.partial < 0) continue;
      kernels.combine(it.task, scratch.flash_partials.data() + it.partial, it.task.n_parts(), fs);
    }
  });
}

}  // namespace

void attention_block(const AttentionWeights& w, const AttentionShape& s, const float* x,
                     std::span<const SeqRows> seqs, int layer, float* out, AttentionScratch& scratch,
                     ThreadPool& pool, const AttentionOptions& options) {
  const int64_t n = seqs.back().row_begin + seqs.back().n_rows;
  const int64_t hd = s.head_dim;
  const int64_t q_width = s.n_head * hd * (s.output_gate ? 2 : 1);
  const int64_t kv_width = s.n_head_kv * hd;

  scratch.q_full.resize(static_cast<size_t>(n * q_width));
  scratch.k.resize(static_cast<size_t>(n * kv_width));
  scratch.v.resize(static_cast<size_t>(n * kv_width));
  scratch.input.reset(x, n, s.n_embd);  // q, k, v share one conversion per type
  cpu::matmul_cached(w.q, 0, scratch.input, scratch.q_full.data(), pool);
  cpu::matmul_cached(w.k, 0, scratch.input, scratch.k.data(), pool);
  cpu::matmul_cached(w.v, 0, scratch.input, scratch.v.data(), pool);

  // Split [query | gate] per head; per-head RMSNorm on q and k; rotary on both; K/V rows
  // into each sequence's cache.
  scratch.q.resize(static_cast<size_t>(n * s.n_head * hd));
  scratch.gate.resize(s.output_gate ? static_cast<size_t>(n * s.n_head * hd) : 0);
  scratch.rope.resize(static_cast<size_t>(s.n_rot));
  int64_t max_keys = 0;  // the most keys any row attends to
  for (const SeqRows& sr : seqs) {
    SequenceState& seq = *sr.seq;
    const int64_t pos0 = seq.n_past();
    max_keys = std::max(max_keys, pos0 + sr.n_rows);
    const auto& opt = seq.options();
    for (int64_t i = 0; i < sr.n_rows; ++i) {
      const int64_t t = sr.row_begin + i;
      cpu::rope_angles(s.n_rot, pos0 + i, s.rope_base, scratch.rope.data());
      for (int64_t h = 0; h < s.n_head; ++h) {
        const float* src = scratch.q_full.data() + t * q_width + h * hd * (s.output_gate ? 2 : 1);
        float* q = scratch.q.data() + (t * s.n_head + h) * hd;
        cpu::rms_norm(src, w.q_norm, hd, s.rms_eps, q);
        cpu::rope_neox_with(q, s.n_rot, scratch.rope.data());
        if (s.output_gate) std::memcpy(scratch.gate.data() + (t * s.n_head + h) * hd, src + hd, hd * sizeof(float));
      }
      for (int64_t h = 0; h < s.n_head_kv; ++h) {
        float* k = scratch.k.data() + t * kv_width + h * hd;
        cpu::rms_norm(k, w.k_norm, hd, s.rms_eps, k);
        cpu::rope_neox_with(k, s.n_rot, scratch.rope.data());
      }
      store_row(opt.type_k, scratch.k.data() + t * kv_width, kv_width, seq.k_row(layer, pos0 + i));
      store_row(opt.type_v, scratch.v.data() + t * kv_width, kv_width, seq.v_row(layer, pos0 + i));
    }
  }

  scratch.attn.resize(static_cast<size_t>(n * s.n_head * hd));
  bool flash = options.flash;
  for (const SeqRows& sr : seqs) {
    const KvCacheOptions& opt = sr.seq->options();
    flash = flash && cpu::flash_attention_supports(hd, opt.type_k, opt.type_v);
  }
  if (flash) {
    flash_attention(s, seqs, layer, scratch, pool);
    cpu::matmul_f32(w.out, 0, scratch.attn.data(), n, out, scratch.act, pool);
    return;
  }

  // Causal attention, the exact path (-fa off). Work items are (sequence, KV head, block of
  // its query rows): the item converts its KV head's K and V rows to f32 once
  // ([n_keys][head_dim] each) and serves all n_head / n_head_kv query heads that read that KV
  // head (query head h reads KV head h / group) for its rows. Each row's arithmetic does not
  // depend on the blocking.
  const int64_t group = s.n_head / s.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  scratch.items.clear();
  for (const SeqRows& sr : seqs) {
    const int64_t blocks =
        std::min<int64_t>(sr.n_rows, std::max<int64_t>(1, 2 * pool.size() / (s.n_head_kv * static_cast<int64_t>(seqs.size()))));
    for (int64_t kvh = 0; kvh < s.n_head_kv; ++kvh) {
      for (int64_t b = 0; b < blocks; ++b) {
        scratch.items.push_back({.seq = &sr,
                                 .kv_head = kvh,
                                 .row_begin = sr.row_begin + sr.n_rows * b / blocks,
                                 .row_end = sr.row_begin + sr.n_rows * (b + 1) / blocks});
      }
    }
  }
  scratch.scores.resize(static_cast<size_t>(pool.size() * group * max_keys));
  scratch.kv_f32.resize(static_cast<size_t>(pool.size() * 2 * max_keys * hd));
  const cpu::DotKernel& qk = *cpu::best_dot_kernel(DType::F32, cpu_features());
  const int64_t n_items = static_cast<int64_t>(scratch.items.size());
  pool.parallel_for(n_items, 1, [&](int64_t begin, int64_t end, int thread) {
    float* scores = scratch.scores.data() + thread * group * max_keys;  // [group][n_keys]
    float* keys = scratch.kv_f32.data() + thread * 2 * max_keys * hd;
    float* values = keys + max_keys * hd;
    for (int64_t it = begin; it < end; ++it) {
      const AttentionScratch::Item& item = scratch.items[static_cast<size_t>(it)];
      SequenceState& seq = *item.seq->seq;
      const int64_t pos0 = seq.n_past() - item.seq->row_begin;  // position of row t is pos0 + t
      const DType type_k = seq.options().type_k, type_v = seq.options().type_v;
      const int64_t kvh = item.kv_head;
      const int64_t n_keys_max = pos0 + item.row_end;  // the block's last row sees these keys
      for (int64_t p = 0; p < n_keys_max; ++p) {
        load_row(type_k, seq.k_row(layer, p), kvh * hd, hd, keys + p * hd);
        load_row(type_v, seq.v_row(layer, p), kvh * hd, hd, values + p * hd);
      }
      for (int64_t t = item.row_begin; t < item.row_end; ++t) {
        const int64_t n_keys = pos0 + t + 1;
        // Scores of the group's query heads (contiguous rows of q) against every key: one
        // key row against up to kMaxDotRows query rows per kernel call. The F32 kernels sum
        // in double lanes, which keeps llama.cpp's logits (float-lane sums do not).
        const float* q_group = scratch.q.data() + (t * s.n_head + kvh * group) * hd;
        float tile[cpu::kMaxDotRows];
        for (int64_t h0 = 0; h0 < group; h0 += cpu::kMaxDotRows) {
          const int m = static_cast<int>(std::min<int64_t>(cpu::kMaxDotRows, group - h0));
          for (int64_t p = 0; p < n_keys; ++p) {
            cpu::dot_rows(qk, hd, keys + p * hd, q_group + h0 * hd, hd * static_cast<int64_t>(sizeof(float)), m, tile);
            for (int j = 0; j < m; ++j) scores[(h0 + j) * max_keys + p] = tile[j] * scale;
          }
        }
        for (int64_t hg = 0; hg < group; ++hg) {
          const int64_t h = kvh * group + hg;
          float* sc = scores + hg * max_keys;
          cpu::softmax(sc, n_keys);
          float* o = scratch.attn.data() + (t * s.n_head + h) * hd;
          std::memset(o, 0, hd * sizeof(float));
          for (int64_t p = 0; p < n_keys; ++p) cpu::axpy(sc[p], values + p * hd, hd, o);
          if (s.output_gate) {
            const float* g = scratch.gate.data() + (t * s.n_head + h) * hd;
            for (int64_t i = 0; i < hd; ++i) o[i] *= cpu::sigmoid(g[i]);
          }
        }
      }
    }
  });
  cpu::matmul_f32(w.out, 0, scratch.attn.data(), n, out, scratch.act, pool);
}

}  // namespace moetier
