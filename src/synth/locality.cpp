#include "synth/locality.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "synth/weights.h"

namespace moetier::synth {
namespace {

// The residual stream is split by coordinates (docs/benchmarking.md, "Synthetic models"):
//   n_embd/8  constant: every token embedding holds kConstValue * sign_i there and nothing
//             writes it later, so rows reading only these coordinates compute constants
//             (the files have no bias tensors)
//   3/8       state: only the DeltaNet outputs write it
//   1/4       token: only the token embedding writes it (noise, new every token)
//   1/4       outputs: attention and expert outputs write it, no router or DeltaNet reads it
//             (so deeper layers route like the first: no slow part creeps into "token")
// Mean squares per coordinate of the residual (before normalisation), by design:
constexpr double kConstValue = 0.7;  // the constant part (exactly)
constexpr double kTokenRms = 0.7;    // token embeddings' noise (the default embedding scale)
constexpr double kStateMs = 0.1;     // added to each state coordinate by each DeltaNet layer
// What one MoE block and one attention block add to each output coordinate (the residual
// measured on the qwen3.6-35b-a3b shape: about 0.03 and 0.055). Only the routers' and the
// DeltaNet inputs' scales depend on them, and those tolerate a factor of 2.
constexpr double kMoeMs = 0.03;
constexpr double kAttnMs = 0.05;

// DeltaNet constants: z (the output gate's input, silu(z) scales the output), the decay of
// every head exp(-A dt) with A = 1 and dt = kDt (near 1: beta alone sets the time scale).
constexpr double kGateZ = 1.5;
// head_pair_std assumes steady state; the slower heads are still filling up over a few
// hundred tokens (their mean is smaller, so each pair's share is larger). The state
// coordinates measured on the qwen3.6-35b-a3b shape (32 heads) gain this factor in mean
// square over the design value, averaged over the first 256 tokens.
constexpr double kStateMsGain = 1.8;
constexpr double kDt = 1e-4;
// E[silu(x)] and Var[silu(x)] for x ~ N(0, 1) (numerical integration).
constexpr double kSiluMean = 0.20662;
constexpr double kSiluVar = 0.31308;

double silu(double x) { return x / (1.0 + std::exp(-x)); }

struct Geometry {
  int64_t n_embd, n_const, n_state, n_token, n_out;
};

Geometry geometry(const HParams& hp) {
  // Whole numbers of 32-value quant blocks.
  const int64_t n = hp.n_embd;
  const int64_t n_const = std::max<int64_t>(32, n / 8 / 32 * 32);
  const int64_t n_state = std::max<int64_t>(32, 3 * n / 8 / 32 * 32);
  const int64_t n_token = std::max<int64_t>(32, n / 4 / 32 * 32);
  return {n, n_const, n_state, n_token, n - n_const - n_state - n_token};
}

// Expected mean square of the residual's state, token and output coordinates and of the
// whole vector, `layer`'s input (after_mixer false) or its router's input (true).
struct Energy {
  double state, token, out, all;
};

Energy energy_at(const HParams& hp, const Geometry& g, int64_t layer, bool after_mixer) {
  int64_t n_deltanet = 0, n_attention = 0;
  const int64_t last = after_mixer ? layer : layer - 1;
  for (int64_t il = 0; il <= last && il < static_cast<int64_t>(hp.layer_kinds.size()); ++il) {
    (hp.layer_kinds[static_cast<size_t>(il)] == LayerKind::kDeltaNet ? n_deltanet : n_attention)++;
  }
  Energy e;
  e.state = kStateMs * static_cast<double>(n_deltanet);
  e.token = kTokenRms * kTokenRms;
  e.out = kAttnMs * static_cast<double>(n_attention) + kMoeMs * static_cast<double>(layer);
  e.all = (static_cast<double>(g.n_const) * kConstValue * kConstValue + static_cast<double>(g.n_state) * e.state +
           static_cast<double>(g.n_token) * e.token + static_cast<double>(g.n_out) * e.out) /
          static_cast<double>(g.n_embd);
  return e;
}

// Coefficient that makes a row reading only the constant coordinates (value k * sign_i)
// compute k: the normalised input holds kConstValue * sign_i / rms there.
double const_coefficient(const Geometry& g, const Energy& e) {
  return std::sqrt(e.all) / (static_cast<double>(g.n_const) * kConstValue);
}

// Head j's time scale: log-spaced from tau_min to tau_max over the heads.
double head_tau(const LocalityRows& r, int64_t j) {
  if (r.n_heads <= 1) return r.tau_max;
  return r.tau_min * std::pow(r.tau_max / r.tau_min, static_cast<double>(j) / static_cast<double>(r.n_heads - 1));
}

// The state m of a head follows m <- rho m + beta v with rho = (1 - beta) decay.
double head_beta(double tau) {
  const double rho = 1.0 - 1.0 / tau;
  return 1.0 - rho / std::exp(-kDt);
}

// Standard deviation of one value pair's output (y_c - y_c', before silu(z)): the moving
// average of unit-variance inputs over the head's RMS (which holds the moving average of
// silu(x): mean kSiluMean, variance kSiluVar).
double head_pair_std(double tau) {
  const double beta = head_beta(tau), rho = 1.0 - 1.0 / tau;
  const double var = beta * beta / (1.0 - rho * rho);
  const double mean = kSiluMean * beta / (1.0 - rho);
  return std::sqrt(var) / std::sqrt(mean * mean + kSiluVar * var);
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

float sign_at(const LocalityRows& r, int64_t i) {
  return (mix64(r.sign_seed + static_cast<uint64_t>(i) * kGoldenGamma) & 1) ? 1.0f : -1.0f;
}

}  // namespace

Status check_locality(const HParams& hp, const LocalityParams& p) {
  if (hp.arch != "qwen35moe") {
    return Status::bad_input(fmt::format(
        "--routing locality needs the DeltaNet layers of a qwen35moe preset to carry its state, not {}", hp.arch));
  }
  if (hp.layer_kinds.empty() || hp.layer_kinds[0] != LayerKind::kDeltaNet) {
    return Status::bad_input("--routing locality needs layer 0 to be a DeltaNet layer (--attention-every >= 2)");
  }
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in(p.state, 0, 10)) return Status::bad_input(fmt::format("--locality-state must be in 0..10, got {}", p.state));
  if (!in(p.token, 0, 10)) return Status::bad_input(fmt::format("--locality-token must be in 0..10, got {}", p.token));
  if (!in(p.skew, 0, 10)) return Status::bad_input(fmt::format("--locality-skew must be in 0..10, got {}", p.skew));
  if (!in(p.memory, 2, 2000)) {
    return Status::bad_input(fmt::format("--locality-memory must be in 2..2000 tokens, got {}", p.memory));
  }
  return Status::ok();
}

std::vector<std::pair<std::string, double>> locality_metadata(const LocalityParams& p) {
  return {{"moetier.synth.locality.state", p.state},
          {"moetier.synth.locality.token", p.token},
          {"moetier.synth.locality.skew", p.skew},
          {"moetier.synth.locality.memory", p.memory}};
}

std::string locality_summary(const LocalityParams& p) {
  return fmt::format("routing locality: state {:g}, token {:g}, skew {:g}, memory {:g} tokens (router logit stds; "
                     "a benchmark shape for expert caches, not a real model's routing)",
                     p.state, p.token, p.skew, p.memory);
}

void apply_locality(const TensorSpec& spec, const HParams& hp, const LocalityParams& p, uint64_t seed,
                    TensorInit& init) {
  const std::string_view name = spec.name;
  const Geometry g = geometry(hp);
  LocalityRows r;
  r.n_embd = g.n_embd;
  r.n_const = g.n_const;
  r.n_state = g.n_state;
  r.n_token = g.n_token;
  r.sign_seed = tensor_seed(seed, "locality.constant_signs");
  r.key_dim = hp.ssm_n_group * hp.ssm_d_state;
  r.head_dim = hp.ssm_d_state;
  r.n_heads = hp.ssm_dt_rank;
  r.tau_min = 2.0;
  r.tau_max = p.memory;
  auto structured = [&](LocalityRole role) {
    r.role = role;
    init.kind = InitKind::kLocality;
    init.locality = r;
  };
  if (name == "token_embd.weight") {
    r.a = kConstValue;
    r.b = kTokenRms;
    structured(LocalityRole::kEmbedding);
    return;
  }
  // The MTP block (layer n_layer) keeps the default weights: it is a draft head, not a layer
  // an expert cache sees on every token.
  if (spec.layer < 0 || spec.layer >= hp.n_layer) return;
  const bool deltanet = hp.layer_kinds[static_cast<size_t>(spec.layer)] == LayerKind::kDeltaNet;
  if (ends_with(name, ".attn_output.weight") || ends_with(name, ".ffn_down_exps.weight") ||
      ends_with(name, ".ffn_down_shexp.weight")) {
    r.role = LocalityRole::kBlockOut;  // default Gaussian rows, zeroed outside the output part
    init.locality = r;
    return;
  }
  if (ends_with(name, ".ffn_gate_inp.weight")) {
    const Energy e = energy_at(hp, g, spec.layer, /*after_mixer=*/true);
    r.a = p.skew * const_coefficient(g, e);
    r.b = e.state > 0 ? p.state / std::sqrt(static_cast<double>(g.n_state) * e.state / e.all) : 0.0;
    r.c = p.token / std::sqrt(static_cast<double>(g.n_token) * e.token / e.all);
    structured(LocalityRole::kRouter);
    return;
  }
  if (!deltanet) return;
  const Energy e = energy_at(hp, g, spec.layer, /*after_mixer=*/false);
  if (ends_with(name, ".attn_qkv.weight")) {
    r.a = const_coefficient(g, e);                                            // q = k: N(0, 1) constants
    r.b = 1.0 / std::sqrt(static_cast<double>(g.n_token) * e.token / e.all);  // v: unit variance
    structured(LocalityRole::kQkv);
  } else if (ends_with(name, ".attn_gate.weight")) {
    r.a = kGateZ * const_coefficient(g, e);
    r.tau_max = 0;  // every row the same constant
    structured(LocalityRole::kConstC);
  } else if (ends_with(name, ".ssm_beta.weight")) {
    r.a = const_coefficient(g, e);  // row j: logit(beta_j)
    structured(LocalityRole::kConstC);
  } else if (ends_with(name, ".ssm_alpha.weight")) {
    r.a = 0;
    structured(LocalityRole::kConstant);
  } else if (ends_with(name, ".ssm_a")) {
    r.a = -1;  // A = 1
    structured(LocalityRole::kConstant);
  } else if (ends_with(name, ".ssm_dt.bias")) {
    r.a = std::log(std::expm1(kDt));  // softplus(bias) = kDt
    structured(LocalityRole::kConstant);
  } else if (ends_with(name, ".ssm_norm.weight")) {
    r.a = 1;  // the value pairs need equal weights
    structured(LocalityRole::kConstant);
  } else if (ends_with(name, ".ssm_conv1d.weight")) {
    structured(LocalityRole::kConvIdentity);
  } else if (ends_with(name, ".ssm_out.weight")) {
    const double value_dim = static_cast<double>(hp.ssm_d_inner);
    r.a = std::sqrt(kStateMs / kStateMsGain / (silu(kGateZ) * silu(kGateZ) * value_dim / 2.0));
    structured(LocalityRole::kStateOut);
  }
}

void fill_locality_rows(const TensorInit& init, int64_t first_row, int64_t n_rows, float* out) {
  const LocalityRows& r = init.locality;
  const int64_t n = init.row_elems;
  const int64_t state_end = r.n_const + r.n_state, token_end = state_end + r.n_token;
  for (int64_t k = 0; k < n_rows; ++k) {
    const int64_t row = first_row + k;
    float* dst = out + k * n;
    uint64_t state = row_stream(init.seed, row);
    auto next = [&state] {
      state += kGoldenGamma;
      return unit_gaussian(mix64(state));
    };
    switch (r.role) {
      case LocalityRole::kEmbedding:
        for (int64_t i = 0; i < n; ++i) {
          dst[i] = i < r.n_const   ? static_cast<float>(r.a) * sign_at(r, i)
                   : i < state_end ? 0.0f
                   : i < token_end ? static_cast<float>(r.b) * next()
                                   : 0.0f;
        }
        break;
      case LocalityRole::kRouter: {
        const float popularity = next();
        for (int64_t i = 0; i < n; ++i) {
          dst[i] = i < r.n_const   ? static_cast<float>(r.a) * popularity * sign_at(r, i)
                   : i < state_end ? static_cast<float>(r.b) * next()
                   : i < token_end ? static_cast<float>(r.c) * next()
                                   : 0.0f;
        }
        break;
      }
      case LocalityRole::kQkv: {
        // q and k rows (channels < 2 key_dim): the same constant, read off the constant part;
        // value channel c + d/2 of a head is the negation of channel c (the pair's silu
        // outputs differ by exactly the linear input: silu(x) - silu(-x) = x).
        std::fill(dst, dst + n, 0.0f);
        if (row < 2 * r.key_dim) {
          state = row_stream(init.seed, row % r.key_dim);
          const float gq = next();
          for (int64_t i = 0; i < r.n_const; ++i) dst[i] = static_cast<float>(r.a) * gq * sign_at(r, i);
        } else {
          const int64_t c = (row - 2 * r.key_dim) % r.head_dim, half = r.head_dim / 2;
          const float sign = c < half ? 1.0f : -1.0f;
          state = row_stream(init.seed, c < half ? row : row - half);
          for (int64_t i = state_end; i < token_end; ++i) dst[i] = sign * static_cast<float>(r.b) * next();
        }
        break;
      }
      case LocalityRole::kConvIdentity:
        std::fill(dst, dst + n, 0.0f);
        dst[n - 1] = 1.0f;  // the last tap is the current token
        break;
      case LocalityRole::kConstC: {
        // tau_max > 0: row j is head j's logit(beta_j); else every row kGateZ (folded into a).
        double value = r.a;
        if (r.tau_max > 0) {
          const double beta = head_beta(head_tau(r, row));
          value *= std::log(beta / (1.0 - beta));
        }
        std::fill(dst, dst + n, 0.0f);
        for (int64_t i = 0; i < std::min(n, r.n_const); ++i) dst[i] = static_cast<float>(value) * sign_at(r, i);
        break;
      }
      case LocalityRole::kConstant:
        std::fill(dst, dst + n, static_cast<float>(r.a));
        break;
      case LocalityRole::kStateOut: {
        // Output coordinate `row`: zero outside the state part; else per head j, weights of
        // its first half of the value channels scaled by 1 / head_pair_std (every time scale
        // contributes the same variance), the second half their negation.
        std::fill(dst, dst + n, 0.0f);
        if (row < r.n_const || row >= state_end) break;
        const int64_t half = r.head_dim / 2;
        for (int64_t j = 0; j * r.head_dim < n; ++j) {
          const float scale = static_cast<float>(r.a / head_pair_std(head_tau(r, j)));
          float* head = dst + j * r.head_dim;
          for (int64_t c = 0; c < half; ++c) {
            head[c] = scale * next();
            head[c + half] = -head[c];
          }
        }
        break;
      }
      case LocalityRole::kNone:
      case LocalityRole::kBlockOut:
        CHECK_MSG(false, "locality role without structured rows");
        break;
    }
  }
}

}  // namespace moetier::synth
