#include "runtime/sequence_state.h"

#include <algorithm>
#include <new>

#include <fmt/format.h>

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
      l.ssm.assign(static_cast<size_t>(spec.ssm_state_elems), 0.0f);
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
    std::fill(l.ssm.begin(), l.ssm.end(), 0.0f);
  }
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
    // Back to a journaled position: the state recorded after the token at n − 1.
    if (!journal_active() || n - 1 < journal_base_ || n - 1 >= journal_base_ + journal_capacity_) return false;
    const auto slot = static_cast<size_t>(n - 1 - journal_base_);
    if (device_has_recurrent_state() && !device_->restore_journal(static_cast<int64_t>(slot)).is_ok()) return false;
    for (auto& l : layers_) {
      if (l.conv.empty() && l.ssm.empty()) continue;
      std::copy_n(l.journal_conv.begin() + static_cast<std::ptrdiff_t>(slot * l.conv.size()), l.conv.size(), l.conv.begin());
      std::copy_n(l.journal_ssm.begin() + static_cast<std::ptrdiff_t>(slot * l.ssm.size()), l.ssm.size(), l.ssm.begin());
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
      l.journal_ssm.resize(static_cast<size_t>(max_tokens) * l.ssm.size());
    }
  } catch (const std::bad_alloc&) {
    return Status::runtime(fmt::format("out of memory allocating the rollback journal for {} tokens", max_tokens));
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

float* SequenceState::journal_ssm(int layer, int64_t pos) {
  auto& l = layers_[static_cast<size_t>(layer)];
  if (!journal_active() || pos < journal_base_ || pos >= journal_base_ + journal_capacity_ || l.ssm.empty()) return nullptr;
  return l.journal_ssm.data() + static_cast<size_t>(pos - journal_base_) * l.ssm.size();
}

uint64_t SequenceState::journal_bytes(int64_t max_tokens) const {
  return static_cast<uint64_t>(max_tokens) * recurrent_bytes();
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
  for (const auto& l : layers_) b += (l.conv.size() + l.ssm.size()) * sizeof(float);
  return b;
}

namespace {

// Snapshot layout: a header of int64 fields — n_past, the layer count, type_k, type_v, then
// per layer k_row_bytes, v_row_bytes, conv elems, ssm elems — then per layer its n_past K
// rows, n_past V rows, conv state and SSM state.
void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
void put64(std::vector<uint8_t>& out, int64_t v) { put(out, &v, sizeof(v)); }

}  // namespace

Result<std::vector<uint8_t>> SequenceState::snapshot() const {
  if (device_) return Status::bad_input("this slot's state is on the GPU; saving it is not supported");
  std::vector<uint8_t> out;
  put64(out, n_past_);
  put64(out, static_cast<int64_t>(layers_.size()));
  put64(out, static_cast<int64_t>(options_.type_k));
  put64(out, static_cast<int64_t>(options_.type_v));
  for (const Layer& l : layers_) {
    for (int64_t v : {l.k_row_bytes, l.v_row_bytes, static_cast<int64_t>(l.conv.size()), static_cast<int64_t>(l.ssm.size())}) {
      put64(out, v);
    }
  }
  for (const Layer& l : layers_) {
    if (!l.k.empty()) put(out, l.k.data(), static_cast<size_t>(l.k_row_bytes * n_past_));
    if (!l.v.empty()) put(out, l.v.data(), static_cast<size_t>(l.v_row_bytes * n_past_));
    put(out, l.conv.data(), l.conv.size() * sizeof(float));
    put(out, l.ssm.data(), l.ssm.size() * sizeof(float));
  }
  return out;
}

Status SequenceState::restore(const std::vector<uint8_t>& bytes) {
  if (device_) return Status::bad_input("this slot's state is on the GPU; restoring it is not supported");
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (bytes.size() - at < n) return false;
    std::copy(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + n),
              static_cast<uint8_t*>(p));
    at += n;
    return true;
  };
  auto get64 = [&](int64_t& v) { return get(&v, sizeof(v)); };
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
    if (kb != l.k_row_bytes || vb != l.v_row_bytes || ce != static_cast<int64_t>(l.conv.size()) ||
        se != static_cast<int64_t>(l.ssm.size())) {
      return mismatch;
    }
  }
  // Size check before anything is overwritten.
  uint64_t need = 0;
  for (const Layer& l : layers_) {
    if (!l.k.empty()) need += static_cast<uint64_t>(l.k_row_bytes * n_past);
    if (!l.v.empty()) need += static_cast<uint64_t>(l.v_row_bytes * n_past);
    need += (l.conv.size() + l.ssm.size()) * sizeof(float);
  }
  if (bytes.size() - at != need) return Status::bad_input("the saved slot has the wrong size (damaged file?)");
  for (Layer& l : layers_) {
    if (!l.k.empty()) get(l.k.data(), static_cast<size_t>(l.k_row_bytes * n_past));
    if (!l.v.empty()) get(l.v.data(), static_cast<size_t>(l.v_row_bytes * n_past));
    get(l.conv.data(), l.conv.size() * sizeof(float));
    get(l.ssm.data(), l.ssm.size() * sizeof(float));
  }
  journal_capacity_ = 0;
  n_past_ = n_past;
  return Status::ok();
}

}  // namespace moetier
