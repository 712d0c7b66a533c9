// Per-sequence memory of the forward pass: a KV cache for each attention layer and the
// conv + recurrent state for each Gated DeltaNet layer. The model file decides what each
// layer needs (via LayerStateSpec); this file only owns the bytes.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

#include "core/status.h"
#include "platform/memory.h"
#include "tensor/dtype.h"

namespace moetier {

struct LayerStateSpec {
  // attention layers: one K row and one V row per position
  int64_t k_row_elems = 0;   // n_head_kv · head_dim_k
  int64_t v_row_elems = 0;   // n_head_kv · head_dim_v
  // recurrent layers (f32)
  int64_t conv_state_elems = 0;  // (d_conv − 1) · channels
  int64_t ssm_state_elems = 0;   // n_v_heads · d_k · d_v
  // How an attention layer's K rows encode their position, for a context shift
  // (SequenceState::shift): NEOX rotary on the first rope_dims of each head_dim-wide head,
  // angle pos · rope_base^(−2i / rope_dims) for pair i. rope_dims < 0: unknown (the model did
  // not say), so the sequence cannot be shifted; 0: the keys carry no position.
  int64_t head_dim = 0;
  int64_t rope_dims = -1;
  float rope_base = 10000.0f;
  // The layer runs on a GPU: its KV cache / state live in DeviceState, not in host memory.
  bool on_device = false;
};

// The part of a sequence's memory that lives on a GPU (layers placed there), owned by the
// SequenceState and defined by the GPU backend (gpu/vulkan/).
class DeviceState {
 public:
  virtual ~DeviceState() = default;
  virtual void clear() = 0;  // zero the recurrent state (KV rows are overwritten on use)
  virtual uint64_t bytes() const = 0;
  // The rollback journal of the GPU layers' recurrent state (SequenceState::begin_journal):
  // room for the state after each of max_tokens tokens (allocated once, kept for reuse), and
  // the copy of slot `slot` back into the live state.
  virtual Status reserve_journal(int64_t /*max_tokens*/) {
    return Status::bad_input("this GPU backend cannot journal recurrent state");
  }
  virtual Status restore_journal(int64_t /*slot*/) { return Status::runtime("no journal on the GPU"); }
  // Copies between a GPU layer's state and host memory, in the host cache's layout (for
  // saving and restoring a slot, and for a context shift): the K and V rows of positions
  // [pos, pos + n) of attention layer `layer` (raw cache bytes, one row after another), and a
  // recurrent layer's conv and SSM state (f32). Pending GPU work is finished first.
  virtual Status read_kv(int /*layer*/, int64_t /*pos*/, int64_t /*n*/, uint8_t* /*k*/, uint8_t* /*v*/) {
    return Status::bad_input("this GPU backend cannot read its KV cache back");
  }
  virtual Status write_kv(int /*layer*/, int64_t /*pos*/, int64_t /*n*/, const uint8_t* /*k*/, const uint8_t* /*v*/) {
    return Status::bad_input("this GPU backend cannot write its KV cache");
  }
  virtual Status read_recurrent(int /*layer*/, float* /*conv*/, float* /*ssm*/) {
    return Status::bad_input("this GPU backend cannot read its recurrent state back");
  }
  virtual Status write_recurrent(int /*layer*/, const float* /*conv*/, const float* /*ssm*/) {
    return Status::bad_input("this GPU backend cannot write its recurrent state");
  }
};

struct KvCacheOptions {
  int64_t n_ctx = 4096;
  DType type_k = DType::F16;  // F32 or F16 (q8_0/q4_0 later)
  DType type_v = DType::F16;
};

class SequenceState {
 public:
  // Allocates (zeroed) state for every layer. Fails with a clear error for unsupported
  // cache types or when the allocation fails.
  static Result<SequenceState> create(const std::vector<LayerStateSpec>& layers, const KvCacheOptions& options);

  int64_t n_past() const { return n_past_; }
  void set_n_past(int64_t n) { n_past_ = n; }
  int64_t n_ctx() const { return options_.n_ctx; }
  const KvCacheOptions& options() const { return options_; }
  // Forget everything (n_past = 0, recurrent state zeroed); KV rows are overwritten on use.
  void clear();
  // True when some layer carries recurrent (conv/SSM) state: such a sequence cannot be cut
  // back to an earlier position, only kept whole or cleared.
  bool has_recurrent_state() const;
  // ... of which some lives on a GPU.
  bool device_has_recurrent_state() const;
  // Keep only the first n positions (0 <= n <= n_past()). Attention-only sequences just
  // forget the later KV rows; a sequence with recurrent state can keep n == n_past(), be
  // cleared (n == 0), or go back to a position its journal recorded (below); anything else
  // returns false and changes nothing.
  bool truncate(int64_t n);

  // The rollback journal, for speculative decoding's verify passes (runtime/speculative.h):
  // between begin_journal(m) and end_journal(), the forward passes over the next m
  // positions (from n_past() at begin) record each recurrent layer's conv and SSM state
  // after each of their tokens, so truncate() can cut the sequence back to any recorded
  // position. Attention-only sequences need no journal (truncate always works). Errors:
  // out of (host or GPU) memory. Recurrent layers on a GPU record into the device's journal
  // (DeviceState::reserve_journal; their block asks journal_slot()).
  Status begin_journal(int64_t max_tokens);
  void end_journal();
  bool journal_active() const { return journal_capacity_ > 0; }
  // Where a recurrent layer's block records the state after the token at `pos`; nullptr
  // when no journal is active or pos is outside its window.
  float* journal_conv(int layer, int64_t pos);
  float* journal_ssm(int layer, int64_t pos);
  // The journal slot of position `pos` (for GPU layers), or −1 when none is recorded there.
  int64_t journal_slot(int64_t pos) const {
    return journal_active() && pos >= journal_base_ && pos < journal_base_ + journal_capacity_ ? pos - journal_base_ : -1;
  }
  // The position after the journal's window. A forward pass whose last token is the window's
  // last position (end − 1) may leave that token's SSM slot unwritten and say so
  // (note_journal_last_unrecorded): cutting back to after it keeps every position fed, no
  // cut-back at all. Should more tokens follow in the same journal, truncate(end) then
  // refuses (returns false) instead of restoring a state never recorded.
  int64_t journal_end() const { return journal_active() ? journal_base_ + journal_capacity_ : -1; }
  void note_journal_last_unrecorded() { journal_last_unrecorded_ = true; }
  // Bytes a journal of max_tokens positions takes (for the plan).
  uint64_t journal_bytes(int64_t max_tokens) const;

  // KV rows of attention layer `layer` at position `pos` (raw bytes of type_k / type_v).
  uint8_t* k_row(int layer, int64_t pos);
  uint8_t* v_row(int layer, int64_t pos);
  float* conv_state(int layer) { return layers_[static_cast<size_t>(layer)].conv.data(); }
  float* ssm_state(int layer) { return layers_[static_cast<size_t>(layer)].ssm(); }
  const LayerStateSpec& spec(int layer) const { return layers_[static_cast<size_t>(layer)].spec; }

  // Bytes held in host memory, for reporting (device_state()->bytes() for the GPU part).
  uint64_t kv_bytes() const;
  uint64_t recurrent_bytes() const;

  // Context shift (llama-server's --context-shift): drops positions [n_keep, n_keep + n_discard)
  // and moves the later ones down by n_discard, re-rotating each moved key to its new position
  // (K rows are stored rotated; see LayerStateSpec::rope_dims). K rows of a quantized or f16
  // cache are converted to f32, rotated and stored again, so they carry one more rounding;
  // V rows move unchanged. Layers on a GPU go through DeviceState::read_kv / write_kv.
  // Fails, changing nothing, when !can_shift() or the range is outside [0, n_past()).
  Status shift(int64_t n_keep, int64_t n_discard);
  // No recurrent state (it cannot forget old tokens) and every attention layer says how its
  // keys encode position.
  bool can_shift() const;

  // The state of positions [0, n_past()) as bytes (KV rows, conv and recurrent state), for
  // saving a server slot to a file; restore() reads it back into a sequence of the same
  // layout (layers, row sizes, cache types; n_ctx at least n_past). The bytes do not depend on
  // where each layer lives (host or GPU), so a slot saved with one placement restores into
  // another. restore() fails clearly when the layout differs.
  Result<std::vector<uint8_t>> snapshot() const;
  Status restore(const std::vector<uint8_t>& bytes);

  DeviceState* device_state() const { return device_.get(); }
  void set_device_state(std::unique_ptr<DeviceState> d) { device_ = std::move(d); }

 private:
  struct Layer {
    LayerStateSpec spec;
    int64_t k_row_bytes = 0, v_row_bytes = 0;
    std::vector<uint8_t> k, v;
    std::vector<float> conv;
    std::vector<float> journal_conv;  // [journal capacity][conv elems]
    // The SSM state and its journal slots in one store, [places = 1 + journal capacity][ssm
    // elems] f32, straight from the OS: page-aligned (the journal takes streamed vector
    // stores), and in huge pages when a state is one or more of them (2 MiB per layer of
    // Qwen3.6-35B-A3B: a slot is then one page to fault in and one TLB entry to stream
    // through, where 4 KiB pages cost 512 faults each on the first verify step of a
    // sequence). ssm_slot[0] is the live state's place in it and ssm_slot[1 + t] journal slot
    // t's: a cut-back swaps the two places instead of copying the slot.
    int64_t ssm_elems = 0;
    platform::AnonymousMemory ssm_store;
    std::vector<int64_t> ssm_slot;
    float* ssm_base() const { return reinterpret_cast<float*>(ssm_store.data()); }
    float* ssm_place(int64_t i) { return ssm_base() + ssm_slot[static_cast<size_t>(i)] * ssm_elems; }
    float* ssm() { return ssm_elems > 0 ? ssm_place(0) : nullptr; }
    const float* ssm() const { return ssm_elems > 0 ? ssm_base() + ssm_slot[0] * ssm_elems : nullptr; }
    // Room for `places` states; the existing places keep their contents, new ones are zero.
    Status grow_ssm_store(int64_t places);
  };
  // K and V rows [pos, pos + n) of attention layer il to / from host bytes, wherever the layer lives.
  Status read_kv(int il, int64_t pos, int64_t n, uint8_t* k, uint8_t* v) const;
  Status write_kv(int il, int64_t pos, int64_t n, const uint8_t* k, const uint8_t* v);

  KvCacheOptions options_;
  std::vector<Layer> layers_;
  int64_t n_past_ = 0;
  int64_t journal_base_ = 0, journal_capacity_ = 0;  // window [base, base + capacity)
  bool journal_last_unrecorded_ = false;              // the window's last SSM slot is not written
  std::unique_ptr<DeviceState> device_;
};

}  // namespace moetier
