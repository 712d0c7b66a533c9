#include "tune/bench_measurer.h"

#include <algorithm>
#include <cstdio>

namespace moetier::tune {

bench::TestSpec to_test_spec(const Candidate& c, const std::string& model, int64_t n_prompt, int64_t n_gen) {
  return bench::TestSpec{.model = model,
                         .n_gpu_layers = c.n_gpu_layers,
                         .n_cpu_moe = c.n_cpu_moe,
                         .use_mmap = c.use_mmap,
                         .n_ubatch = c.n_ubatch,
                         .type_k = c.type_kv,
                         .type_v = c.type_kv,
                         .n_threads = c.n_threads,
                         .n_prompt = n_prompt,
                         .n_gen = n_gen};
}

Status BenchMeasurer::open(std::span<const Candidate> set, RunSize size, int64_t repetitions) {
  CHECK(!set.empty());
  entries_.clear();
  repetitions_ = repetitions;
  std::vector<bench::TestSpec> tests;
  for (const Candidate& c : set) {
    tests.push_back(to_test_spec(c, params_.model_path, size.n_prompt, 0));
    tests.push_back(to_test_spec(c, params_.model_path, 0, size.n_gen));
  }
  const bool mmap = set.front().use_mmap;
  const bench::RunOptions base{.device = params_.device,
                               .vram_budget_mib = params_.vram_budget_mib,
                               .topology = params_.env.cpu_topology,
                               .usable_cpus = params_.env.usable_cpu_list,
                               .cpu = params_.cpu};
  if (!loaded_ || loaded_->use_mmap != mmap) {
    loaded_.reset();  // free the previous load first: two copies of a big model may not fit
    auto m = bench::load_bench_model(params_.model_path,
                                     {.use_mmap = mmap, .tests = std::span<const bench::TestSpec>(tests), .run = &base});
    if (!m) return m.status();
    loaded_ = std::move(m).value();
    info_ = loaded_->info;
  }
  for (size_t i = 0; i < set.size(); ++i) {
    bench::RunOptions options = base;
    options.repetitions = repetitions;
    options.seed = params_.seed + static_cast<uint32_t>(2 * i);
    options.quiet = true;
    Entry e;
    e.pp = std::make_unique<bench::TestRun>(tests[2 * i], options, loaded_->info);
    options.seed += 1;
    e.tg = std::make_unique<bench::TestRun>(tests[2 * i + 1], options, loaded_->info);
    entries_.push_back(std::move(e));
  }
  return Status::ok();
}

Result<RepTiming> BenchMeasurer::repetition(size_t i, int64_t rep) {
  CHECK(loaded_.has_value() && i < entries_.size());
  Entry& e = entries_[i];
  Status st = Status::ok();
  if (!e.prepared) {
    st = e.pp->prepare(*loaded_);
    if (st.is_ok()) st = e.tg->prepare(*loaded_);
    e.prepared = st.is_ok();
  }
  if (st.is_ok()) st = e.pp->repetition(*loaded_, rep);
  if (st.is_ok()) st = e.tg->repetition(*loaded_, rep);
  if (!st.is_ok()) {
    // The placement may be half made: force the next candidate to place the model afresh.
    loaded_->placement = "(failed)";
    e.failed = true;
    return st;
  }
  e.ran = true;
  return RepTiming{.pp_s = static_cast<double>(e.pp->samples_ns().back()) / 1e9,
                   .tg_s = static_cast<double>(e.tg->samples_ns().back()) / 1e9};
}

Result<std::vector<Measurement>> BenchMeasurer::close() {
  CHECK(loaded_.has_value());
  std::vector<Measurement> out;
  for (Entry& e : entries_) {
    Measurement m;
    if (e.ran && !e.failed) {
      const bench::TestResult pp = e.pp->finish(*loaded_);
      const bench::TestResult tg = e.tg->finish(*loaded_);
      m.pp_ts = pp.samples_ts();
      m.tg_ts = tg.samples_ts();
      // The candidate's footprint: the larger of its two tests' peaks (the pp test's scratch
      // is the larger one; the tg test's KV cache is the same size).
      for (const bench::TestResult* r : {&pp, &tg}) {
        if (auto rss = r->rss_peak_minus_idle_bytes(params_.env)) m.rss_bytes = std::max(m.rss_bytes.value_or(0), *rss);
        if (r->vram_peak_minus_idle_bytes) {
          m.vram_bytes = std::max(m.vram_bytes.value_or(0), *r->vram_peak_minus_idle_bytes);
        }
      }
    }
    out.push_back(std::move(m));
  }
  entries_.clear();
  return out;
}

}  // namespace moetier::tune
