#include "engine/expert_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "console/progress.h"

namespace moetier {

namespace {

// kLfu: a use counts half as much after this many batches of its layer.
constexpr double kLfuHalfLife = 16;

uint64_t align_down(uint64_t x, uint64_t a) { return x / a * a; }
uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Result<ExpertCachePolicy> parse_expert_cache_policy(std::string_view text) {
  if (text == "lru") return ExpertCachePolicy::kLru;
  if (text == "lfu") return ExpertCachePolicy::kLfu;
  return Status::bad_input(fmt::format("--expert-cache-policy: '{}' is not one of lru, lfu", text));
}

std::string_view expert_cache_policy_name(ExpertCachePolicy policy) {
  return policy == ExpertCachePolicy::kLru ? "lru" : "lfu";
}

Result<std::unique_ptr<ExpertStore>> ExpertStore::create(const ExpertStoreOptions& options) {
  std::unique_ptr<ExpertStore> store(new ExpertStore(options));
  ASSIGN_OR_RETURN(platform::File file, platform::File::open_unbuffered(options.path));
  store->file_.emplace(std::move(file));
  // Slot areas start on 4 KiB boundaries: unbuffered reads land there directly.
  const uint64_t area_align = std::max<uint64_t>(4096, store->file_->alignment());
  int max_layer = -1;
  for (const ExpertStoreLayer& spec : options.layers) max_layer = std::max(max_layer, spec.layer);
  store->by_layer_.assign(static_cast<size_t>(max_layer + 1), -1);
  for (const ExpertStoreLayer& spec : options.layers) {
    Layer l;
    l.spec = spec;
    const gguf::TensorInfo* tensors[3] = {spec.gate, spec.up, spec.down};
    const int64_t n_expert = spec.gate->ne[2];
    uint64_t at = 0;
    for (int p = 0; p < 3; ++p) {
      const gguf::TensorInfo& t = *tensors[p];
      if (t.ne[2] != n_expert || t.n_bytes % static_cast<uint64_t>(n_expert) != 0) {
        return Status::bad_input(fmt::format("{}: tensor '{}' is not a stack of {} experts", options.path, t.name, n_expert));
      }
      Part& part = l.parts[p];
      part.offset = t.offset;
      part.bytes = t.n_bytes / static_cast<uint64_t>(n_expert);
      part.type = t.type;
      part.n_in = t.ne[0];
      part.n_out = t.ne[1];
      part.row_bytes = static_cast<int64_t>(part.bytes / static_cast<uint64_t>(part.n_out));
      part.slot_offset = at;
      // The read of an unaligned range covers up to one alignment unit more on each side.
      at += align_up(part.bytes, area_align) + area_align;
    }
    l.slot_stride = at;
    l.slots.resize(static_cast<size_t>(spec.capacity));
    l.slot_of.assign(static_cast<size_t>(n_expert), -1);
    const uint64_t bytes = l.slot_stride * static_cast<uint64_t>(spec.capacity);
    auto memory = platform::AnonymousMemory::allocate(
        {.bytes = bytes, .alignment = platform::huge_page_size(), .huge_pages = true});
    if (!memory) return memory.status().with_context(options.path + ": expert cache");
    l.memory = std::move(*memory);
    if (options.mlock) {
      if (Status st = platform::lock_in_ram(l.memory.data(), l.memory.size()); !st) {
        return Status::runtime(fmt::format("{}: --mlock of the expert cache: {}", options.path, st.message()));
      }
    }
    store->slot_bytes_total_ += bytes;
    store->by_layer_[static_cast<size_t>(spec.layer)] = static_cast<int>(store->layers_.size());
    store->layers_.push_back(std::move(l));
  }
  for (int i = 0; i < std::max(1, options.reader_threads); ++i) store->readers_.emplace_back([s = store.get()] { s->reader_main(); });

  // Fill every layer's slots with its first experts: as much of the model in RAM as fits.
  const auto start = std::chrono::steady_clock::now();
  uint64_t fill_bytes = 0;
  {
    std::unique_lock lock(store->mutex_);
    for (size_t li = 0; li < store->layers_.size(); ++li) {
      Layer& l = store->layers_[li];
      for (int32_t e = 0; e < l.spec.capacity; ++e) {
        store->start_read(lock, static_cast<int>(li), e, /*pin=*/false, /*may_wait=*/true);
        fill_bytes += l.parts[0].bytes + l.parts[1].bytes + l.parts[2].bytes;
      }
    }
  }
  {
    ProgressBar bar({.label = "loading experts", .total = fill_bytes, .bytes = true,
                     .enabled = options.progress && fill_bytes >= (1ull << 30)});
    std::unique_lock lock(store->mutex_);
    while (!store->jobs_.empty() || store->reads_in_flight_ > 0) {
      store->slot_changed_.wait_for(lock, std::chrono::milliseconds(100));
      bar.update(std::min<uint64_t>(store->stats_.bytes_read, fill_bytes));
    }
    bar.update(fill_bytes);
    bar.finish();
    if (!store->error_) return store->error_;
    store->stats_ = {};  // the counters describe the run, not the load
  }
  store->fill_seconds_ = seconds_between(start, std::chrono::steady_clock::now());
  return store;
}

ExpertStore::~ExpertStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (std::thread& t : readers_) t.join();
}

void ExpertStore::set_router(int layer, const cpu::WeightMatrix& router) {
  if (serves(layer)) layer_of(layer).router = router;
}

int ExpertStore::capacity(int layer) const { return layer_of(layer).spec.capacity; }

double ExpertStore::score(const Layer& l, const Slot& s) const {
  if (options_.policy == ExpertCachePolicy::kLru) return static_cast<double>(s.last_use);
  return s.frequency * std::exp2(-static_cast<double>(l.clock - s.last_use) / kLfuHalfLife);
}

void ExpertStore::touch(Layer& l, Slot& s) {
  s.frequency = score(l, s) + 1;  // kLfu's decayed count as of now, plus this use
  if (options_.policy == ExpertCachePolicy::kLru) s.frequency = 0;
  s.last_use = l.clock;
}

int32_t ExpertStore::victim(const Layer& l) const {
  int32_t best = -1;
  double best_score = 0;
  for (size_t i = 0; i < l.slots.size(); ++i) {
    const Slot& s = l.slots[i];
    if (s.pins > 0 || s.state == SlotState::kReading) continue;
    if (s.state == SlotState::kEmpty) return static_cast<int32_t>(i);
    const double sc = score(l, s);
    if (best < 0 || sc < best_score) best = static_cast<int32_t>(i), best_score = sc;
  }
  return best;
}

int32_t ExpertStore::start_read(std::unique_lock<std::mutex>& lock, int layer_index, int32_t expert, bool pin,
                                bool may_wait) {
  Layer& l = layers_[static_cast<size_t>(layer_index)];
  int32_t slot = victim(l);
  while (slot < 0) {
    // Every slot pinned or being read: the MoE block keeps its pins below capacity, so a
    // read finishing (or a pin released) frees one.
    if (!may_wait) return -1;
    slot_changed_.wait(lock);
    slot = victim(l);
  }
  Slot& s = l.slots[static_cast<size_t>(slot)];
  if (s.expert >= 0) l.slot_of[static_cast<size_t>(s.expert)] = -1;
  s.expert = expert;
  s.state = SlotState::kReading;
  s.pins = pin ? 1 : 0;
  s.frequency = 0;
  s.read_ahead = false;
  touch(l, s);
  l.slot_of[static_cast<size_t>(expert)] = slot;
  jobs_.push_back({.layer_index = layer_index, .slot = slot, .expert = expert});
  job_ready_.notify_one();
  return slot;
}

void ExpertStore::request(int layer, std::span<const int32_t> experts) {
  std::unique_lock lock(mutex_);
  const int li = by_layer_[static_cast<size_t>(layer)];
  Layer& l = layers_[static_cast<size_t>(li)];
  ++l.clock;
  if (!l.predicted.empty()) {
    for (const int32_t e : experts) {
      ++stats_.used_after_prediction;
      if (std::binary_search(l.predicted.begin(), l.predicted.end(), e)) ++stats_.predicted_used;
    }
    l.predicted.clear();
  }
  for (const int32_t e : experts) {
    ++stats_.requests;
    const int32_t slot = l.slot_of[static_cast<size_t>(e)];
    if (slot >= 0) {
      Slot& s = l.slots[static_cast<size_t>(slot)];
      ++(s.read_ahead ? stats_.read_ahead_hits : stats_.hits);
      s.read_ahead = false;
      ++s.pins;
      touch(l, s);
    } else {
      ++stats_.misses;
      start_read(lock, li, e, /*pin=*/true, /*may_wait=*/true);
    }
  }
}

bool ExpertStore::ready(int layer, int32_t expert) const {
  std::lock_guard lock(mutex_);
  const Layer& l = layer_of(layer);
  const int32_t slot = l.slot_of[static_cast<size_t>(expert)];
  return slot >= 0 && l.slots[static_cast<size_t>(slot)].state == SlotState::kReady;
}

ExpertRows ExpertStore::wait(int layer, int32_t expert) {
  std::unique_lock lock(mutex_);
  const Layer& l = layer_of(layer);
  const int32_t slot = l.slot_of[static_cast<size_t>(expert)];
  CHECK_MSG(slot >= 0, "expert {} of layer {} was not requested", expert, layer);
  const Slot& s = l.slots[static_cast<size_t>(slot)];
  if (s.state != SlotState::kReady) {
    const auto t0 = std::chrono::steady_clock::now();
    slot_changed_.wait(lock, [&] { return s.state == SlotState::kReady; });
    stats_.wait_seconds += seconds_between(t0, std::chrono::steady_clock::now());
  }
  return s.rows;
}

void ExpertStore::release(int layer, std::span<const int32_t> experts) {
  {
    std::lock_guard lock(mutex_);
    Layer& l = layer_of(layer);
    for (const int32_t e : experts) {
      const int32_t slot = l.slot_of[static_cast<size_t>(e)];
      CHECK(slot >= 0 && l.slots[static_cast<size_t>(slot)].pins > 0);
      --l.slots[static_cast<size_t>(slot)].pins;
    }
  }
  slot_changed_.notify_all();
}

void ExpertStore::predict_next(int layer, const float* h, int64_t n, ThreadPool& pool) {
  const int next = layer + 1;
  if (!serves(next)) return;
  Layer& l = layer_of(next);
  if (l.router.n_mat == 0 || l.router.n_in <= 0) return;
  const int64_t n_expert = l.router.n_out;
  logits_.resize(static_cast<size_t>(n * n_expert));
  cpu::matmul_f32(l.router, 0, h, n, logits_.data(), router_input_, pool);
  // Each token's top-k, then the union; at most n_expert_used reads ahead (the slots the
  // MoE block leaves unpinned for them), the highest-scoring first.
  std::vector<std::pair<float, int32_t>>& picks = predict_picks_;
  std::vector<int32_t>& order = predict_order_;
  picks.clear();
  order.resize(static_cast<size_t>(n_expert));
  const int64_t k = std::min(options_.n_expert_used, n_expert);
  for (int64_t t = 0; t < n; ++t) {
    const float* p = logits_.data() + t * n_expert;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    for (int64_t i = 0; i < k; ++i) picks.push_back({p[order[static_cast<size_t>(i)]], order[static_cast<size_t>(i)]});
  }
  std::sort(picks.begin(), picks.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int32_t>& chosen = predict_chosen_;
  chosen.clear();
  for (const auto& [score, e] : picks) {
    if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    if (static_cast<int64_t>(chosen.size()) == k) break;
  }
  std::unique_lock lock(mutex_);
  const int li = by_layer_[static_cast<size_t>(next)];
  l.predicted = chosen;
  std::sort(l.predicted.begin(), l.predicted.end());
  stats_.predicted += static_cast<int64_t>(chosen.size());
  for (const int32_t e : chosen) {
    if (l.slot_of[static_cast<size_t>(e)] >= 0) continue;
    const int32_t slot = start_read(lock, li, e, /*pin=*/false, /*may_wait=*/false);
    if (slot < 0) break;
    l.slots[static_cast<size_t>(slot)].read_ahead = true;
  }
}

Status ExpertStore::read_expert(const Layer& l, int32_t slot, int32_t expert, std::vector<uint8_t>& staging) const {
  const uint64_t align = file_->alignment();
  uint8_t* base = l.memory.data() + l.slot_stride * static_cast<uint64_t>(slot);
  for (int part = 0; part < 3; ++part) {
    const Part& p = l.parts[part];
    const bool interleave = part == 2 ? l.spec.interleave_down : l.spec.interleave_gate_up;
    const uint64_t offset = options_.data_offset + p.offset + p.bytes * static_cast<uint64_t>(expert);
    const uint64_t begin = align_down(offset, align);
    const uint64_t end = std::min(align_up(offset + p.bytes, align), align_up(file_->size(), align));
    uint8_t* area = base + p.slot_offset;
    // An expert to repack is read into a staging buffer and interleaved from there into the
    // slot: one pass over its bytes instead of a copy and an in-place pass.
    uint8_t* dst = area;
    if (interleave) {
      const size_t need = static_cast<size_t>(end - begin) + 4096;
      if (staging.size() < need) staging.resize(need);
      dst = reinterpret_cast<uint8_t*>(align_up(reinterpret_cast<uintptr_t>(staging.data()), 4096));
    }
    ASSIGN_OR_RETURN(const size_t got, file_->read_at(begin, dst, static_cast<size_t>(end - begin)));
    if (got < offset + p.bytes - begin) {
      return Status::runtime(fmt::format("{}: read failed at byte {}: unexpected end of file", file_->path(), begin + got));
    }
    if (align == 1) file_->drop_cached(offset, p.bytes);  // a buffered file: not in RAM twice
    if (interleave) {
      const uint8_t* src = dst + (offset - begin);
      uint8_t* data = area + (offset - begin);
      for (int64_t r = 0; r < p.n_out; r += cpu::kInterleaveRows) {
        const uint64_t at = static_cast<uint64_t>(r * p.row_bytes);
        cpu::interleave_group(p.type, p.n_in, src + at, data + at);
      }
    }
  }
  return Status::ok();
}

void ExpertStore::reader_main() {
  std::vector<uint8_t> staging;  // an interleaved part's bytes as read (4 KiB-aligned inside)
  std::unique_lock lock(mutex_);
  for (;;) {
    job_ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    const ReadJob job = jobs_.front();
    jobs_.pop_front();
    if (reads_in_flight_++ == 0) busy_since_ = std::chrono::steady_clock::now();
    Layer& l = layers_[static_cast<size_t>(job.layer_index)];
    lock.unlock();
    Status st = read_expert(l, job.slot, job.expert, staging);
    uint8_t* base = l.memory.data() + l.slot_stride * static_cast<uint64_t>(job.slot);
    if (!st) std::memset(base, 0, l.slot_stride);  // defined bytes; status() reports the failure
    ExpertRows rows;
    const uint64_t align = file_->alignment();
    const uint8_t** out[3] = {&rows.gate, &rows.up, &rows.down};
    uint64_t bytes = 0;
    for (int p = 0; p < 3; ++p) {
      const Part& part = l.parts[p];
      const uint64_t offset = options_.data_offset + part.offset + part.bytes * static_cast<uint64_t>(job.expert);
      *out[p] = base + part.slot_offset + (offset - align_down(offset, align));
      bytes += part.bytes;
    }
    lock.lock();
    if (--reads_in_flight_ == 0) stats_.read_busy_seconds += seconds_between(busy_since_, std::chrono::steady_clock::now());
    if (!st && error_) error_ = std::move(st);
    Slot& s = l.slots[static_cast<size_t>(job.slot)];
    s.rows = rows;
    s.state = SlotState::kReady;
    ++stats_.reads;
    stats_.bytes_read += bytes;
    slot_changed_.notify_all();
  }
}

ExpertStoreStats ExpertStore::stats() const {
  std::lock_guard lock(mutex_);
  ExpertStoreStats s = stats_;
  if (reads_in_flight_ > 0) s.read_busy_seconds += seconds_between(busy_since_, std::chrono::steady_clock::now());
  return s;
}

Status ExpertStore::status() const {
  std::lock_guard lock(mutex_);
  return error_;
}

int64_t ExpertStore::experts_in_memory() const {
  int64_t n = 0;
  for (const Layer& l : layers_) n += l.spec.capacity;
  return n;
}

int64_t ExpertStore::experts_total() const {
  int64_t n = 0;
  for (const Layer& l : layers_) n += static_cast<int64_t>(l.slot_of.size());
  return n;
}

}  // namespace moetier
