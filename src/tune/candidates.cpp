#include "tune/candidates.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace moetier::tune {

namespace {

std::string kv_name(DType t) {
  std::string s(dtype_name(t));
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The thread counts to try, the start (all physical cores) first: physical - 1 leaves a
// core for the OS and the GPU driver's thread, physical / 2 shows whether memory bandwidth
// is already saturated with half of them.
std::vector<int64_t> thread_counts(const SpaceParams& p) {
  if (!p.threads.empty()) return p.threads;
  const int64_t phys = std::max<int64_t>(1, p.physical_cores);
  std::vector<int64_t> out = {phys};
  for (int64_t t : {phys - 1, phys / 2}) {
    if (t >= 1 && std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

}  // namespace

const char* purpose_name(Purpose p) { return p == Purpose::kServe ? "serve" : "bench"; }

std::vector<Candidate> build_candidates(const SpaceParams& p) {
  const std::vector<int64_t> threads = thread_counts(p);
  const DType kv0 = p.kv_types.empty() ? DType::F16 : p.kv_types.front();
  Candidate start{.n_gpu_layers = p.gpu ? p.fit_n_gpu_layers : 0,
                  .n_cpu_moe = p.gpu ? p.fit_n_cpu_moe : 0,
                  .n_ubatch = 512,
                  .n_threads = threads.front(),
                  .use_mmap = true,
                  .type_kv = kv0,
                  .why = p.gpu ? "start (--fit's choice)" : "start (CPU only)"};
  std::vector<Candidate> out = {start};
  const auto add = [&](Candidate c, std::string why, bool check_fit) {
    c.why = std::move(why);
    if (std::find(out.begin(), out.end(), c) != out.end()) return;
    if (check_fit && p.fits && !p.fits(c)) return;
    out.push_back(std::move(c));
  };
  // Placement neighbours, nearest first: -ncmoe N±1, N±2 (whole blocks' experts moved on or
  // off the GPU), then -cmoe (every expert on the CPU, the users' deployment), then the CPU
  // alone (the users' "offload all or nothing" for the dense part).
  if (p.gpu && p.fit_n_gpu_layers > 0) {
    for (int64_t d : {-1, +1, -2, +2}) {
      const int64_t n = p.fit_n_cpu_moe + d;
      if (n < 0 || n > p.n_layer_all) continue;
      Candidate c = start;
      c.n_cpu_moe = n;
      add(c, fmt::format("-ncmoe {} (N{:+})", n, d), true);
    }
    Candidate cmoe = start;
    cmoe.n_cpu_moe = p.n_layer_all;
    add(cmoe, "-cmoe", true);
  }
  if (p.gpu && start.n_gpu_layers != 0) {
    Candidate cpu = start;
    cpu.n_gpu_layers = 0;
    cpu.n_cpu_moe = 0;
    add(cpu, "CPU only", false);
  }
  for (size_t i = 1; i < threads.size(); ++i) {
    Candidate c = start;
    c.n_threads = threads[i];
    add(c, fmt::format("-t {}", threads[i]), false);
  }
  // -ub only changes how prompts are cut into micro-batches: searched for serve (prompt
  // speed is half its score), not for bench (generation alone). Smaller micro-batches need
  // less scratch, so they may fit where 512 does not.
  if (p.purpose == Purpose::kServe) {
    for (int64_t ub : {256, 128}) {
      Candidate c = start;
      c.n_ubatch = ub;
      add(c, fmt::format("-ub {}", ub), true);
    }
  }
  {
    Candidate c = start;
    c.use_mmap = false;
    add(c, "--no-mmap", false);
  }
  for (size_t i = 1; i < p.kv_types.size(); ++i) {
    Candidate c = start;
    c.type_kv = p.kv_types[i];
    add(c, fmt::format("KV {}", kv_name(p.kv_types[i])), true);
  }
  return out;
}

std::string candidate_flags(const Candidate& c, Purpose purpose, int64_t n_layer_all) {
  std::string s = fmt::format("-t {}", c.n_threads);
  if (c.n_ubatch != 512) s += fmt::format(" -ub {}", c.n_ubatch);
  if (c.n_gpu_layers == 0) {
    s += " -ngl 0";
  } else {
    s += fmt::format(" -ngl {}", c.n_gpu_layers >= n_layer_all + 1 ? std::string("99") : std::to_string(c.n_gpu_layers));
    if (c.n_cpu_moe >= n_layer_all) {
      // bench has no -cmoe; -ncmoe n_layer_all is the same placement there.
      s += purpose == Purpose::kServe ? std::string(" -cmoe") : fmt::format(" -ncmoe {}", n_layer_all);
    } else if (c.n_cpu_moe > 0) {
      s += fmt::format(" -ncmoe {}", c.n_cpu_moe);
    }
  }
  if (!c.use_mmap) s += purpose == Purpose::kServe ? " --no-mmap" : " -mmp 0";
  if (c.type_kv != DType::F16) s += fmt::format(" -ctk {0} -ctv {0}", kv_name(c.type_kv));
  return s;
}

int64_t complexity(const Candidate& c) {
  return (c.n_ubatch != 512 ? 1 : 0) + (c.use_mmap ? 0 : 1) + (c.type_kv != DType::F16 ? 1 : 0) +
         (c.n_cpu_moe > 0 ? 1 : 0);
}

}  // namespace moetier::tune
