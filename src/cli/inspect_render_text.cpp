// Human-readable `moetier inspect` report: identity, census, architecture, (plan), notes.
#include <algorithm>

#include "cli/inspect_render.h"
#include "core/format.h"

namespace moetier::inspect {

namespace {

// "10.43 M", "34.66 B", "812" parameters.
std::string format_count(int64_t n) {
  const double d = static_cast<double>(n);
  if (n >= 1'000'000'000) return fmt::format("{:.2f} B", d / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f} M", d / 1e6);
  if (n >= 10'000) return fmt::format("{:.1f} K", d / 1e3);
  return std::to_string(n);
}

std::string bytes(int64_t b) { return format_bytes(static_cast<uint64_t>(std::max<int64_t>(b, 0))); }

void identity(std::string& out, const ReportInput& in) {
  const auto& f = in.file;
  const auto& s = in.summary;
  out += fmt::format("file        {}\n", f.path);
  out += fmt::format("size        {} ({} bytes), GGUF v{}, {} tensors, {} metadata keys\n", bytes(f.file_size),
                     f.file_size, f.version, f.tensors.size(), f.metadata.size());
  out += fmt::format("name        {}\n", s.name.empty() ? "(none)" : s.name);
  out += fmt::format("arch        {}{}\n", s.arch.empty() ? "(none)" : s.arch, s.arch_info ? "" : " (not supported)");
  if (s.file_type) {
    const std::string_view n = file_type_name(*s.file_type);
    out += fmt::format("file type   {} ({})\n", *s.file_type, n.empty() ? "unknown" : n);
  } else {
    out += "file type   (not declared)\n";
  }
  if (in.sha256) out += fmt::format("sha256      {}\n", *in.sha256);
}

void census(std::string& out, const Summary& s) {
  const Census& c = s.census;
  out += "\ntensor census\n";
  out += fmt::format("  {:<8} {:>7} {:>7} {:>12} {:>12} {:>7}\n", "type", "tensors", "%", "params", "bytes", "%");
  for (const auto& r : c.rows) {
    out += fmt::format("  {:<8} {:>7} {:>6.1f}% {:>12} {:>12} {:>6.1f}%\n", dtype_name(r.type), r.n_tensors,
                       percent(r.n_tensors, c.n_tensors), format_count(r.n_params), bytes(r.n_bytes),
                       percent(r.n_bytes, c.n_bytes));
  }
  out += fmt::format("  {:<8} {:>7} {:>6.1f}% {:>12} {:>12} {:>6.1f}%\n", "total", c.n_tensors, 100.0,
                     format_count(c.n_params), bytes(c.n_bytes), 100.0);
  if (s.file_type_mismatch) out += fmt::format("  note: {}\n", *s.file_type_mismatch);
}

std::string attention_layer_list(const HParams& hp) {
  std::vector<std::string> idx;
  for (size_t i = 0; i < hp.layer_kinds.size(); ++i) {
    if (hp.layer_kinds[i] == LayerKind::kAttention) idx.push_back(std::to_string(i));
  }
  if (idx.size() > 12) return fmt::format("every {}th, from {}", hp.full_attention_interval, idx.front());
  std::string s;
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + idx[i];
  return s;
}

void architecture(std::string& out, const Summary& s) {
  if (!s.hparams) return;
  const HParams& hp = *s.hparams;
  out += "\narchitecture\n";
  const int64_t n_attn = hp.n_attention_layers();
  const int64_t n_gdn = hp.n_deltanet_layers();
  std::string layers = fmt::format("{}", hp.n_layer);
  if (n_gdn > 0) {
    layers += fmt::format(": {} Gated DeltaNet + {} full attention (attention at {})", n_gdn, n_attn,
                          attention_layer_list(hp));
  } else {
    layers += ", all full attention";
  }
  if (hp.n_layer_mtp > 0) layers += fmt::format("; + {} MTP layer(s)", hp.n_layer_mtp);
  out += fmt::format("  layers      {}\n", layers);
  out += fmt::format("  attention   {} Q heads / {} KV heads, head dim {} (k) / {} (v){}\n", hp.n_head, hp.n_head_kv,
                     hp.head_dim_k, hp.head_dim_v, hp.attn_output_gate ? ", sigmoid output gate" : "");
  std::string rope = fmt::format("{} of {} dims, base {:g}", hp.n_rot, hp.head_dim_k, hp.rope_base);
  if (hp.rope_sections[0] + hp.rope_sections[1] + hp.rope_sections[2] + hp.rope_sections[3] > 0) {
    rope += fmt::format(", sections [{}, {}, {}, {}]", hp.rope_sections[0], hp.rope_sections[1], hp.rope_sections[2],
                        hp.rope_sections[3]);
  }
  out += fmt::format("  rope        {}\n", rope);
  if (n_gdn > 0) {
    out += fmt::format("  deltanet    {} K heads / {} V heads x {}, conv {}, inner {}\n", hp.ssm_n_group,
                       hp.ssm_dt_rank, hp.ssm_d_state, hp.ssm_d_conv, hp.ssm_d_inner);
  }
  std::string experts = fmt::format("{} routed, {} used per token", hp.n_expert, hp.n_expert_used);
  if (hp.n_expert_shared > 0) experts += fmt::format(", {} shared", hp.n_expert_shared);
  experts += fmt::format("; expert FFN {}", hp.n_ff_exp);
  if (hp.n_expert_shared > 0) experts += fmt::format(", shared FFN {}", hp.n_ff_shexp);
  out += fmt::format("  experts     {}\n", experts);
  out += fmt::format("  embedding   {}, vocab {}, context {}, rms eps {:g}\n", hp.n_embd, hp.n_vocab, hp.n_ctx_train,
                     hp.rms_eps);
  if (s.moe) {
    const MoeCounts& m = *s.moe;
    out += fmt::format("  params      {} total, {} active per token ({:.1f}%)\n", format_count(s.census.n_params),
                       format_count(m.n_params_active), percent(m.n_params_active, s.census.n_params));
    out += fmt::format("  routed      {} of expert weights, {} read per generated token ({} of {} experts/layer)\n",
                       bytes(m.expert_bytes_total), bytes(m.expert_bytes_per_token), hp.n_expert_used, hp.n_expert);
    out += fmt::format("  the rest    {} (attention, DeltaNet, shared experts, router, norms, embeddings)\n",
                       bytes(m.non_expert_bytes));
    out += fmt::format("  per token   {} of weights read per generated token\n", bytes(m.bytes_per_token));
  }
}

void tensor_list(std::string& out, const ReportInput& in) {
  out += "\ntensors\n";
  for (size_t i = 0; i < in.file.tensors.size(); ++i) {
    const auto& t = in.file.tensors[i];
    std::string shape;
    for (uint32_t d = 0; d < t.n_dims; ++d) shape += (d ? " x " : "") + std::to_string(t.ne[d]);
    std::string line = fmt::format("  {:<36} {:<7} {:<20} {:>12} {:<14}", t.name, dtype_name(t.type), shape,
                                   bytes(static_cast<int64_t>(t.n_bytes)), tensor_role_name(in.summary.roles[i]));
    if (in.plan != nullptr) line += " " + in.plan->tensor_devices[i];
    out += line;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  }
}

}  // namespace

std::string render_text(const ReportInput& in) {
  std::string out;
  identity(out, in);
  census(out, in.summary);
  architecture(out, in.summary);
  if (in.list_tensors) tensor_list(out, in);
  if (in.plan != nullptr && in.summary.hparams) {
    out += '\n';
    out += render_plan_text(*in.plan, *in.plan_params, *in.summary.hparams);
  }
  if (!in.summary.notes.empty()) {
    out += "\n";
    for (const auto& n : in.summary.notes) out += fmt::format("note: {}\n", n);
  }
  return out;
}

}  // namespace moetier::inspect
