// The VRAM expert cache of a GPU layer whose routed experts live on the CPU (vk_exec.h):
// the host routes the step's tokens once, the pairs whose expert has a copy in VRAM run on the
// GPU while the CPU computes the others, the combine adds both, and experts that missed are
// copied for later steps when copies pay (gpu/expert_cache.h).
#include <chrono>

#include <fmt/format.h>

#include "gpu/vulkan/vk_exec.h"

namespace moetier::vk {

namespace {

// Most copies made after one step of one layer: a prompt batch misses many experts, and
// each copy holds the queue (and the link) for its bytes.
constexpr int kMaxUploadsPerStep = 2;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

VulkanBackend::ExpertCacheLayer* VulkanBackend::expert_cache(const MoeWeights& w) {
  const auto il = static_cast<size_t>(layer_);
  if (il >= options_.expert_cache_slots.size() || options_.expert_cache_slots[il] <= 0) return nullptr;
  // Experts read from the file on demand (engine/expert_store.h) are kept in RAM in the CPU's
  // tile layout, which the GPU kernels do not read: such layers have no VRAM copies.
  if (w.experts != nullptr) return nullptr;
  if (expert_caches_.size() <= il) expert_caches_.resize(il + 1);
  ExpertCacheLayer& cache = expert_caches_[il];
  if (!cache.policy) {
    if (!status_) return nullptr;
    if (Status st = allocate_expert_cache(w, options_.expert_cache_slots[il], cache); !st) {
      fail(Status::runtime(fmt::format("the VRAM expert cache of layer {} does not fit ({}); a smaller "
                                       "--gpu-expert-cache, or 0, leaves room",
                                       layer_, st.message())));
      return nullptr;
    }
  }
  return &cache;
}

Status VulkanBackend::allocate_expert_cache(const MoeWeights& w, int slots, ExpertCacheLayer& cache) {
  Allocator& a = dev_->allocator();
  for (const auto& [m, g] : {std::pair{&w.gate_exps, &cache.gate}, std::pair{&w.up_exps, &cache.up},
                             std::pair{&w.down_exps, &cache.down}}) {
    *g = GpuMatrix{.type = m->type, .n_in = m->n_in, .n_out = m->n_out, .n_mat = slots, .row_bytes = m->row_bytes};
    const auto mat_bytes = static_cast<uint64_t>(m->row_bytes * m->n_out);
    const int64_t per_part = static_cast<int64_t>(a.max_range() / mat_bytes);
    if (per_part < 1) return Status::runtime("one expert matrix is larger than a GPU buffer binding");
    for (int64_t first = 0; first < slots; first += per_part) {
      const int64_t count = std::min<int64_t>(per_part, slots - first);
      ASSIGN_OR_RETURN(BufferRef b, a.allocate(mat_bytes * static_cast<uint64_t>(count), MemoryUse::kWeights));
      g->parts.push_back({.buffer = b, .first = first, .count = count});
    }
  }
  cache.policy = std::make_unique<GpuExpertCachePolicy>(static_cast<int>(w.gate_exps.n_mat), slots);
  if (upload_gbps_ <= 0) {
    // Host → GPU, measured once through the staging ring as the copies will go (one expert's
    // gate stack part at a time, 4 MiB or the part).
    const BufferRef& part = cache.gate.parts.front().buffer;
    std::vector<uint8_t> probe(std::min<uint64_t>(4ull << 20, part.size));
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(dev_->upload(part, probe.data(), probe.size()));
    RETURN_IF_ERROR(dev_->stream().finish());
    const double s = seconds_since(t0);
    upload_gbps_ = s > 0 ? static_cast<double>(probe.size()) / s / 1e9 : 1;
  }
  return Status::ok();
}

void VulkanBackend::moe_with_expert_cache(const MoeWeights& w, const MoeShape& s, Act in, Act out,
                                          ExpertCacheLayer& cache, const BufferRef& logits) {
  const int64_t k = s.n_expert_used, n_pairs = n_ * k;
  // The rows and the router logits come down once; the host routes (one routing for both
  // devices, so a pair is computed exactly once).
  if (!download_for_cpu_experts(s, in, logits)) return;
  host_selected_.resize(static_cast<size_t>(n_pairs));
  host_selected_weight_.resize(static_cast<size_t>(n_pairs));
  moe_select_experts(s, host_b_.data(), n_, host_selected_.data(), host_selected_weight_.data(), host_order_);

  // Pairs with a copy: compact lists for the GPU (slot, token row) and the map the combine
  // reads; their experts are left to the GPU on the CPU side.
  GpuExpertCachePolicy& policy = *cache.policy;
  policy.begin_step();
  host_elsewhere_.assign(static_cast<size_t>(s.n_expert), 0);
  host_map_.assign(static_cast<size_t>(n_pairs), -1);
  host_gpu_ids_.clear();
  host_gpu_rows_.clear();
  host_missed_.clear();
  for (int64_t p = 0; p < n_pairs; ++p) {
    const int32_t expert = host_selected_[static_cast<size_t>(p)];
    const int slot = policy.slot_of(expert);
    if (slot < 0) {
      // Distinct missed experts in the order first seen (the token's top-k order first).
      if (host_elsewhere_[static_cast<size_t>(expert)] == 0) {
        host_elsewhere_[static_cast<size_t>(expert)] = 2;  // marked as missed (not "elsewhere")
        host_missed_.push_back(expert);
      }
      continue;
    }
    policy.hit(expert);
    host_elsewhere_[static_cast<size_t>(expert)] = 1;
    host_map_[static_cast<size_t>(p)] = static_cast<int32_t>(host_gpu_ids_.size());
    host_gpu_ids_.push_back(slot);
    host_gpu_rows_.push_back(static_cast<int32_t>(p / k));
  }
  for (uint8_t& e : host_elsewhere_) e = e == 1 ? 1 : 0;
  const auto n_gpu = static_cast<int64_t>(host_gpu_ids_.size());
  cache_stats_.pairs += n_pairs;
  cache_stats_.gpu_pairs += n_gpu;

  if (n_gpu > 0) {
    fail(dev_->upload(ids_, host_gpu_ids_.data(), static_cast<uint64_t>(n_gpu) * 4));
    fail(dev_->upload(pair_rows_, host_gpu_rows_.data(), static_cast<uint64_t>(n_gpu) * 4));
    fail(dev_->upload(weights_, host_selected_weight_.data(), static_cast<uint64_t>(n_pairs) * 4));
    routed_on_gpu(s, cache.gate, cache.up, cache.down, n_gpu);
  }
  fail(dev_->upload(pair_map_, host_map_.data(), static_cast<uint64_t>(n_pairs) * 4));
  shared_expert(w, s);
  fail(dev_->stream().submit());

  // The CPU's pairs meanwhile.
  cpu_.begin(host_a_.data(), seqs_, *pool_, profiler_);
  const auto t0 = std::chrono::steady_clock::now();
  cpu_.moe_routed(w, s, host_a_.data(),
                  {.selected = host_selected_.data(),
                   .selected_weight = host_selected_weight_.data(),
                   .experts_elsewhere = host_elsewhere_.data()},
                  host_c_.data());
  if (const int64_t n_cpu = n_pairs - n_gpu; n_cpu > 0) {
    const double per_pair = seconds_since(t0) / static_cast<double>(n_cpu);
    decode_cpu_seconds_per_pair_ =
        decode_cpu_seconds_per_pair_ > 0 ? 0.9 * decode_cpu_seconds_per_pair_ + 0.1 * per_pair : per_pair;
  }
  fail(dev_->upload(rows(out), host_c_.data(), host_c_.size() * 4));
  defer_combine(n_gpu > 0, w.has_shared, k, out, /*pair_map=*/true);

  // Copies for the next steps, recorded after this step's work in the stream (its hazard
  // tracking orders a copy after any read of the slot it replaces).
  const uint64_t expert_bytes = static_cast<uint64_t>(w.gate_exps.row_bytes * w.gate_exps.n_out +
                                                      w.up_exps.row_bytes * w.up_exps.n_out +
                                                      w.down_exps.row_bytes * w.down_exps.n_out);
  const ExpertCacheCosts costs{.upload_seconds = static_cast<double>(expert_bytes) / (upload_gbps_ * 1e9),
                               .cpu_seconds_per_pair = decode_cpu_seconds_per_pair_};
  for (const GpuExpertCachePolicy::Upload& u : policy.plan_uploads(host_missed_, kMaxUploadsPerStep, costs)) {
    for (const auto& [m, g] : {std::pair{&w.gate_exps, &cache.gate}, std::pair{&w.up_exps, &cache.up},
                               std::pair{&w.down_exps, &cache.down}}) {
      const auto mat_bytes = static_cast<uint64_t>(m->row_bytes * m->n_out);
      for (const GpuMatrix::Part& part : g->parts) {
        if (u.slot < part.first || u.slot >= part.first + part.count) continue;
        const BufferRef dst = part.buffer.slice(mat_bytes * static_cast<uint64_t>(u.slot - part.first), mat_bytes);
        fail(dev_->upload(dst, m->row(u.expert, 0), mat_bytes));
      }
    }
    ++cache_stats_.uploads;
    cache_stats_.upload_bytes += expert_bytes;
  }
}

GpuExpertCacheStats VulkanBackend::expert_cache_stats() const {
  GpuExpertCacheStats s = cache_stats_;
  double sum = 0;
  int n = 0;
  for (const ExpertCacheLayer& c : expert_caches_) {
    if (!c.policy || c.policy->hits_per_upload() < 0) continue;
    sum += c.policy->hits_per_upload();
    ++n;
  }
  s.hits_per_upload = n > 0 ? sum / n : -1;
  return s;
}

}  // namespace moetier::vk
