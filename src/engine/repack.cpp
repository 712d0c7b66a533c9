#include "engine/repack.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <map>
#include <set>
#include <string_view>

#include "core/cpu_features.h"
#include "core/format.h"
#include "cpu/dot.h"
#include "cpu/interleave.h"
#include "model/hparams_keys.h"

namespace moetier {

std::vector<std::string> repack_candidates(const gguf::GgufFile& header, const HParams& hp,
                                           const PlacementDecision& d) {
  std::vector<std::string> names;
  for (std::string& name : cpu_weight_tensors(header, hp, d.plan)) {  // CPU tensors of compute layers
    const TensorRole role = arch_keys::common_tensor_role(name);
    const int layer = tensor_layer_index(name);
    const bool gpu_layer = d.gpu_part && layer >= 0 && static_cast<size_t>(layer) < d.gpu.layer_on_gpu.size() &&
                           d.gpu.layer_on_gpu[static_cast<size_t>(layer)];
    if (is_routed_expert(role)) {
      // Prompt batches may stream them to the GPU, or the VRAM expert cache copies them: the
      // GPU reads the file's layout.
      if (gpu_layer && (d.gpu.op_offload || d.plan.gpu_expert_cache.on())) continue;
    } else if (role == TensorRole::kAttention || role == TensorRole::kDeltaNet || role == TensorRole::kSharedExpert ||
               role == TensorRole::kDenseFfn || role == TensorRole::kOutput) {
      if (gpu_layer) continue;  // a GPU layer's blocks read the file's layout
    } else {
      continue;  // the token embedding is read row by row; norms, router and the rest stay as they are
    }
    names.push_back(std::move(name));
  }
  return names;
}

namespace {

// Why one tensor cannot be interleaved ("" = it can).
std::string blocker(gguf::ModelFile& file, const gguf::TensorInfo& t) {
  if (file.owned_tensor_data(t) == nullptr) return "mapped";
  const cpu::DotKernel* k = cpu::best_dot_kernel(t.type, cpu_features());
  if (!cpu::interleavable(t.type) || k == nullptr || k->tile_x8 == nullptr) return "kernel";
  if (t.n_dims < 2 || t.ne[1] % cpu::kInterleaveRows != 0) return "shape";
  return "";
}

std::string tensors_text(int n) { return fmt::format("{} tensor{}", n, n == 1 ? "" : "s"); }

// A dense candidate's kind as the note names it.
std::string_view dense_kind(TensorRole role) {
  switch (role) {
    case TensorRole::kAttention: return "attention";
    case TensorRole::kDeltaNet: return "DeltaNet";
    case TensorRole::kSharedExpert: return "shared expert";
    case TensorRole::kDenseFfn: return "dense FFN";
    case TensorRole::kOutput: return "LM head";
    default: return "other";
  }
}

}  // namespace

RepackResult repack_weights(gguf::ModelFile& file, const std::vector<std::string>& names, int threads) {
  if (names.empty()) return {};
  const gguf::GgufFile& header = file.header();
  // The MoE block reads a layer's gate and up matrices as a pair, routed or shared: both
  // are interleaved or neither. Everything else on its own.
  struct Pair {
    const gguf::TensorInfo* gate = nullptr;
    const gguf::TensorInfo* up = nullptr;
  };
  std::map<std::pair<int, bool>, Pair> pairs;  // (layer, shared) → gate and up
  std::vector<const gguf::TensorInfo*> chosen, singles;
  for (const std::string& name : names) {
    const gguf::TensorInfo* t = header.find_tensor(name);
    if (t == nullptr) continue;
    const TensorRole role = arch_keys::common_tensor_role(name);
    const bool shared = role == TensorRole::kSharedExpert;
    const bool gate = role == TensorRole::kExpertGate || (shared && name.find("ffn_gate_shexp.") != std::string::npos);
    const bool up = role == TensorRole::kExpertUp || (shared && name.find("ffn_up_shexp.") != std::string::npos);
    if (gate) {
      pairs[{tensor_layer_index(name), shared}].gate = t;
    } else if (up) {
      pairs[{tensor_layer_index(name), shared}].up = t;
    } else {
      singles.push_back(t);
    }
  }
  std::map<std::string, int> kept;  // blocker → tensors
  for (auto& [key, p] : pairs) {
    const std::string gate_why = p.gate ? blocker(file, *p.gate) : "absent";
    const std::string up_why = p.up ? blocker(file, *p.up) : "absent";
    if (gate_why.empty() && up_why.empty()) {
      chosen.push_back(p.gate);
      chosen.push_back(p.up);
    } else if (!key.second) {  // routed experts' reasons only (below)
      if (p.gate) ++kept[gate_why.empty() ? up_why : gate_why];
      if (p.up) ++kept[up_why.empty() ? gate_why : up_why];
    }
  }
  for (const gguf::TensorInfo* t : singles) {
    const std::string why = blocker(file, *t);
    if (why.empty()) {
      chosen.push_back(t);
    } else if (is_routed_expert(arch_keys::common_tensor_role(t->name))) {
      ++kept[why];  // the note says why routed experts keep the file's layout; dense ones go unsaid
    }
  }
  uint64_t bytes = 0, expert_bytes = 0;
  int expert_tensors = 0;
  std::set<std::string_view> dense_kinds;  // what the dense ones are, for the note
  const auto t0 = std::chrono::steady_clock::now();
  for (const gguf::TensorInfo* t : chosen) {
    const int64_t n_rows = static_cast<int64_t>(t->n_elements) / t->ne[0];
    cpu::interleave_in_place(t->type, t->ne[0], n_rows, file.owned_tensor_data(*t), threads);
    file.set_interleaved(*t);
    bytes += t->n_bytes;
    const TensorRole role = arch_keys::common_tensor_role(t->name);
    if (is_routed_expert(role)) {
      expert_bytes += t->n_bytes;
      ++expert_tensors;
    } else {
      dense_kinds.insert(dense_kind(role));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::string why_kept;
  auto add = [&](const std::string& text) { why_kept += (why_kept.empty() ? "" : "; ") + text; };
  if (auto it = kept.find("mapped"); it != kept.end()) {
    add(fmt::format("{} stay in the file mapping, which is read-only (--no-mmap, or --expert-pages huge, repacks them)",
                    it->second));
  }
  if (auto it = kept.find("kernel"); it != kept.end()) {
    add(fmt::format("{} have no interleaved kernel in this CPU's kernel set (AVX2, AVX-VNNI and AVX-512 VNNI have "
                    "it for Q8_0, Q4_K, Q5_K, Q6_K and IQ4_XS)",
                    it->second));
  }
  if (auto it = kept.find("shape"); it != kept.end()) {
    add(fmt::format("{} have rows that are not whole groups of {}", it->second, cpu::kInterleaveRows));
  }
  if (chosen.empty()) return {.note = why_kept.empty() ? "" : "weights keep the file's layout: " + why_kept};
  const int other_tensors = static_cast<int>(chosen.size()) - expert_tensors;
  std::string line = "repacked ";
  if (expert_tensors > 0) {
    line += fmt::format("{} of routed experts ({})", format_bytes(expert_bytes), tensors_text(expert_tensors));
  }
  if (other_tensors > 0) {
    line += fmt::format("{}{} of {}weights ({}: {})", expert_tensors > 0 ? " and " : "",
                        format_bytes(bytes - expert_bytes), expert_tensors > 0 ? "other " : "",
                        tensors_text(other_tensors), fmt::join(dense_kinds, ", "));
  }
  line += fmt::format(" into 8-row groups for the tile kernels in {:.2f} s (-nr/--no-repack keeps the file's layout)",
                      seconds);
  if (!why_kept.empty()) line += "; not repacked: " + why_kept;
  return {.bytes = bytes, .tensors = static_cast<int>(chosen.size()), .seconds = seconds, .note = line};
}

}  // namespace moetier
