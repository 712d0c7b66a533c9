// What moetier knows about a model architecture, without computing anything: how to read
// its hyper-parameters from GGUF metadata, which tensors (names, shapes, roles) a file of
// it must hold, and how to write its metadata (synth). Each architecture lives in its own
// file under src/model/arch/ and is listed once in model/arch/architectures.cpp; the engine
// core never names an architecture.
#pragma once

#include <array>
#include <memory>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"

namespace moetier {

namespace gguf {
class Writer;
class ModelFile;
}  // namespace gguf
class Model;
class MtpHead;
struct ModelOptions;

enum class LayerKind {
  kAttention,      // softmax attention with a KV cache (qwen35moe: gated; qwen3moe: plain)
  kDeltaNet,       // Gated DeltaNet: conv + recurrent state, no KV cache
};
std::string_view layer_kind_name(LayerKind kind);  // "attention", "deltanet"

// What a tensor is for; drives placement (routed experts vs the rest), quant mixes in
// synth, and inspect's byte accounting.
enum class TensorRole {
  kTokenEmbedding,
  kOutput,             // LM head
  kNorm,               // any *_norm weight (1-D)
  kAttention,          // q/k/v/o/gate projections of attention layers
  kDeltaNet,           // qkv/gate/beta/alpha/out projections, conv, dt bias, A of GDN layers
  kRouter,             // ffn_gate_inp (+ shared expert gate scalar)
  kExpertGate,         // routed experts, 3-D {in, out, n_expert}
  kExpertUp,
  kExpertDown,
  kSharedExpert,       // shared expert matrices
  kDenseFfn,           // a dense FFN (for architectures that have one)
  kOther,
};
std::string_view tensor_role_name(TensorRole role);
inline bool is_routed_expert(TensorRole r) {
  return r == TensorRole::kExpertGate || r == TensorRole::kExpertUp || r == TensorRole::kExpertDown;
}

// Architecture-independent hyper-parameters. Fields an architecture lacks stay 0.
struct HParams {
  std::string arch;
  std::string name;                 // general.name
  int64_t n_layer = 0;              // compute layers (block_count minus MTP/nextn layers)
  int64_t n_layer_mtp = 0;          // trailing MTP (nextn) layers present in the file
  int64_t n_embd = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-6f;

  // attention
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;           // attention.key_length
  int64_t head_dim_v = 0;           // attention.value_length
  bool attn_output_gate = false;    // qwen35moe: q projection also yields a sigmoid gate
  int64_t n_rot = 0;                // rotary dims per head
  float rope_base = 10000.0f;
  std::array<int64_t, 4> rope_sections = {0, 0, 0, 0};

  // MoE
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_expert_shared = 0;      // shared experts (qwen35moe: 1)
  int64_t n_ff_exp = 0;             // routed expert FFN width
  int64_t n_ff_shexp = 0;           // shared expert FFN width

  // Gated DeltaNet (ssm.*)
  int64_t ssm_d_conv = 0;           // conv kernel taps
  int64_t ssm_d_state = 0;          // d_k = d_v per head
  int64_t ssm_n_group = 0;          // K heads
  int64_t ssm_dt_rank = 0;          // V heads
  int64_t ssm_d_inner = 0;          // V heads * d_state
  int64_t full_attention_interval = 0;

  std::vector<LayerKind> layer_kinds;  // one per compute layer

  int64_t n_attention_layers() const;
  int64_t n_deltanet_layers() const;
};

// One tensor a file of this architecture holds.
struct TensorSpec {
  std::string name;                 // e.g. "blk.3.ffn_up_exps.weight"
  std::vector<int64_t> ne;          // ggml order
  TensorRole role = TensorRole::kOther;
  int layer = -1;                   // -1 for token_embd/output/output_norm
  // A tensor llama.cpp's loader also treats as optional (e.g. an MTP block's
  // nextn.shared_head_norm, which falls back to output_norm): synth writes it, a file may
  // lack it.
  bool optional = false;
};

struct ArchInfo {
  std::string_view name;  // GGUF general.architecture, e.g. "qwen35moe"

  // Read and validate hyper-parameters (missing keys, zero/negative/inconsistent values
  // are kBadInput errors naming the key).
  Result<HParams> (*read_hparams)(const gguf::GgufFile& file);

  // Every tensor a complete file must hold, with its shape.
  std::vector<TensorSpec> (*tensor_specs)(const HParams& hp);

  // Role of a tensor found in a file, by name (for files with extra/unknown tensors: kOther).
  TensorRole (*tensor_role)(std::string_view tensor_name);

  // Write the `<arch>.*` metadata keys for `hp` (synth).
  void (*write_hparams)(const HParams& hp, gguf::Writer& writer);

  // Bytes of recurrent state one sequence needs in one layer of this kind (conv state +
  // DeltaNet state, f32), 0 for attention layers.
  int64_t (*recurrent_state_bytes)(const HParams& hp, LayerKind kind);
  // Bytes the rollback journal of `tokens` positions takes for one sequence in such a layer
  // on the CPU (SequenceState::layer_journal_bytes); nullptr: recurrent_state_bytes per
  // position, as a GPU layer's journal keeps.
  int64_t (*cpu_journal_bytes)(const HParams& hp, LayerKind kind, int64_t tokens) = nullptr;

  // Bind the file's weights and build the runnable model (the forward pass); nullptr for
  // architectures that can be described but not run yet. Added by the engine work.
  Result<std::unique_ptr<Model>> (*create_model)(const gguf::ModelFile& file, const HParams& hp,
                                                 const ModelOptions& options) = nullptr;

  // The MTP head of a separate file (an MTP-only GGUF given as the draft, -md), which it
  // keeps open; nullptr for architectures without one.
  Result<std::unique_ptr<MtpHead>> (*create_mtp_head)(std::shared_ptr<const gguf::ModelFile> file, const HParams& hp,
                                                      const ModelOptions& options) = nullptr;
};

// Every architecture this build runs (model/arch/architectures.cpp), and lookups by name.
std::span<const ArchInfo* const> architectures();
const ArchInfo* find_arch(std::string_view name);
std::vector<std::string_view> registered_arch_names();

// Reads general.architecture and dispatches to the registered ArchInfo; an unknown
// architecture is a kBadInput error listing the supported ones.
Result<HParams> read_hparams(const gguf::GgufFile& file);

// general.architecture of a file ("" when absent or not a string).
std::string architecture_of(const gguf::GgufFile& file);

// Block index of a per-layer tensor name ("blk.12.ffn_up_exps.weight" -> 12), or -1 for
// names outside the "blk.N." scheme (token_embd, output, output_norm, ...).
int tensor_layer_index(std::string_view tensor_name);

// Names of the routed-expert tensors (ffn_{gate,up,down}_exps: the 3-D stacks the CPU
// reads at random while decoding) of the compute blocks [0, hp.n_layer), in file order;
// MTP blocks are left out (the forward pass never runs them). `on_cpu`: one flag per
// compute block selecting whose experts to list (empty: every block).
std::vector<std::string> routed_expert_tensors(const gguf::GgufFile& file, const HParams& hp,
                                               const std::vector<bool>& on_cpu = {});

}  // namespace moetier
