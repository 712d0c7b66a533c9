#include "tools/repack.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "core/cpu_features.h"
#include "core/progress.h"
#include "cpu/dot.h"
#include "cpu/interleave.h"
#include "model/hparams_keys.h"

namespace moetier {

std::vector<std::string> repack_candidates(const gguf::GgufFile& header, const HParams& hp,
                                           const PlacementDecision& d) {
  std::vector<std::string> names;
  for (std::string& name : cpu_weight_tensors(header, hp, d.plan)) {  // CPU tensors of compute layers
    if (!is_routed_expert(arch_keys::common_tensor_role(name))) continue;
    const auto layer = static_cast<size_t>(tensor_layer_index(name));
    const bool gpu_layer = d.gpu_part && layer < d.gpu.layer_on_gpu.size() && d.gpu.layer_on_gpu[layer];
    if (gpu_layer && d.gpu.op_offload) continue;
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

}  // namespace

RepackResult repack_experts(gguf::ModelFile& file, const std::vector<std::string>& names, int threads) {
  if (names.empty()) return {};
  const gguf::GgufFile& header = file.header();
  // Per layer: its gate/up pair and its down, with what blocks each.
  struct Layer {
    const gguf::TensorInfo* gate = nullptr;
    const gguf::TensorInfo* up = nullptr;
    const gguf::TensorInfo* down = nullptr;
  };
  std::map<int, Layer> layers;
  for (const std::string& name : names) {
    const gguf::TensorInfo* t = header.find_tensor(name);
    if (t == nullptr) continue;
    Layer& l = layers[tensor_layer_index(name)];
    switch (arch_keys::common_tensor_role(name)) {
      case TensorRole::kExpertGate: l.gate = t; break;
      case TensorRole::kExpertUp: l.up = t; break;
      case TensorRole::kExpertDown: l.down = t; break;
      default: break;
    }
  }
  std::vector<const gguf::TensorInfo*> chosen;
  std::map<std::string, int> kept;  // blocker → tensors
  for (auto& [il, l] : layers) {
    const std::string gate_why = l.gate ? blocker(file, *l.gate) : "absent";
    const std::string up_why = l.up ? blocker(file, *l.up) : "absent";
    if (gate_why.empty() && up_why.empty()) {
      chosen.push_back(l.gate);
      chosen.push_back(l.up);
    } else {
      if (l.gate) ++kept[gate_why.empty() ? up_why : gate_why];
      if (l.up) ++kept[up_why.empty() ? gate_why : up_why];
    }
    if (l.down) {
      const std::string why = blocker(file, *l.down);
      if (why.empty()) {
        chosen.push_back(l.down);
      } else {
        ++kept[why];
      }
    }
  }
  uint64_t bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const gguf::TensorInfo* t : chosen) {
    const int64_t n_rows = static_cast<int64_t>(t->n_elements) / t->ne[0];
    cpu::interleave_in_place(t->type, t->ne[0], n_rows, file.owned_tensor_data(*t), threads);
    file.set_interleaved(*t);
    bytes += t->n_bytes;
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
                    "it for Q4_K, Q5_K, Q6_K and IQ4_XS)",
                    it->second));
  }
  if (auto it = kept.find("shape"); it != kept.end()) {
    add(fmt::format("{} have rows that are not whole groups of {}", it->second, cpu::kInterleaveRows));
  }
  if (chosen.empty()) return {.note = "routed experts keep the file's layout: " + why_kept};
  std::string line = fmt::format(
      "repacked {} of routed experts ({} tensors) into 8-row groups for the tile kernels in {:.2f} s "
      "(-nr/--no-repack keeps the file's layout)",
      format_bytes(bytes), chosen.size(), seconds);
  if (!why_kept.empty()) line += "; not repacked: " + why_kept;
  return {.bytes = bytes, .tensors = static_cast<int>(chosen.size()), .seconds = seconds, .note = line};
}

}  // namespace moetier
