// The architecture-independent parts of arch.h: lookups in the list of architectures
// (model/arch/architectures.cpp, a constant table), names, tensor name parsing.
#include "model/arch.h"

#include <algorithm>
#include <charconv>

#include "core/status.h"
#include "model/hparams_keys.h"

namespace moetier {

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::kAttention: return "attention";
    case LayerKind::kDeltaNet: return "deltanet";
  }
  return "?";
}

std::string_view tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::kTokenEmbedding: return "token_embedding";
    case TensorRole::kOutput: return "output";
    case TensorRole::kNorm: return "norm";
    case TensorRole::kAttention: return "attention";
    case TensorRole::kDeltaNet: return "deltanet";
    case TensorRole::kRouter: return "router";
    case TensorRole::kExpertGate: return "expert_gate";
    case TensorRole::kExpertUp: return "expert_up";
    case TensorRole::kExpertDown: return "expert_down";
    case TensorRole::kSharedExpert: return "shared_expert";
    case TensorRole::kDenseFfn: return "dense_ffn";
    case TensorRole::kOther: return "other";
  }
  return "?";
}

int64_t HParams::n_attention_layers() const {
  return std::count(layer_kinds.begin(), layer_kinds.end(), LayerKind::kAttention);
}

int64_t HParams::n_deltanet_layers() const {
  return std::count(layer_kinds.begin(), layer_kinds.end(), LayerKind::kDeltaNet);
}

const ArchInfo* find_arch(std::string_view name) {
  for (const ArchInfo* a : architectures()) {
    if (a->name == name) return a;
  }
  return nullptr;
}

std::vector<std::string_view> registered_arch_names() {
  std::vector<std::string_view> names;
  for (const ArchInfo* a : architectures()) names.push_back(a->name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string architecture_of(const gguf::GgufFile& file) { return file.get_string_or("general.architecture", ""); }

Result<HParams> read_hparams(const gguf::GgufFile& file) {
  const gguf::Value* v = file.find("general.architecture");
  if (v == nullptr) return Status::bad_input("missing metadata key 'general.architecture'");
  const auto arch = v->as_string();
  if (!arch) {
    return Status::bad_input(fmt::format("metadata key 'general.architecture' is a {}, expected a string",
                                         gguf::value_type_name(v->type)));
  }
  const ArchInfo* info = find_arch(*arch);
  if (info == nullptr) {
    std::string supported;
    for (std::string_view n : registered_arch_names()) {
      if (!supported.empty()) supported += ", ";
      supported += n;
    }
    return Status::bad_input(
        fmt::format("unsupported architecture '{}' (supported: {})", *arch, supported.empty() ? "none" : supported));
  }
  return info->read_hparams(file);
}

int tensor_layer_index(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  int layer = -1;
  const auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != '.' || layer < 0) return -1;
  return layer;
}

std::vector<std::string> routed_expert_tensors(const gguf::GgufFile& file, const HParams& hp,
                                               const std::vector<bool>& on_cpu) {
  const ArchInfo* info = find_arch(hp.arch);
  std::vector<std::string> names;
  for (const gguf::TensorInfo& t : file.tensors) {
    const int layer = tensor_layer_index(t.name);
    if (layer < 0 || layer >= hp.n_layer) continue;
    if (!on_cpu.empty() && (static_cast<size_t>(layer) >= on_cpu.size() || !on_cpu[static_cast<size_t>(layer)])) continue;
    const TensorRole role = info && info->tensor_role ? info->tensor_role(t.name) : arch_keys::common_tensor_role(t.name);
    if (is_routed_expert(role)) names.push_back(t.name);
  }
  return names;
}

}  // namespace moetier
