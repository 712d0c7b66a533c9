#include "engine/expert_streaming.h"

#include <map>

#include <fmt/format.h>

#include "core/cpu_features.h"
#include "core/format.h"
#include "cpu/dot.h"
#include "cpu/interleave.h"
#include "model/hparams_keys.h"
#include "platform/memory.h"

namespace moetier {

namespace {

struct LayerStacks {
  const gguf::TensorInfo* part[3] = {nullptr, nullptr, nullptr};  // gate, up, down
};

// The compute layers whose three expert stacks are all among `names`.
std::map<int, LayerStacks> expert_stacks(const gguf::GgufFile& header, const HParams& hp,
                                         const std::vector<std::string>& names) {
  std::map<int, LayerStacks> layers;
  for (const std::string& name : names) {
    const TensorRole role = arch_keys::common_tensor_role(name);
    const int layer = tensor_layer_index(name);
    if (!is_routed_expert(role) || layer < 0 || layer >= hp.n_layer) continue;
    const gguf::TensorInfo* t = header.find_tensor(name);
    if (t == nullptr || t->n_dims != 3) continue;
    const int part = role == TensorRole::kExpertGate ? 0 : role == TensorRole::kExpertUp ? 1 : 2;
    layers[layer].part[part] = t;
  }
  std::erase_if(layers, [](const auto& kv) { return !kv.second.part[0] || !kv.second.part[1] || !kv.second.part[2]; });
  return layers;
}

bool interleavable_stack(const gguf::TensorInfo& t) {
  const cpu::DotKernel* k = cpu::best_dot_kernel(t.type, cpu_features());
  return cpu::interleavable(t.type) && k != nullptr && k->tile_x8 != nullptr && t.ne[1] % cpu::kInterleaveRows == 0;
}

}  // namespace

Result<ExpertStreamingPlan> plan_expert_streaming(const gguf::GgufFile& header, const HParams& hp,
                                                  const ExpertStreamingRequest& request) {
  ExpertStreamingPlan plan;
  if (request.expert_pages != gguf::ExpertPages::kAuto) return plan;
  const std::map<int, LayerStacks> stacks = expert_stacks(header, hp, request.cpu_tensors);
  if (stacks.empty()) return plan;
  ExpertTierQuery q{.n_expert_used = hp.n_expert_used, .working_bytes = request.working_bytes};
  int64_t cpu_bytes = 0, expert_bytes = 0;
  for (const std::string& name : request.cpu_tensors) {
    if (const gguf::TensorInfo* t = header.find_tensor(name)) cpu_bytes += static_cast<int64_t>(t->n_bytes);
  }
  for (const auto& [layer, s] : stacks) {
    const int64_t n_expert = s.part[0]->ne[2];
    int64_t bytes = 0;
    for (const gguf::TensorInfo* t : s.part) bytes += static_cast<int64_t>(t->n_bytes);
    expert_bytes += bytes;
    q.layers.push_back({.layer = layer, .n_expert = n_expert, .expert_bytes = bytes / n_expert});
  }
  q.resident_bytes = cpu_bytes - expert_bytes;
  q.ram_budget_bytes = request.ram_budget_mib * (1ll << 20);
  const platform::MemoryInfo mem = platform::memory_info();
  q.available_bytes = static_cast<int64_t>(mem.available.value_or(0));
  q.total_ram_bytes = static_cast<int64_t>(mem.total.value_or(0));
  if (q.ram_budget_bytes == 0 && !mem.available) return plan;  // unknown: keep the mapping as before
  plan.tiers = plan_expert_tiers(q);
  if (!plan.tiers.stream) return plan;
  if (!plan.tiers.error) return plan.tiers.error;
  for (const auto& [layer, s] : stacks) {
    plan.layers.push_back(layer);
    for (const gguf::TensorInfo* t : s.part) plan.streamed_tensors.push_back(t->name);
  }
  return plan;
}

void exclude_streamed_from_load(const ExpertStreamingPlan& plan, gguf::LoadOptions& load,
                                std::vector<std::string>& repack) {
  if (!plan.tiers.stream) return;
  const std::set<std::string> streamed(plan.streamed_tensors.begin(), plan.streamed_tensors.end());
  const auto is_streamed = [&](const std::string& name) { return streamed.count(name) != 0; };
  std::erase_if(load.expert_tensors, is_streamed);
  std::erase_if(repack, is_streamed);
  load.streamed_tensors = plan.streamed_tensors;
}

Result<std::unique_ptr<ExpertStore>> open_expert_store(gguf::ModelFile& file, const HParams& hp,
                                                       const ExpertStreamingPlan& plan, const ExpertStoreParams& params) {
  const gguf::GgufFile& header = file.header();
  const std::map<int, LayerStacks> stacks = expert_stacks(header, hp, plan.streamed_tensors);
  ExpertStoreOptions o{.path = header.path,
                       .data_offset = header.data_offset,
                       .n_expert_used = hp.n_expert_used,
                       .policy = params.policy,
                       .mlock = params.mlock,
                       .progress = params.progress};
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const auto it = stacks.find(plan.layers[i]);
    if (it == stacks.end()) return Status::runtime(fmt::format("{}: layer {}'s experts vanished", header.path, plan.layers[i]));
    const LayerStacks& s = it->second;
    ExpertStoreLayer l{.layer = plan.layers[i],
                       .gate = s.part[0],
                       .up = s.part[1],
                       .down = s.part[2],
                       .capacity = plan.tiers.capacity[i]};
    if (params.repack) {
      l.interleave_gate_up = interleavable_stack(*s.part[0]) && interleavable_stack(*s.part[1]);
      l.interleave_down = interleavable_stack(*s.part[2]);
      if (l.interleave_gate_up) file.set_interleaved(*s.part[0]), file.set_interleaved(*s.part[1]);
      if (l.interleave_down) file.set_interleaved(*s.part[2]);
    }
    o.layers.push_back(l);
  }
  return ExpertStore::create(o);
}

std::string describe_expert_stats(const ExpertStoreStats& s, int64_t tokens, double seconds) {
  const double requests = static_cast<double>(std::max<int64_t>(1, s.requests));
  std::string line = fmt::format("experts: {:.1f}% in RAM when needed ({:.1f}% cached, {:.1f}% read ahead), {:.1f}% read on demand",
                                 100.0 * s.hit_rate(), 100.0 * static_cast<double>(s.hits) / requests,
                                 100.0 * static_cast<double>(s.read_ahead_hits) / requests,
                                 100.0 * static_cast<double>(s.misses) / requests);
  if (tokens > 0) {
    line += fmt::format(", {} read per token", format_bytes(s.bytes_read / static_cast<uint64_t>(tokens)));
  }
  if (s.read_busy_seconds > 0) line += fmt::format(" at {:.2f} GB/s", s.disk_gb_per_second());
  if (s.used_after_prediction > 0) line += fmt::format(", next-layer prediction {:.0f}% right", 100.0 * s.prediction_accuracy());
  if (seconds > 0) line += fmt::format(", waited for reads {:.0f}% of the time", 100.0 * s.wait_seconds / seconds);
  return line;
}

std::string describe_gpu_expert_cache(const GpuExpertCacheStats& s, int64_t tokens) {
  std::string line = fmt::format("VRAM expert cache: {:.1f}% of the routed pairs computed on the GPU", 100.0 * s.hit_rate());
  if (tokens > 0) {
    line += fmt::format(", {:.2f} copies per token ({} per token)",
                        static_cast<double>(s.uploads) / static_cast<double>(tokens),
                        format_bytes(s.upload_bytes / static_cast<uint64_t>(tokens)));
  }
  if (s.hits_per_upload >= 0) line += fmt::format(", a copy used {:.1f} times before it was replaced", s.hits_per_upload);
  return line;
}

}  // namespace moetier
