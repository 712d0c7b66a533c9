#include "state/sequence_state.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "cpu/delta_rule.h"
#include "cpu/ops.h"
#include "tensor/fp16.h"
#include "tensor/type_ops.h"

namespace moetier {

Result<SequenceState> SequenceState::create(const std::vector<LayerStateSpec>& layers,
                                            const KvCacheOptions& options) {
  for (const DType t : {options.type_k, options.type_v}) {
    if (t != DType::F32 && t != DType::F16 && t != DType::Q8_0 && t != DType::Q4_0) {
      return Status::bad_input(
          fmt::format("KV cache type '{}' is not supported (use f32, f16, q8_0 or q4_0)", dtype_name(t)));
    }
  }
  for (const auto& spec : layers) {
    if (!spec.on_device && spec.ssm_state_elems > 0 && spec.ssm_heads * spec.ssm_d_k * spec.ssm_d_v != spec.ssm_state_elems) {
      return Status::bad_input(fmt::format("recurrent state of {} floats is not {} heads of {} x {}", spec.ssm_state_elems,
                                           spec.ssm_heads, spec.ssm_d_k, spec.ssm_d_v));
    }
    // Block types cut each head's slice of a row into whole blocks of 32.
    for (const auto& [t, elems] : {std::pair{options.type_k, spec.k_row_elems}, std::pair{options.type_v, spec.v_row_elems}}) {
      if (elems > 0 && elems % dtype_traits(t).block_elems != 0) {
        return Status::bad_input(fmt::format("KV cache type {} needs rows of a multiple of {} elements (got {})",
                                             dtype_name(t), dtype_traits(t).block_elems, elems));
      }
    }
  }
  if (options.n_ctx <= 0) return Status::bad_input("context size must be positive");
  SequenceState s;
  s.options_ = options;
  try {
    for (const auto& spec : layers) {
      Layer l;
      l.spec = spec;
      l.k_row_bytes = dtype_row_bytes(options.type_k, spec.k_row_elems);
      l.v_row_bytes = dtype_row_bytes(options.type_v, spec.v_row_elems);
      if (spec.on_device) {  // the GPU holds this layer's memory
        s.layers_.push_back(std::move(l));
        continue;
      }
      l.k.resize(static_cast<size_t>(l.k_row_bytes * options.n_ctx));
      l.v.resize(static_cast<size_t>(l.v_row_bytes * options.n_ctx));
      l.conv.assign(static_cast<size_t>(spec.conv_state_elems), 0.0f);
      l.ssm_elems = spec.ssm_state_elems;
      if (l.ssm_elems > 0) {
        RETURN_IF_ERROR(l.grow_ssm_store(1));
        l.ssm_slot.assign(1, 0);
      }
      s.layers_.push_back(std::move(l));
    }
  } catch (const std::bad_alloc&) {
    return Status::runtime(fmt::format("out of memory allocating the KV cache for {} tokens", options.n_ctx));
  }
  return s;
}

void SequenceState::clear() {
  n_past_ = 0;
  journal_capacity_ = 0;
  if (device_) device_->clear();
  for (auto& l : layers_) {
    std::fill(l.conv.begin(), l.conv.end(), 0.0f);
    l.ssm_pending = -1;
    if (l.ssm_elems > 0) std::fill_n(l.ssm(), l.ssm_elems, 0.0f);
  }
}

int64_t SequenceState::Layer::record_elems() const {
  return spec.ssm_heads * cpu::delta_rule_record_elems(spec.ssm_d_k, spec.ssm_d_v);
}

void SequenceState::Layer::read_ssm(float* out) const {
  if (ssm_pending < 0) {
    std::memcpy(out, ssm_place(0), static_cast<size_t>(ssm_elems) * sizeof(float));
    return;
  }
  const int64_t head = spec.ssm_d_k * spec.ssm_d_v, rec_head = cpu::delta_rule_record_elems(spec.ssm_d_k, spec.ssm_d_v);
  for (int64_t j = 0; j < spec.ssm_heads; ++j) {
    cpu::delta_rule_replay({.source = ssm_place(1) + j * head,
                            .state = out + j * head,
                            .d_k = spec.ssm_d_k,
                            .d_v = spec.ssm_d_v,
                            .records = ssm_records[replay_buf].data() + j * rec_head,
                            .n = ssm_pending,
                            .record_stride = record_elems()});
  }
}

float* SequenceState::ssm_state(int layer) {
  Layer& l = layers_[static_cast<size_t>(layer)];
  if (l.ssm_elems == 0) return nullptr;
  if (l.ssm_pending >= 0) {
    l.read_ssm(l.ssm());
    l.ssm_pending = -1;
  }
  return l.ssm();
}

cpu::DeltaRuleTokens SequenceState::SsmPass::head_run(int64_t j) const {
  const int64_t head = d_k * d_v, head_record = cpu::delta_rule_record_elems(d_k, d_v);
  return {.state = state + j * head,
          .source = source + j * head,
          .d_k = d_k,
          .d_v = d_v,
          .replay = replay ? replay + j * head_record : nullptr,
          .n_replay = n_replay,
          .write_back_replay = write_back_replay,
          .record = record ? record + j * head_record : nullptr,
          .n_record = n_record,
          .record_stride = record_stride};
}

SequenceState::SsmPass SequenceState::begin_ssm_pass(int layer, int64_t n_tokens) {
  Layer& l = layers_[static_cast<size_t>(layer)];
  CHECK(l.ssm_elems > 0);
  SsmPass p;
  p.state = l.ssm();
  p.source = p.state;
  p.record_stride = l.record_elems();
  p.d_k = l.spec.ssm_d_k;
  p.d_v = l.spec.ssm_d_v;
  if (n_tokens <= 0) return p;  // nothing runs: a pending replay stays pending
  if (l.ssm_pending >= 0) {
    p.source = l.ssm_place(1);
    p.replay = l.ssm_records[l.replay_buf].data();
    p.n_replay = l.ssm_pending;
    // A window that records into the other buffer starts from a new origin: the replayed state.
    p.write_back_replay = journal_active() && l.record_buf != l.replay_buf;
    l.ssm_pending = -1;
  }
  if (journal_active() && n_past_ >= journal_base_) {
    const int64_t first = n_past_ - origin_pos_;  // the record of the pass's first token
    p.n_record = std::clamp<int64_t>(journal_base_ + journal_capacity_ - n_past_, 0, n_tokens);
    if (p.n_record > 0) p.record = l.ssm_records[l.record_buf].data() + first * p.record_stride;
  }
  return p;
}

Status SequenceState::Layer::grow_ssm_store(int64_t places) {
  const size_t state_bytes = static_cast<size_t>(ssm_elems) * sizeof(float);
  const size_t bytes = static_cast<size_t>(places) * state_bytes;
  if (bytes <= ssm_store.size()) return Status::ok();
  // Huge pages only where a state fills one: a smaller state would fault in 2 MiB for a few
  // KiB (test models, many server slots).
  const bool huge = state_bytes >= platform::huge_page_size();
  auto grown = platform::AnonymousMemory::allocate(
      {.bytes = bytes, .alignment = huge ? platform::huge_page_size() : 0, .huge_pages = huge});
  if (!grown) return grown.status().with_context("the recurrent state and its rollback journal");
  // Every page mapped now, where the store grows (once per sequence and journal length),
  // not on the first touch inside a verify step's recurrence.
  platform::prefault_write(grown->data(), bytes);
  if (ssm_store.size() > 0) std::memcpy(grown->data(), ssm_store.data(), ssm_store.size());
  ssm_store = std::move(*grown);
  return Status::ok();
}

bool SequenceState::device_has_recurrent_state() const {
  for (const auto& l : layers_) {
    if (l.spec.on_device && (l.spec.conv_state_elems > 0 || l.spec.ssm_state_elems > 0)) return true;
  }
  return false;
}

bool SequenceState::has_recurrent_state() const {
  for (const auto& l : layers_) {
    if (l.spec.conv_state_elems > 0 || l.spec.ssm_state_elems > 0) return true;
  }
  return false;
}

bool SequenceState::truncate(int64_t n) {
  if (n < 0 || n > n_past_) return false;
  if (n == n_past_) return true;
  if (n == 0) {
    clear();
    return true;
  }
  if (has_recurrent_state()) {
    // Back to a journaled position: the conv state recorded after the token at n − 1, the
    // SSM state the origin's with the records of positions [origin, n) applied (left pending).
    if (!journal_active() || n - 1 < journal_base_ || n - 1 >= journal_base_ + journal_capacity_) return false;
    const auto slot = static_cast<size_t>(n - 1 - journal_base_);
    if (device_has_recurrent_state() && !device_->restore_journal(static_cast<int64_t>(slot)).is_ok()) return false;
    for (auto& l : layers_) {
      if (l.conv.empty() && l.ssm_elems == 0) continue;
      std::copy_n(l.journal_conv.begin() + static_cast<std::ptrdiff_t>(slot * l.conv.size()), l.conv.size(), l.conv.begin());
      if (l.ssm_elems > 0) {
        l.ssm_pending = n - origin_pos_;
        l.replay_buf = l.record_buf;
      }
    }
  }
  n_past_ = n;
  return true;
}

Status SequenceState::begin_journal(int64_t max_tokens) {
  if (max_tokens <= 0) return Status::bad_input("the rollback journal needs at least one position");
  if (device_has_recurrent_state()) {
    if (!device_) return Status::runtime("a sequence with GPU layers has no GPU state (a bug)");
    RETURN_IF_ERROR(device_->reserve_journal(max_tokens));
  }
  try {
    for (auto& l : layers_) {
      l.journal_conv.resize(static_cast<size_t>(max_tokens) * l.conv.size());
      if (l.ssm_elems == 0) continue;
      if (l.ssm_slot.size() < 2) {  // the origin's place, kept from then on
        RETURN_IF_ERROR(l.grow_ssm_store(2));
        l.ssm_slot.push_back(1);
      }
      if (l.ssm_pending < 0) {
        // The live state becomes the origin; the window's first pass writes the other place.
        std::swap(l.ssm_slot[0], l.ssm_slot[1]);
        l.ssm_pending = 0;
        l.record_buf = l.replay_buf;
      } else {
        // Records pending from a cut-back: the window's records follow them, or they are
        // replayed into a new origin (the first pass writes it back) and the window records
        // into the other buffer.
        l.record_buf = l.ssm_pending > kMaxPendingReplay ? l.replay_buf ^ 1 : l.replay_buf;
      }
      // Both buffers at their largest at once (up to kMaxPendingReplay pending records, then
      // the window's), so no record buffer grows, faulting pages in, inside a verify step.
      const auto need = static_cast<size_t>((kMaxPendingReplay + max_tokens) * l.record_elems());
      for (auto& records : l.ssm_records) {
        if (records.size() < need) records.resize(need);
      }
    }
  } catch (const std::bad_alloc&) {
    return Status::runtime(fmt::format("out of memory allocating the rollback journal for {} tokens", max_tokens));
  }
  for (const auto& l : layers_) {
    if (l.ssm_elems == 0) continue;
    origin_pos_ = l.record_buf == l.replay_buf ? n_past_ - l.ssm_pending : n_past_;
    break;
  }
  journal_base_ = n_past_;
  journal_capacity_ = max_tokens;
  return Status::ok();
}

void SequenceState::end_journal() { journal_capacity_ = 0; }

float* SequenceState::journal_conv(int layer, int64_t pos) {
  auto& l = layers_[static_cast<size_t>(layer)];
  if (!journal_active() || pos < journal_base_ || pos >= journal_base_ + journal_capacity_ || l.conv.empty()) return nullptr;
  return l.journal_conv.data() + static_cast<size_t>(pos - journal_base_) * l.conv.size();
}

uint64_t SequenceState::layer_journal_bytes(const LayerStateSpec& spec, int64_t max_tokens) {
  // The conv state per token, the origin's copy of the SSM state, and two buffers of
  // per-token records (the window's, after up to kMaxPendingReplay pending ones).
  uint64_t b = static_cast<uint64_t>(max_tokens * spec.conv_state_elems) * sizeof(float);
  if (spec.ssm_state_elems > 0) {
    const int64_t record = spec.ssm_heads * cpu::delta_rule_record_elems(spec.ssm_d_k, spec.ssm_d_v);
    b += static_cast<uint64_t>(spec.ssm_state_elems + 2 * (kMaxPendingReplay + max_tokens) * record) * sizeof(float);
  }
  return b;
}

uint64_t SequenceState::journal_bytes(int64_t max_tokens) const {
  uint64_t b = 0;
  for (const auto& l : layers_) {
    if (!l.spec.on_device) b += layer_journal_bytes(l.spec, max_tokens);
  }
  return b;
}

uint8_t* SequenceState::k_row(int layer, int64_t pos) {
  auto& l = layers_[static_cast<size_t>(layer)];
  return l.k.data() + pos * l.k_row_bytes;
}

uint8_t* SequenceState::v_row(int layer, int64_t pos) {
  auto& l = layers_[static_cast<size_t>(layer)];
  return l.v.data() + pos * l.v_row_bytes;
}

uint64_t SequenceState::kv_bytes() const {
  uint64_t b = 0;
  for (const auto& l : layers_) b += l.k.size() + l.v.size();
  return b;
}

uint64_t SequenceState::recurrent_bytes() const {
  uint64_t b = 0;
  for (const auto& l : layers_) b += (l.conv.size() + static_cast<size_t>(l.ssm_elems)) * sizeof(float);
  return b;
}

namespace {

// Snapshot layout: a header of int64 fields — n_past, the layer count, type_k, type_v, then
// per layer k_row_bytes, v_row_bytes, conv elems, ssm elems — then per layer its n_past K
// rows, n_past V rows, conv state and SSM state. The same whether a layer lives on the host
// or on a GPU.
void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
void put64(std::vector<uint8_t>& out, int64_t v) { put(out, &v, sizeof(v)); }

// A cache row as f32 and back (f32, f16 round to nearest even, Q8_0 / Q4_0 reference quantizers).
void row_to_f32(DType type, const uint8_t* row, int64_t n, float* out) {
  switch (type) {
    case DType::F32: std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::F16: fp16_to_f32_row(reinterpret_cast<const uint16_t*>(row), out, n); break;
    default: type_ops(type)->dequantize_row(row, out, n); break;
  }
}
void f32_to_row(DType type, const float* in, int64_t n, uint8_t* row) {
  switch (type) {
    case DType::F32: std::memcpy(row, in, static_cast<size_t>(n) * sizeof(float)); break;
    case DType::F16: f32_to_fp16_row(in, reinterpret_cast<uint16_t*>(row), n); break;
    default: type_ops(type)->quantize_row(in, row, n); break;
  }
}

}  // namespace

Status SequenceState::read_kv(int il, int64_t pos, int64_t n, uint8_t* k, uint8_t* v) const {
  const Layer& l = layers_[static_cast<size_t>(il)];
  if (l.spec.on_device) {
    if (!device_) return Status::runtime("a sequence with GPU layers has no GPU state (a bug)");
    return device_->read_kv(il, pos, n, k, v);
  }
  std::memcpy(k, l.k.data() + pos * l.k_row_bytes, static_cast<size_t>(n * l.k_row_bytes));
  std::memcpy(v, l.v.data() + pos * l.v_row_bytes, static_cast<size_t>(n * l.v_row_bytes));
  return Status::ok();
}

Status SequenceState::write_kv(int il, int64_t pos, int64_t n, const uint8_t* k, const uint8_t* v) {
  Layer& l = layers_[static_cast<size_t>(il)];
  if (l.spec.on_device) {
    if (!device_) return Status::runtime("a sequence with GPU layers has no GPU state (a bug)");
    return device_->write_kv(il, pos, n, k, v);
  }
  std::memmove(l.k.data() + pos * l.k_row_bytes, k, static_cast<size_t>(n * l.k_row_bytes));
  std::memmove(l.v.data() + pos * l.v_row_bytes, v, static_cast<size_t>(n * l.v_row_bytes));
  return Status::ok();
}

bool SequenceState::can_shift() const {
  if (has_recurrent_state()) return false;
  for (const Layer& l : layers_) {
    if (l.spec.k_row_elems == 0) continue;
    if (l.spec.rope_dims < 0 || l.spec.head_dim <= 0 || l.spec.k_row_elems % l.spec.head_dim != 0 ||
        l.spec.rope_dims > l.spec.head_dim || l.spec.rope_dims % 2 != 0) {
      return false;
    }
  }
  return true;
}

Status SequenceState::shift(int64_t n_keep, int64_t n_discard) {
  if (!can_shift()) {
    return Status::bad_input(has_recurrent_state()
                                 ? "this model keeps a recurrent state, which cannot forget old tokens: no context shift"
                                 : "this model does not say how its keys encode position: no context shift");
  }
  if (n_keep < 0 || n_discard < 0 || n_keep + n_discard > n_past_) {
    return Status::bad_input(fmt::format("context shift of {} tokens after {} does not fit the {} held", n_discard,
                                         n_keep, n_past_));
  }
  if (n_discard == 0) return Status::ok();
  const int64_t n_move = n_past_ - n_keep - n_discard;  // rows that move down by n_discard
  // A rotation by −n_discard: applied after the stored rotation by p it gives the rotation by
  // p − n_discard (rotations compose by adding angles). cos/sin are rounded to float once.
  std::vector<float> cos_sin, row;
  try {
    std::vector<uint8_t> k, v;
    for (size_t il = 0; il < layers_.size(); ++il) {
      const Layer& l = layers_[il];
      if (l.spec.k_row_elems == 0 || n_move == 0) continue;
      k.resize(static_cast<size_t>(n_move * l.k_row_bytes));
      v.resize(static_cast<size_t>(n_move * l.v_row_bytes));
      RETURN_IF_ERROR(read_kv(static_cast<int>(il), n_keep + n_discard, n_move, k.data(), v.data()));
      if (l.spec.rope_dims > 0) {
        const int64_t n_rot = l.spec.rope_dims, hd = l.spec.head_dim, width = l.spec.k_row_elems;
        cos_sin.resize(static_cast<size_t>(n_rot));
        cpu::rope_angles(n_rot, -n_discard, l.spec.rope_base, cos_sin.data());
        row.resize(static_cast<size_t>(width));
        for (int64_t r = 0; r < n_move; ++r) {
          uint8_t* bytes = k.data() + r * l.k_row_bytes;
          row_to_f32(options_.type_k, bytes, width, row.data());
          for (int64_t h = 0; h < width / hd; ++h) cpu::rope_neox_with(row.data() + h * hd, n_rot, cos_sin.data());
          f32_to_row(options_.type_k, row.data(), width, bytes);
        }
      }
      RETURN_IF_ERROR(write_kv(static_cast<int>(il), n_keep, n_move, k.data(), v.data()));
    }
  } catch (const std::bad_alloc&) {
    return Status::runtime("out of memory during the context shift");
  }
  n_past_ -= n_discard;
  return Status::ok();
}

Result<std::vector<uint8_t>> SequenceState::snapshot() const {
  std::vector<uint8_t> out;
  put64(out, n_past_);
  put64(out, static_cast<int64_t>(layers_.size()));
  put64(out, static_cast<int64_t>(options_.type_k));
  put64(out, static_cast<int64_t>(options_.type_v));
  for (const Layer& l : layers_) {
    for (int64_t v : {l.k_row_bytes, l.v_row_bytes, l.spec.conv_state_elems, l.spec.ssm_state_elems}) put64(out, v);
  }
  try {
    std::vector<uint8_t> k, v;
    std::vector<float> conv, ssm;
    for (size_t il = 0; il < layers_.size(); ++il) {
      const Layer& l = layers_[il];
      if (l.spec.k_row_elems > 0) {
        k.resize(static_cast<size_t>(l.k_row_bytes * n_past_));
        v.resize(static_cast<size_t>(l.v_row_bytes * n_past_));
        RETURN_IF_ERROR(read_kv(static_cast<int>(il), 0, n_past_, k.data(), v.data()));
        put(out, k.data(), k.size());
        put(out, v.data(), v.size());
      }
      if (l.spec.conv_state_elems > 0 || l.spec.ssm_state_elems > 0) {
        if (l.spec.on_device) {
          conv.resize(static_cast<size_t>(l.spec.conv_state_elems));
          ssm.resize(static_cast<size_t>(l.spec.ssm_state_elems));
          if (!device_) return Status::runtime("a sequence with GPU layers has no GPU state (a bug)");
          RETURN_IF_ERROR(device_->read_recurrent(static_cast<int>(il), conv.data(), ssm.data()));
          put(out, conv.data(), conv.size() * sizeof(float));
          put(out, ssm.data(), ssm.size() * sizeof(float));
        } else {
          put(out, l.conv.data(), l.conv.size() * sizeof(float));
          ssm.resize(static_cast<size_t>(l.ssm_elems));
          l.read_ssm(ssm.data());
          put(out, ssm.data(), ssm.size() * sizeof(float));
        }
      }
    }
  } catch (const std::bad_alloc&) {
    return Status::runtime("out of memory saving the slot");
  }
  return out;
}

Status SequenceState::restore(const std::vector<uint8_t>& bytes) {
  size_t at = 0;
  auto get64 = [&](int64_t& v) {
    if (bytes.size() - at < sizeof(v)) return false;
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    at += sizeof(v);
    return true;
  };
  const Status mismatch = Status::bad_input("the saved slot does not match this model and cache (layers, sizes or types)");
  int64_t n_past = 0, n_layers = 0, tk = 0, tv = 0;
  if (!get64(n_past) || !get64(n_layers) || !get64(tk) || !get64(tv)) return Status::bad_input("the saved slot is truncated");
  if (n_layers != static_cast<int64_t>(layers_.size()) || tk != static_cast<int64_t>(options_.type_k) ||
      tv != static_cast<int64_t>(options_.type_v)) {
    return mismatch;
  }
  if (n_past < 0 || n_past > options_.n_ctx) {
    return Status::bad_input(fmt::format("the saved slot holds {} tokens, more than this slot's context of {}", n_past,
                                         options_.n_ctx));
  }
  for (const Layer& l : layers_) {
    int64_t kb = 0, vb = 0, ce = 0, se = 0;
    if (!get64(kb) || !get64(vb) || !get64(ce) || !get64(se)) return Status::bad_input("the saved slot is truncated");
    if (kb != l.k_row_bytes || vb != l.v_row_bytes || ce != l.spec.conv_state_elems || se != l.spec.ssm_state_elems) {
      return mismatch;
    }
  }
  // Size check before anything is overwritten.
  uint64_t need = 0;
  for (const Layer& l : layers_) {
    if (l.spec.k_row_elems > 0) need += static_cast<uint64_t>((l.k_row_bytes + l.v_row_bytes) * n_past);
    need += static_cast<uint64_t>(l.spec.conv_state_elems + l.spec.ssm_state_elems) * sizeof(float);
  }
  if (bytes.size() - at != need) return Status::bad_input("the saved slot has the wrong size (damaged file?)");
  for (size_t il = 0; il < layers_.size(); ++il) {
    Layer& l = layers_[il];
    if (l.spec.k_row_elems > 0) {
      const uint8_t* k = bytes.data() + at;
      const uint8_t* v = k + l.k_row_bytes * n_past;
      RETURN_IF_ERROR(write_kv(static_cast<int>(il), 0, n_past, k, v));
      at += static_cast<size_t>((l.k_row_bytes + l.v_row_bytes) * n_past);
    }
    if (l.spec.conv_state_elems > 0 || l.spec.ssm_state_elems > 0) {
      const size_t conv_bytes = static_cast<size_t>(l.spec.conv_state_elems) * sizeof(float);
      const size_t ssm_bytes = static_cast<size_t>(l.spec.ssm_state_elems) * sizeof(float);
      if (l.spec.on_device) {
        std::vector<float> c(static_cast<size_t>(l.spec.conv_state_elems)), s(static_cast<size_t>(l.spec.ssm_state_elems));
        std::memcpy(c.data(), bytes.data() + at, conv_bytes);
        std::memcpy(s.data(), bytes.data() + at + conv_bytes, ssm_bytes);
        if (!device_) return Status::runtime("a sequence with GPU layers has no GPU state (a bug)");
        RETURN_IF_ERROR(device_->write_recurrent(static_cast<int>(il), c.data(), s.data()));
      } else {
        std::memcpy(l.conv.data(), bytes.data() + at, conv_bytes);
        std::memcpy(l.ssm(), bytes.data() + at + conv_bytes, ssm_bytes);
        l.ssm_pending = -1;
      }
      at += conv_bytes + ssm_bytes;
    }
  }
  journal_capacity_ = 0;
  n_past_ = n_past;
  return Status::ok();
}

}  // namespace moetier
