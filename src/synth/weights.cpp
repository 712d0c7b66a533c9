#include "synth/weights.h"

#include <algorithm>
#include <cmath>

#include "synth/locality.h"

namespace moetier::synth {
namespace {

constexpr uint64_t kGolden = kGoldenGamma;

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Uniform in [0, 1) from the top 53 bits.
inline double unit_uniform(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

// Sum of the four 16-bit lanes of one 64-bit draw: mean 4 * 32767.5, variance
// 4 * (65536^2 - 1) / 12. Returns the standardised value (mean 0, variance 1).
float unit_gaussian(uint64_t bits) {
  const uint32_t sum = static_cast<uint32_t>(bits & 0xFFFF) + static_cast<uint32_t>((bits >> 16) & 0xFFFF) +
                       static_cast<uint32_t>((bits >> 32) & 0xFFFF) + static_cast<uint32_t>(bits >> 48);
  constexpr float kMean = 4.0f * 32767.5f;
  const float kInvStd = static_cast<float>(1.0 / std::sqrt(4.0 * (65536.0 * 65536.0 - 1.0) / 12.0));
  return (static_cast<float>(sum) - kMean) * kInvStd;
}

uint64_t row_stream(uint64_t tensor_seed, int64_t row) {
  return mix64(tensor_seed ^ mix64(static_cast<uint64_t>(row) * kGolden + 1));
}

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t tensor_seed(uint64_t seed, std::string_view tensor_name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a offset basis
  for (unsigned char c : tensor_name) {
    h ^= c;
    h *= 0x100000001B3ull;  // FNV prime
  }
  return mix64(h ^ mix64(seed + kGolden));
}

TensorInit tensor_init(const TensorSpec& spec, const HParams& hp, uint64_t seed) {
  TensorInit init;
  init.seed = tensor_seed(seed, spec.name);
  init.row_elems = spec.ne.empty() ? 1 : spec.ne[0];
  init.rows_per_slice = spec.ne.size() > 1 ? spec.ne[1] : 1;
  const std::string_view name = spec.name;
  const double fan_in = static_cast<double>(init.row_elems);
  auto gaussian = [&](double stddev) {
    init.kind = InitKind::kGaussian;
    init.stddev = static_cast<float>(stddev);
  };
  if (name == "token_embd.weight") {
    gaussian(0.7);
  } else if (name == "output.weight") {
    gaussian(3.0 / std::sqrt(fan_in));
    // The last five ids are the special tokens of synthetic vocabularies (and of most real
    // Qwen vocabularies' first added tokens); damp them as the ref models do.
    if (hp.n_vocab > 5) {
      init.scaled_rows_from = init.rows_per_slice - 5;
      init.row_scale = 0.3f;
    }
  } else if (contains(name, "_norm.weight")) {
    init.kind = InitKind::kNormWeight;
    init.mean = 1.0f;
    init.stddev = 0.05f;
  } else if (name.size() >= 6 && name.substr(name.size() - 6) == ".ssm_a") {
    init.kind = InitKind::kSsmA;
  } else if (contains(name, "ssm_dt")) {
    init.kind = InitKind::kSsmDtBias;
  } else if (contains(name, "ssm_conv1d")) {
    gaussian(1.0 / std::sqrt(fan_in));  // fan_in = d_conv taps
  } else if (contains(name, "ffn_gate_inp_shexp")) {
    gaussian(1.0 / std::sqrt(fan_in));
  } else if (contains(name, "ffn_gate_inp")) {
    gaussian(3.0 / std::sqrt(fan_in));
  } else if (contains(name, "ssm_alpha")) {
    gaussian(0.5 / std::sqrt(fan_in));
  } else if (contains(name, "attn_output") || contains(name, "ssm_out") || contains(name, "ffn_down")) {
    gaussian(0.5 / std::sqrt(fan_in));
  } else {
    gaussian(1.0 / std::sqrt(fan_in));
  }
  return init;
}

void fill_rows(const TensorInit& init, int64_t first_row, int64_t n_rows, float* out) {
  const int64_t n = init.row_elems;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t row = first_row + r;
    float* dst = out + r * n;
    // One independent splitmix64 stream per row: state starts at a hash of (tensor, row).
    uint64_t state = row_stream(init.seed, row);
    switch (init.kind) {
      case InitKind::kLocality:
        fill_locality_rows(init, row, 1, dst);
        break;
      case InitKind::kGaussian:
      case InitKind::kNormWeight: {
        float scale = init.stddev;
        if (init.scaled_rows_from >= 0 && init.rows_per_slice > 0 && row % init.rows_per_slice >= init.scaled_rows_from) {
          scale *= init.row_scale;
        }
        for (int64_t i = 0; i < n; ++i) {
          state += kGolden;
          dst[i] = init.mean + scale * unit_gaussian(mix64(state));
        }
        // --routing locality: block outputs write only the output part of the residual.
        if (init.locality.role == LocalityRole::kBlockOut) {
          const LocalityRows& loc = init.locality;
          if (row % loc.n_embd < loc.n_const + loc.n_state + loc.n_token) std::fill(dst, dst + n, 0.0f);
        }
        break;
      }
      case InitKind::kSsmA:
        for (int64_t i = 0; i < n; ++i) {
          state += kGolden;
          const double a = 1.0 + 15.0 * unit_uniform(mix64(state));  // A in [1, 16)
          dst[i] = static_cast<float>(-a);                           // -exp(A_log), A_log = log(A)
        }
        break;
      case InitKind::kSsmDtBias:
        for (int64_t i = 0; i < n; ++i) {
          state += kGolden;
          const double dt = std::exp(std::log(1e-3) + (std::log(1e-1) - std::log(1e-3)) * unit_uniform(mix64(state)));
          dst[i] = static_cast<float>(std::log(std::expm1(dt)));  // softplus(dst) == dt
        }
        break;
    }
  }
}

}  // namespace moetier::synth
