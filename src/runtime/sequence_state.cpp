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

}  // namespace moetier
