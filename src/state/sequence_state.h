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
#include "cpu/delta_rule.h"
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
  // The SSM state's shape: ssm_heads states of ssm_d_k × ssm_d_v (their product is
  // ssm_state_elems), which sizes the rollback journal's per-token records (cpu/delta_rule.h).
  int64_t ssm_heads = 0, ssm_d_k = 0, ssm_d_v = 0;
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
  // positions (from n_past() at begin) record what each recurrent layer needs to go back to
  // the state after any of their tokens, so truncate() can cut the sequence back to any
  // recorded position. Attention-only sequences need no journal (truncate always works).
  // Errors: out of (host or GPU) memory. Recurrent layers on a GPU record into the device's
  // journal (DeviceState::reserve_journal; their block asks journal_slot()).
  //
  // On the CPU a layer's journal is small: its conv state after each token, and per token the
  // delta rule's record (k, δ, decay per head; cpu/delta_rule.h), never a copy of the SSM
  // state. The window's first pass reads the state from one place (the origin) and writes it
  // to another; a cut-back leaves the live state to be rebuilt from the origin and the kept
  // tokens' records by the next pass over the layer, in the same sweep over S (or by
  // snapshot()). Nothing is copied when every token is kept.
  Status begin_journal(int64_t max_tokens);
  void end_journal();
  bool journal_active() const { return journal_capacity_ > 0; }
  // Where a recurrent layer's block records the conv state after the token at `pos`; nullptr
  // when no journal is active or pos is outside its window.
  float* journal_conv(int layer, int64_t pos);
  // The journal slot of position `pos` (for GPU layers), or −1 when none is recorded there.
  int64_t journal_slot(int64_t pos) const {
    return journal_active() && pos >= journal_base_ && pos < journal_base_ + journal_capacity_ ? pos - journal_base_ : -1;
  }
  // Bytes a journal of max_tokens positions takes: this sequence's, and one host layer's of
  // that shape (for the plan, before anything is loaded).
  uint64_t journal_bytes(int64_t max_tokens) const;
  static uint64_t layer_journal_bytes(const LayerStateSpec& spec, int64_t max_tokens);
  // Records a pass applies before its own tokens cost a few operations per state element
  // each; beyond this many, writing the replayed state back once (a new origin) costs less.
  static constexpr int64_t kMaxPendingReplay = 8;

  // A CPU recurrent layer's forward pass over n_tokens tokens from n_past(): read the state
  // from `source`, apply the n_replay records first (what a cut-back left pending), write the
  // state after the pass to `state`, and record the first n_record tokens. Call once per pass
  // and layer, right before the pass: from then on the layer's live state is what the pass
  // writes. head_run(j) is head j's part of it as the kernel takes it; the caller adds the
  // tokens (n_tokens, q, k, v, beta, decay, out, scratch).
  struct SsmPass {
    float* source = nullptr;
    float* state = nullptr;
    const float* replay = nullptr;
    int64_t n_replay = 0;
    float* record = nullptr;
    int64_t n_record = 0;
    int64_t record_stride = 0;  // floats between two tokens' records (all heads)
    bool write_back_replay = false;  // the replayed state goes back to the source (a new window's origin)
    int64_t d_k = 0, d_v = 0;        // one head's state is d_k × d_v

    cpu::DeltaRuleTokens head_run(int64_t j) const;
  };
  SsmPass begin_ssm_pass(int layer, int64_t n_tokens);

  // KV rows of attention layer `layer` at position `pos` (raw bytes of type_k / type_v).
  uint8_t* k_row(int layer, int64_t pos);
  uint8_t* v_row(int layer, int64_t pos);
  float* conv_state(int layer) { return layers_[static_cast<size_t>(layer)].conv.data(); }
  // A CPU recurrent layer's SSM state, [heads][d_k][d_v] f32 (rebuilt first when a cut-back
  // left it pending). Passes use begin_ssm_pass instead.
  float* ssm_state(int layer);
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
    // The SSM state in one store, [places][ssm elems] f32 straight from the OS: page-aligned,
    // and in huge pages when a state is one or more of them (2 MiB per layer of
    // Qwen3.6-35B-A3B: one page to fault in and one TLB entry). Place ssm_slot[0] holds the
    // live state; with a journal, ssm_slot[1] the origin: the state at the window's base.
    int64_t ssm_elems = 0;
    platform::AnonymousMemory ssm_store;
    std::vector<int64_t> ssm_slot;
    // The journal's delta-rule records, two buffers of [records][heads][record elems], record
    // i of the token at origin position + i. A cut-back leaves the current state as the
    // origin with ssm_pending records of ssm_records[replay_buf] applied (the live place stale
    // until the next pass rebuilds it); the next window records after them in the same
    // buffer, or, once they are more than kMaxPendingReplay, its first pass writes the
    // replayed state back as the new origin and records into the other buffer.
    // ssm_pending −1: the live place holds the state.
    std::vector<float> ssm_records[2];
    int record_buf = 0, replay_buf = 0;
    int64_t ssm_pending = -1;
    int64_t record_elems() const;  // per token, all heads
    float* ssm_base() const { return reinterpret_cast<float*>(ssm_store.data()); }
    float* ssm_place(int64_t i) { return ssm_base() + ssm_slot[static_cast<size_t>(i)] * ssm_elems; }
    float* ssm() { return ssm_elems > 0 ? ssm_place(0) : nullptr; }
    const float* ssm_place(int64_t i) const { return ssm_base() + ssm_slot[static_cast<size_t>(i)] * ssm_elems; }
    // The current state into `out` (ssm_elems floats), applying pending records.
    void read_ssm(float* out) const;
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
  int64_t origin_pos_ = 0;  // the position whose state the CPU recurrent layers' origin holds
  std::unique_ptr<DeviceState> device_;
};

}  // namespace moetier
