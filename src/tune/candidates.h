// `moetier tune`'s search space: the configurations worth measuring, built from the memory
// plan without loading any weights. One knob at a time around a starting point (the users'
// rule "sweep one knob with the others fixed"): --fit's placement, all physical cores,
// -ub 512, mmap, f16 KV; then its -ncmoe neighbours that fit the budget, -cmoe, CPU only,
// fewer threads, smaller -ub (serve only: -ub changes prompt speed, never generation), no
// mmap and the KV types the user allows. Pure functions: unit-tested without a model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace moetier::tune {

// What the winner is for: `serve` scores a chat turn (prompt and generation), `bench`
// scores generation alone (llama-bench's tg figure).
enum class Purpose { kServe, kBench };

// One configuration. n_gpu_layers and n_cpu_moe as llama.cpp counts them: n_gpu_layers
// n_layer_all + 1 = every block and the output layer, 0 = CPU only; n_cpu_moe == n_layer_all
// is -cmoe (every routed expert on the CPU).
struct Candidate {
  int64_t n_gpu_layers = 0;
  int64_t n_cpu_moe = 0;
  int64_t n_ubatch = 512;
  int64_t n_threads = 1;
  bool use_mmap = true;
  DType type_kv = DType::F16;  // -ctk and -ctv
  // Why it is in the list: "start (--fit's choice)", "-ncmoe 33 (N-1)", "-t 1", ...
  std::string why;
  bool operator==(const Candidate& o) const {
    return n_gpu_layers == o.n_gpu_layers && n_cpu_moe == o.n_cpu_moe && n_ubatch == o.n_ubatch &&
           n_threads == o.n_threads && use_mmap == o.use_mmap && type_kv == o.type_kv;
  }
};

// The inputs of the search space.
struct SpaceParams {
  Purpose purpose = Purpose::kServe;
  // A GPU is usable: its knobs are searched. false: everything runs on the CPU and the
  // placement knobs collapse to -ngl 0.
  bool gpu = false;
  int64_t n_layer_all = 0;        // blocks incl. MTP blocks (-ngl all = n_layer_all + 1)
  int64_t fit_n_gpu_layers = 0;   // --fit's choice (FitResult), the starting placement
  int64_t fit_n_cpu_moe = 0;
  int64_t physical_cores = 1;
  std::vector<int64_t> threads;   // -t LIST; empty: physical, physical - 1, physical / 2
  std::vector<DType> kv_types = {DType::F16};  // --allow-kv-types; the first is the start
  // Whether a placement fits the memory budget (the plan's answer); empty: everything fits.
  std::function<bool(const Candidate&)> fits;
};

// The candidates in priority order: the starting point first (it is always measured), then
// the neighbours, the nearest first, so a short --time-budget keeps the likeliest ones.
// Duplicates and placements that do not fit are left out.
std::vector<Candidate> build_candidates(const SpaceParams& params);

// The command-line flags of a candidate for `moetier serve` (llama-server's spelling) or
// `moetier bench` (llama-bench's): "-t 2 -ub 512 -ngl 0" ... Only what differs from the
// command's defaults is spelled out, except -t and the placement, which are always given.
std::string candidate_flags(const Candidate& c, Purpose purpose, int64_t n_layer_all);

// How far a candidate is from the commands' defaults (flags spelled out beyond -t and the
// placement): the "simpler" of two equally fast candidates has fewer.
int64_t complexity(const Candidate& c);

// "serve" or "bench".
const char* purpose_name(Purpose p);

}  // namespace moetier::tune
